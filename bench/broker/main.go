// Command broker benchmarks firehose's MQTT broker (cmd/broker, built on
// mochi-mqtt) against Debian's mosquitto under identical load, in one run,
// in two shapes of load: mqtt-benchmark's (clients that each wait for every
// PUBACK, optionally one subscriber) and a windowed fan-out (publishers with
// in-flight windows, several subscribers). It prints the ratios.
//
//	go run ./bench/broker                 # default: both shapes, QoS 1 then QoS 0, 3 rounds each
//	go run ./bench/broker -shapes waits -qos 1 -rounds 5
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
	Brokers []string `json:"brokers"`
	Shapes  []string `json:"shapes"`
	QoS     []int    `json:"qos"`

	// The waits shape (mqtt-benchmark's).
	WaitsClients int           `json:"waits_clients"`
	WaitsCount   int           `json:"waits_count"`
	WaitsSize    int           `json:"waits_size"`
	WaitsSubs    []int         `json:"waits_subs"`
	WaitsTimeout time.Duration `json:"waits_timeout_ns"`

	// The windowed shape.
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
		Shapes:       []string{shapeWaits, shapeWindowed},
		QoS:          []int{1, 0},
		WaitsClients: 10,
		WaitsCount:   20000,
		WaitsSize:    100,
		WaitsSubs:    []int{0, 1},
		WaitsTimeout: 2 * time.Minute,
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
	var brokers, shapes, qos, waitsSubs string
	var jsonOut bool
	flag.StringVar(&brokers, "brokers", "ours,mosquitto", "brokers to measure (comma-separated: ours, mosquitto); rounds always run mosquitto first, then ours")
	flag.StringVar(&shapes, "shapes", "waits,windowed", "shapes of load to measure, in order: waits (mqtt-benchmark's: each client waits for every PUBACK), windowed (publishers with in-flight windows, fan-out to -subs)")
	flag.StringVar(&qos, "qos", "1,0", "QoS levels to measure, in order: 0, 1 or 1,0")
	flag.IntVar(&p.WaitsClients, "waits-clients", p.WaitsClients, "waits shape: number of publishing clients (client i publishes to bench/<i>)")
	flag.IntVar(&p.WaitsCount, "waits-count", p.WaitsCount, "waits shape: messages per client")
	flag.IntVar(&p.WaitsSize, "waits-size", p.WaitsSize, fmt.Sprintf("waits shape: payload bytes (min %d)", mqttload.MinPayload))
	flag.StringVar(&waitsSubs, "waits-subs", "0,1", "waits shape: subscriber counts to measure, in order (each subscriber takes bench/# at the publishers' QoS)")
	flag.DurationVar(&p.WaitsTimeout, "waits-timeout", p.WaitsTimeout, "waits shape: max publishing time of one measurement; clients not done by then are reported as incomplete")
	flag.IntVar(&p.Pubs, "pubs", p.Pubs, "windowed shape: number of publishers (publisher i publishes to bench/<i>)")
	flag.IntVar(&p.Subs, "subs", p.Subs, "windowed shape: number of subscribers (each subscribes to bench/#)")
	flag.IntVar(&p.Size, "size", p.Size, fmt.Sprintf("windowed shape: payload bytes (min %d)", mqttload.MinPayload))
	flag.DurationVar(&p.Duration, "duration", p.Duration, "windowed shape: publish phase per measurement")
	flag.DurationVar(&p.Drain, "drain", p.Drain, "max drain phase after publishing, before counting lost messages")
	flag.IntVar(&p.Rounds, "rounds", p.Rounds, "rounds per workload; the report shows medians over rounds")
	flag.IntVar(&p.Inflight, "inflight", p.Inflight, "windowed shape: max unacknowledged QoS 1 publishes per publisher")
	flag.Float64Var(&p.Rate, "rate", 0, "windowed shape: msgs/s per publisher (0 = as fast as possible)")
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
	if p.Shapes, err = parseShapes(shapes); err != nil {
		return prog.Fail(err)
	}
	if p.QoS, err = parseQoS(qos); err != nil {
		return prog.Fail(err)
	}
	if p.WaitsSubs, err = parseInts("waits-subs", waitsSubs, 0, 1); err != nil {
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

func parseShapes(s string) ([]string, error) {
	return benchkit.ParseChoices("shapes", s, shapeWaits, shapeWindowed)
}

func parseQoS(s string) ([]int, error) { return parseInts("qos", s, 0, 1) }

// parseInts parses a comma-separated list of integers in lo..hi.
func parseInts(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("-%s: %q is not an integer in %d..%d", name, f, lo, hi)
		}
		out = append(out, n)
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
	case p.WaitsClients < 1 || p.WaitsCount < 1:
		return errors.New("-waits-clients and -waits-count must be >= 1")
	case p.WaitsSize < mqttload.MinPayload || p.WaitsSize > 1<<20:
		return fmt.Errorf("-waits-size must be in %d..1 MiB", mqttload.MinPayload)
	case p.WaitsTimeout <= 0:
		return errors.New("-waits-timeout must be > 0")
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
			info.Version = benchkit.MosquittoVersion(p.MosqBin)
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

	for _, w := range p.workloads() {
		for r := 1; r <= p.Rounds; r++ {
			for _, name := range p.Brokers { // mosquitto, ours, mosquitto, ours, ...
				tg := targets[name]
				logOffset := tg.Proc.LogSize()
				m, err := p.measure(ctx, tg, w, r)
				if err != nil {
					return nil, fmt.Errorf("%s round %d: %w", w, r, err)
				}
				fmt.Fprintf(progress, "%s round %d/%d %-9s %s\n", w, r, p.Rounds, name, m.progressLine())
				if m.Lost > 0 || m.Incomplete > 0 {
					for _, l := range tg.Proc.LogMatches(logOffset, "drop", 2) {
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

// workload is one kind of measurement: a shape, a QoS and, for the waits
// shape, a number of subscribers.
type workload struct {
	Shape string `json:"shape"`
	QoS   int    `json:"qos"`
	Subs  int    `json:"subscribers"`
}

func (w workload) String() string {
	if w.Shape == shapeWaits {
		return fmt.Sprintf("waits qos %d subs %d", w.QoS, w.Subs)
	}
	return fmt.Sprintf("windowed qos %d", w.QoS)
}

// workloads lists what to measure, in order: per shape, per QoS, and per
// subscriber count for the waits shape.
func (p params) workloads() []workload {
	var out []workload
	for _, shape := range p.Shapes {
		for _, q := range p.QoS {
			if shape == shapeWindowed {
				out = append(out, workload{Shape: shape, QoS: q, Subs: p.Subs})
				continue
			}
			for _, s := range p.WaitsSubs {
				out = append(out, workload{Shape: shape, QoS: q, Subs: s})
			}
		}
	}
	return out
}

// measure runs one measurement of w against tg.
func (p params) measure(ctx context.Context, tg target, w workload, round int) (measurement, error) {
	if w.Shape == shapeWaits {
		return measureWaits(ctx, tg, waitsLoad{
			Clients: p.WaitsClients, Count: p.WaitsCount, Size: p.WaitsSize, QoS: byte(w.QoS), Subs: w.Subs,
			Timeout: p.WaitsTimeout, Drain: p.Drain,
		}, round)
	}
	return measure(ctx, tg, load{
		Pubs: p.Pubs, Subs: p.Subs, QoS: byte(w.QoS), Size: p.Size,
		Duration: p.Duration, Drain: p.Drain, Inflight: p.Inflight, Rate: p.Rate,
	}, round)
}

// progressLine is one measurement's figures for the progress output.
func (m measurement) progressLine() string {
	cpu := fmt.Sprintf("broker cpu %s (%sµs/msg)  gen cpu %s  other cpu %s",
		benchkit.FormatPercent(m.BrokerCPU), benchkit.FormatMicros(m.BrokerUsPerMsg), benchkit.FormatPercent(m.GenCPU), benchkit.FormatPercent(m.OtherCPU))
	if m.Shape == shapeWaits {
		line := fmt.Sprintf("pub %9.0f/s (client sum %9.0f/s)  ack p50 %s p99 %s", m.PubRate, m.ClientRateSum,
			benchkit.FormatDuration(m.AckP50), benchkit.FormatDuration(m.AckP99))
		if m.Subs > 0 {
			line += fmt.Sprintf("  received %d of %d  lost %d  dup %d", m.Received, m.Expected, m.Lost, m.Dup)
		}
		if m.Incomplete > 0 {
			line += fmt.Sprintf("  INCOMPLETE: %d clients not done", m.Incomplete)
		}
		return line + "  " + cpu
	}
	return fmt.Sprintf("pub %9.0f/s  recv %9.0f/s  lost %d  dup %d  p50 %s  p99 %s  %s",
		m.PubRate, m.RecvRate, m.Lost, m.Dup, benchkit.FormatDuration(m.P50), benchkit.FormatDuration(m.P99), cpu)
}
