// Command broker benchmarks firehose's MQTT broker (cmd/broker, built on
// mochi-mqtt) against Debian's mosquitto under identical load, in one run,
// and prints the ratio of received messages per second.
//
//	go run ./bench/broker                 # default: QoS 1 then QoS 0, 3 rounds each
//	go run ./bench/broker -qos 1 -rounds 5 -duration 20s
//	go run ./bench/broker -ours-addr 127.0.0.1:1883 -user bench -pass secret
//
// See README.md in this directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

const (
	nameOurs      = "ours"
	nameMosquitto = "mosquitto"
)

// params are the command-line settings of one benchmark run.
type params struct {
	Brokers  []string      `json:"brokers"`
	QoS      []int         `json:"qos"`
	Pubs     int           `json:"pubs"`
	Subs     int           `json:"subs"`
	Size     int           `json:"size"`
	Duration time.Duration `json:"duration_ns"`
	Drain    time.Duration `json:"drain_ns"`
	Rounds   int           `json:"rounds"`
	Inflight int           `json:"inflight"`
	Rate     float64       `json:"rate"`

	User string `json:"user"`
	Pass string `json:"-"`

	OursAddr     string        `json:"ours_addr,omitempty"`
	OursPkg      string        `json:"ours_pkg,omitempty"`
	OursBin      string        `json:"ours_bin,omitempty"`
	MosqAddr     string        `json:"mosquitto_addr,omitempty"`
	MosqBin      string        `json:"mosquitto_bin,omitempty"`
	MosqPasswd   string        `json:"mosquitto_passwd,omitempty"`
	ReadyTimeout time.Duration `json:"-"`
	PerfDir      string        `json:"perf_dir,omitempty"`
	OursEnv      []string      `json:"ours_env,omitempty"`
}

func defaultParams() params {
	return params{
		Brokers:      []string{nameMosquitto, nameOurs},
		QoS:          []int{1, 0},
		Pubs:         4,
		Subs:         4,
		Size:         256,
		Duration:     10 * time.Second,
		Drain:        5 * time.Second,
		Rounds:       3,
		Inflight:     64,
		User:         "bench",
		Pass:         "bench-secret",
		OursPkg:      "./cmd/broker",
		MosqBin:      "/usr/sbin/mosquitto",
		MosqPasswd:   "mosquitto_passwd",
		ReadyTimeout: 30 * time.Second,
	}
}

func main() { os.Exit(realMain()) }

func realMain() int {
	p := defaultParams()
	var brokers, qos string
	var jsonOut bool
	flag.StringVar(&brokers, "brokers", "ours,mosquitto", "brokers to measure (comma-separated: ours, mosquitto); rounds always run mosquitto first, then ours")
	flag.StringVar(&qos, "qos", "1,0", "QoS levels to measure, in order: 0, 1 or 1,0")
	flag.IntVar(&p.Pubs, "pubs", p.Pubs, "number of publishers (publisher i publishes to bench/<i>)")
	flag.IntVar(&p.Subs, "subs", p.Subs, "number of subscribers (each subscribes to bench/#)")
	flag.IntVar(&p.Size, "size", p.Size, fmt.Sprintf("payload bytes (min %d)", mqttload.MinPayload))
	flag.DurationVar(&p.Duration, "duration", p.Duration, "publish phase per measurement")
	flag.DurationVar(&p.Drain, "drain", p.Drain, "max drain phase after publishing, before counting lost messages")
	flag.IntVar(&p.Rounds, "rounds", p.Rounds, "rounds per QoS; the report shows medians over rounds")
	flag.IntVar(&p.Inflight, "inflight", p.Inflight, "max unacknowledged QoS 1 publishes per publisher")
	flag.Float64Var(&p.Rate, "rate", 0, "msgs/s per publisher (0 = as fast as possible)")
	flag.StringVar(&p.User, "user", p.User, "MQTT username (also used for the brokers the benchmark starts)")
	flag.StringVar(&p.Pass, "pass", p.Pass, "MQTT password (also used for the brokers the benchmark starts)")
	flag.StringVar(&p.OursAddr, "ours-addr", "", "host:port of an already running firehose broker (default: build and start ./cmd/broker)")
	flag.StringVar(&p.OursPkg, "ours-pkg", p.OursPkg, "package to build for our broker")
	flag.StringVar(&p.OursBin, "ours-bin", "", "prebuilt broker binary to start instead of building -ours-pkg")
	flag.StringVar(&p.MosqAddr, "mosquitto-addr", "", "host:port of an already running mosquitto (default: start -mosquitto-bin)")
	flag.StringVar(&p.MosqBin, "mosquitto-bin", p.MosqBin, "mosquitto binary")
	flag.StringVar(&p.MosqPasswd, "mosquitto-passwd", p.MosqPasswd, "mosquitto_passwd binary")
	flag.BoolVar(&jsonOut, "json", false, "print results as JSON instead of tables")
	flag.StringVar(&p.PerfDir, "perf-dir", "", "record a CPU profile (perf record -g) of each broker the benchmark starts into `DIR`/<broker>.perf.data")
	flag.Var((*benchkit.ListFlag)(&p.OursEnv), "ours-env", "extra `KEY=VALUE` environment for the broker we start, e.g. GOGC=400 (repeatable; for tuning experiments)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the load generator itself to this file")
	flag.Parse()

	prog := benchkit.Program{Name: "broker", Stopped: "brokers", CPUProfile: *cpuProfile, JSON: jsonOut}
	var err error
	if p.Brokers, err = parseBrokers(brokers); err != nil {
		return prog.Fail(err)
	}
	if p.QoS, err = parseQoS(qos); err != nil {
		return prog.Fail(err)
	}
	if err := p.validate(); err != nil {
		return prog.Fail(err)
	}
	return prog.Run(func(ctx context.Context) (benchkit.Report, error) { return run(ctx, p, os.Stderr) })
}

func parseBrokers(s string) ([]string, error) {
	var want [2]bool
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case nameMosquitto:
			want[0] = true
		case nameOurs:
			want[1] = true
		case "":
		default:
			return nil, fmt.Errorf("-brokers: unknown broker %q (want ours, mosquitto)", f)
		}
	}
	// Fixed order within a round: mosquitto, ours.
	var out []string
	if want[0] {
		out = append(out, nameMosquitto)
	}
	if want[1] {
		out = append(out, nameOurs)
	}
	if len(out) == 0 {
		return nil, errors.New("-brokers: nothing selected")
	}
	return out, nil
}

func parseQoS(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		q, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || q < 0 || q > 1 {
			return nil, fmt.Errorf("-qos: %q is not 0 or 1", f)
		}
		out = append(out, q)
	}
	return out, nil
}

func (p params) validate() error {
	switch {
	case p.Pubs < 1 || p.Subs < 1:
		return errors.New("-pubs and -subs must be >= 1")
	case p.Size < mqttload.MinPayload:
		return fmt.Errorf("-size must be >= %d (timestamp, sequence, publisher, run id)", mqttload.MinPayload)
	case p.Size > 1<<20:
		return errors.New("-size must be <= 1 MiB")
	case p.Duration <= 0 || p.Drain < 0:
		return errors.New("-duration must be > 0 and -drain >= 0")
	case p.Rounds < 1:
		return errors.New("-rounds must be >= 1")
	case p.Inflight < 1 || p.Inflight > 65535:
		return errors.New("-inflight must be in 1..65535")
	case p.Rate < 0:
		return errors.New("-rate must be >= 0")
	}
	return benchkit.CheckEnv("ours-env", p.OursEnv)
}

func (p params) has(name string) bool {
	for _, b := range p.Brokers {
		if b == name {
			return true
		}
	}
	return false
}

// run starts the brokers that need starting, runs all measurements and
// stops the brokers again. Progress goes to progress.
func run(ctx context.Context, p params, progress io.Writer) (rep *report, err error) {
	rep = &report{Params: p, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Started: time.Now()}
	dir, err := os.MkdirTemp("", "firehose-bench-broker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	var procs []*benchkit.Proc
	defer func() {
		for _, b := range procs {
			if serr := b.Stop(); serr != nil && err == nil {
				err = serr
			}
		}
	}()
	targets := map[string]target{}
	var perfs []*benchkit.PerfRecorder
	defer func() {
		for _, r := range perfs {
			r.Stop()
		}
	}()
	profile := func(tg target) error {
		if p.PerfDir == "" || tg.Proc == nil {
			return nil
		}
		if err := os.MkdirAll(p.PerfDir, 0o755); err != nil {
			return err
		}
		out := filepath.Join(p.PerfDir, tg.Name+".perf.data")
		r, err := benchkit.StartPerf(tg.Proc.PID(), out)
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "recording perf profile of %s (pid %d) into %s\n", tg.Name, tg.Proc.PID(), out)
		perfs = append(perfs, r)
		return nil
	}

	if p.has(nameMosquitto) {
		tg := target{Name: nameMosquitto, Addr: p.MosqAddr, User: p.User, Pass: p.Pass}
		info := brokerInfo{Name: nameMosquitto, Addr: p.MosqAddr, External: p.MosqAddr != ""}
		if p.MosqAddr == "" {
			info.Version = mosquittoVersion(p.MosqBin)
			info.Setup = fmt.Sprintf("%s (%s), max_inflight_messages %d, max_queued_messages %d, password_file + acl_file",
				p.MosqBin, info.Version, mosquittoMaxInflight, mosquittoMaxQueued)
			mdir := dir + "/mosquitto"
			if err := os.Mkdir(mdir, 0o700); err != nil {
				return nil, err
			}
			proc, addr, err := startMosquitto(p.MosqBin, p.MosqPasswd, mdir, p.User, p.Pass)
			if err != nil {
				return nil, err
			}
			procs = append(procs, proc)
			tg.Addr, tg.Proc, info.Addr = addr, proc, addr
		} else {
			info.Setup = "already running (-mosquitto-addr)"
		}
		if err := mqttload.WaitReady(ctx, tg.Addr, p.User, p.Pass, tg.Proc, p.ReadyTimeout); err != nil {
			return nil, fmt.Errorf("mosquitto: %w", err)
		}
		targets[nameMosquitto] = tg
		if err := profile(tg); err != nil {
			return nil, err
		}
		rep.Brokers = append(rep.Brokers, info)
	}

	if p.has(nameOurs) {
		tg := target{Name: nameOurs, Addr: p.OursAddr, User: p.User, Pass: p.Pass}
		info := brokerInfo{Name: nameOurs, Addr: p.OursAddr, External: p.OursAddr != ""}
		if p.OursAddr == "" {
			odir := dir + "/ours"
			if err := os.Mkdir(odir, 0o700); err != nil {
				return nil, err
			}
			bin := p.OursBin
			if bin == "" {
				fmt.Fprintf(progress, "building %s ...\n", p.OursPkg)
				if bin, err = buildOurs(ctx, p.OursPkg, odir); err != nil {
					return nil, err
				}
				info.Setup = fmt.Sprintf("built from %s, bcrypt (cost 10) user with publish bench/#", p.OursPkg)
			} else {
				info.Setup = fmt.Sprintf("binary %s, bcrypt (cost 10) user with publish bench/#", bin)
			}
			if len(p.OursEnv) > 0 {
				info.Setup += ", env " + strings.Join(p.OursEnv, " ")
			}
			proc, addr, err := startOurs(bin, odir, p.User, p.Pass, p.OursEnv)
			if err != nil {
				return nil, err
			}
			procs = append(procs, proc)
			tg.Addr, tg.Proc, info.Addr = addr, proc, addr
		} else {
			info.Setup = "already running (-ours-addr)"
		}
		if err := mqttload.WaitReady(ctx, tg.Addr, p.User, p.Pass, tg.Proc, p.ReadyTimeout); err != nil {
			return nil, fmt.Errorf("ours: %w", err)
		}
		targets[nameOurs] = tg
		if err := profile(tg); err != nil {
			return nil, err
		}
		rep.Brokers = append(rep.Brokers, info)
	}

	for _, q := range p.QoS {
		l := load{
			Pubs: p.Pubs, Subs: p.Subs, QoS: byte(q), Size: p.Size,
			Duration: p.Duration, Drain: p.Drain, Inflight: p.Inflight, Rate: p.Rate,
		}
		for r := 1; r <= p.Rounds; r++ {
			for _, name := range p.Brokers { // mosquitto, ours, mosquitto, ours, ...
				logOffset := targets[name].Proc.LogSize()
				m, err := measure(ctx, targets[name], l, r)
				if err != nil {
					return nil, fmt.Errorf("QoS %d round %d: %w", q, r, err)
				}
				fmt.Fprintf(progress, "qos %d round %d/%d %-9s pub %9.0f/s  recv %9.0f/s  lost %d  dup %d  p50 %s  p99 %s  broker cpu %s (%sµs/msg)  gen cpu %s  other cpu %s\n",
					q, r, p.Rounds, name, m.PubRate, m.RecvRate, m.Lost, m.Dup, benchkit.FormatDuration(m.P50), benchkit.FormatDuration(m.P99),
					benchkit.FormatPercent(m.BrokerCPU), benchkit.FormatMicros(m.BrokerUsPerMsg), benchkit.FormatPercent(m.GenCPU), benchkit.FormatPercent(m.OtherCPU))
				if m.Lost > 0 {
					for _, l := range targets[name].Proc.LogMatches(logOffset, "drop", 2) {
						fmt.Fprintf(progress, "    %s log: %s\n", name, l)
					}
				}
				rep.Measurements = append(rep.Measurements, m)
			}
		}
	}
	rep.summarize()
	return rep, nil
}
