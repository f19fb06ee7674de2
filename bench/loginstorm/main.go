// Command loginstorm measures what password guessing costs the other users
// of the broker (issue 12, attack 5): an authenticated QoS 1 publisher's
// publish-to-PUBACK latency and the latency of /healthz, on cmd/broker,
// with no attack ("calm") and while -guessers goroutines guess passwords
// as fast as the broker answers ("storm"), rounds alternating. It prints
// the medians over rounds and the storm/calm ratios, and what the guessers
// got back.
//
//	go run ./bench/loginstorm                  # 3 rounds of 10 s per mode, 16 guessers from 16 addresses
//	go run ./bench/loginstorm -sources 1       # every guesser from 127.0.0.1
//	go run ./bench/loginstorm -usernames random
//	go run ./bench/loginstorm -json > result.json
//
// See README.md in this directory.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

const (
	modeCalm  = "calm"
	modeStorm = "storm"
)

type params struct {
	Rounds    int           `json:"rounds"`
	Duration  time.Duration `json:"duration_ns"`
	Warmup    time.Duration `json:"warmup_ns"`
	Guessers  int           `json:"guessers"`
	Sources   int           `json:"sources"`
	Usernames string        `json:"usernames"`
	Rate      float64       `json:"rate"`
	Size      int           `json:"size"`
	BrokerPkg string        `json:"broker_pkg"`
	BrokerBin string        `json:"broker_bin,omitempty"`
	PerfDir   string        `json:"perf_dir,omitempty"`
}

func main() { os.Exit(realMain()) }

func realMain() int {
	p := params{Rounds: 3, Duration: 10 * time.Second, Warmup: 2 * time.Second, Guessers: 16, Sources: 16,
		Usernames: "target", Rate: 500, Size: 256, BrokerPkg: "./cmd/broker"}
	var jsonOut bool
	var cpuProfile string
	flag.IntVar(&p.Rounds, "rounds", p.Rounds, "rounds; each measures calm, then storm, on a fresh broker")
	flag.DurationVar(&p.Duration, "duration", p.Duration, "measurement window per mode and round")
	flag.DurationVar(&p.Warmup, "warmup", p.Warmup, "guessing (and publishing) before the window opens")
	flag.IntVar(&p.Guessers, "guessers", p.Guessers, "concurrent password-guessing goroutines in storm mode")
	flag.IntVar(&p.Sources, "sources", p.Sources, "distinct source addresses (127.0.0.2...) the guessers spread over; 1 means 127.0.0.1")
	flag.StringVar(&p.Usernames, "usernames", p.Usernames, "target: guess the publisher's own username; random: a new username per guess")
	flag.Float64Var(&p.Rate, "rate", p.Rate, "the measured publisher's msgs/s (QoS 1, one in flight)")
	flag.IntVar(&p.Size, "size", p.Size, fmt.Sprintf("payload bytes (min %d)", mqttload.MinPayload))
	flag.StringVar(&p.BrokerPkg, "broker-pkg", p.BrokerPkg, "package to build as the broker")
	flag.StringVar(&p.BrokerBin, "broker-bin", "", "a prebuilt cmd/broker binary instead of building")
	flag.StringVar(&p.PerfDir, "perf-dir", "", "attach `perf record -g` to the broker for each window, writing DIR/<mode>-<round>.perf.data")
	flag.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the load generator)")
	flag.Parse()
	prog := benchkit.Program{Name: "loginstorm", Stopped: "broker", CPUProfile: cpuProfile, JSON: jsonOut}
	if p.Rounds < 1 || p.Guessers < 1 || p.Sources < 1 || p.Sources > 250 || p.Rate <= 0 || p.Size < mqttload.MinPayload ||
		(p.Usernames != "target" && p.Usernames != "random") {
		return prog.Fail(errors.New("need -rounds >= 1, -guessers >= 1, 1 <= -sources <= 250, -rate > 0, -size >= the minimum, -usernames target|random"))
	}
	return prog.Run(func(ctx context.Context) (benchkit.Report, error) { return run(ctx, p) })
}

// measurement is one mode in one round.
type measurement struct {
	Mode    string  `json:"mode"`
	Round   int     `json:"round"`
	Acked   int64   `json:"acked"`
	P50us   float64 `json:"publish_p50_us"`
	P99us   float64 `json:"publish_p99_us"`
	MaxUs   float64 `json:"publish_max_us"`
	Health  float64 `json:"healthz_p99_us"`
	Guesses int64   `json:"guesses"`
	// Answers counts the guessers' CONNACK return codes, and "closed" for
	// a connection closed without one.
	Answers  map[string]int64 `json:"answers,omitempty"`
	CPU      float64          `json:"broker_cpu_percent"`
	Other    float64          `json:"other_cpu_percent"`
	Warnings int              `json:"warnings_logged"`
}

type report struct {
	Params       params        `json:"params"`
	Measurements []measurement `json:"measurements"`
}

func run(ctx context.Context, p params) (benchkit.Report, error) {
	dir, err := os.MkdirTemp("", "loginstorm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := p.BrokerBin
	if bin == "" {
		bin = filepath.Join(dir, "firehose-broker")
		fmt.Fprintf(os.Stderr, "building %s\n", p.BrokerPkg)
		if err := benchkit.Build(ctx, p.BrokerPkg, bin); err != nil {
			return nil, err
		}
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("bench-secret"), bcrypt.DefaultCost)
	if err != nil {
		return nil, err
	}
	rep := &report{Params: p}
	for round := 1; round <= p.Rounds; round++ {
		for _, mode := range []string{modeCalm, modeStorm} {
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", round, p.Rounds, mode)
			m, err := measure(ctx, p, bin, dir, string(hash), mode, round)
			if err != nil {
				return nil, fmt.Errorf("round %d %s: %w", round, mode, err)
			}
			m.Round = round
			rep.Measurements = append(rep.Measurements, m)
		}
	}
	return rep, nil
}

func brokerConfig(mqttAddr, httpAddr, hash string) string {
	return fmt.Sprintf(`log: {level: info, format: json}
http: {address: %q}
broker:
  listeners: [{name: mqtt, type: tcp, address: %q}]
  users:
    - username: bench
      password_hash: %q
      publish: ["bench/#"]
`, httpAddr, mqttAddr, hash)
}

// measure starts a fresh broker (so no back-off carries over), connects
// the publisher, and in storm mode the guessers, and measures one window.
func measure(ctx context.Context, p params, bin, dir, hash, mode string, round int) (measurement, error) {
	m := measurement{Mode: mode, Answers: map[string]int64{}}
	addrs, err := benchkit.FreeAddrs(2)
	if err != nil {
		return m, err
	}
	mqttAddr, httpAddr := addrs[0], addrs[1]
	conf := filepath.Join(dir, "broker.yaml")
	if err := os.WriteFile(conf, []byte(brokerConfig(mqttAddr, httpAddr, hash)), 0o600); err != nil {
		return m, err
	}
	proc, err := benchkit.Start("broker-"+mode, dir, nil, bin, "--config", conf)
	if err != nil {
		return m, err
	}
	defer func() { _ = proc.Stop() }()
	if err := mqttload.WaitReady(ctx, mqttAddr, "bench", "bench-secret", proc, 30*time.Second); err != nil {
		return m, err
	}

	c, err := mqttload.Dial(mqttload.Options{Addr: mqttAddr, ClientID: "measured-publisher", Username: "bench", Password: "bench-secret"})
	if err != nil {
		return m, err
	}
	defer c.Close()
	c.SetPublishTemplate("bench/latency", mqttload.NewPayload(p.Size, 0, 1))
	pub := mqttload.NewPublisher(c, 1, 1, true)
	c.Start()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var guesses atomic.Int64
	var answers sync.Map // code -> *atomic.Int64
	if mode == modeStorm {
		for i := range p.Guessers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				guess(stop, mqttAddr, i, p, &guesses, &answers)
			}()
		}
	}
	var health benchkit.Histogram
	healthDone := make(chan struct{})
	go func() { defer close(healthDone); pollHealth(stop, "http://"+httpAddr+"/healthz", &health) }()

	select {
	case <-time.After(p.Warmup):
	case <-ctx.Done():
		close(stop)
		wg.Wait()
		return m, ctx.Err()
	}
	// The window: a fresh publisher histogram, CPU and log from here.
	logOffset := proc.LogSize()
	guesses0 := guesses.Load()
	var perf *benchkit.PerfRecorder
	if p.PerfDir != "" {
		if perf, err = benchkit.StartPerf(proc.PID(), filepath.Join(p.PerfDir, fmt.Sprintf("%s-%d.perf.data", mode, round))); err != nil {
			return m, err
		}
	}
	cpu := benchkit.StartCPUWindow(proc.PID())
	t0 := time.Now()
	fleet := mqttload.StartFleet([]*mqttload.Publisher{pub}, t0, p.Rate)
	_, err = fleet.StopAt(ctx, t0.Add(p.Duration))
	elapsed := time.Since(t0)
	use := cpu.End(elapsed)
	perf.Stop()
	close(stop)
	wg.Wait()
	<-healthDone
	if err != nil {
		return m, err
	}
	if _, err := fleet.WaitReturned(ctx, time.Now().Add(5*time.Second)); err != nil {
		return m, err
	}
	if !c.FlushSync(5 * time.Second) {
		return m, errors.New("the publisher's last PUBACK did not come back")
	}
	c.Close()
	if err := proc.Alive(); err != nil {
		return m, err
	}
	lat := pub.Latency()
	m.Acked = pub.Acked()
	m.P50us = us(lat.Quantile(0.5))
	m.P99us = us(lat.Quantile(0.99))
	m.MaxUs = us(lat.Max())
	m.Health = us(health.Quantile(0.99))
	m.Guesses = guesses.Load() - guesses0
	answers.Range(func(k, v any) bool { m.Answers[k.(string)] = v.(*atomic.Int64).Load(); return true })
	m.CPU, m.Other = use.Proc, use.Other
	m.Warnings = len(proc.LogMatches(logOffset, "refused connection", 1<<30))
	return m, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// guess connects, sends a CONNECT with a wrong password and reads the
// answer, over and over, from source address 127.0.0.(2 + i % sources).
func guess(stop <-chan struct{}, addr string, i int, p params, count *atomic.Int64, answers *sync.Map) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if p.Sources > 1 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%p.Sources))}
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		user := "bench"
		if p.Usernames == "random" {
			user = fmt.Sprintf("user-%d-%d", i, n)
		}
		answer := attempt(&d, addr, user, fmt.Sprintf("guess-%d-%d", i, n))
		count.Add(1)
		v, _ := answers.LoadOrStore(answer, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
}

// attempt makes one login attempt and returns what came back: the CONNACK
// return code, or what went wrong.
func attempt(d *net.Dialer, addr, user, pass string) string {
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return "dial error"
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30,
			UsernameFlag: true, Username: []byte(user), PasswordFlag: true, Password: []byte(pass),
		},
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		return "encode error"
	}
	if _, err := conn.Write(buf.Bytes()); err != nil {
		return "closed"
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(bufio.NewReader(conn), ack); err != nil || ack[0] != 0x20 {
		return "closed"
	}
	return "connack " + strconv.Itoa(int(ack[3]))
}

// pollHealth GETs /healthz every 50 ms and records each latency.
func pollHealth(stop <-chan struct{}, url string, h *benchkit.Histogram) {
	client := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		t0 := time.Now()
		resp, err := client.Get(url)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h.Record(int64(time.Since(t0)))
	}
}

// WriteText prints each measurement, then the medians per mode and the ratios.
func (r *report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "bench/loginstorm: one QoS 1 publisher (%g msgs/s, one in flight) on cmd/broker; storm = %d guessers from %d source address(es), usernames %s\n\n",
		r.Params.Rate, r.Params.Guessers, r.Params.Sources, r.Params.Usernames)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tmode\tacked\tpub p50 µs\tpub p99 µs\tpub max µs\thealthz p99 µs\tguesses/s\tbroker CPU\tothers' CPU\twarnings\tanswers\t")
	secs := r.Params.Duration.Seconds()
	for _, m := range r.Measurements {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%d\t%s\t\n", m.Round, m.Mode, m.Acked,
			benchkit.FormatMicros(m.P50us), benchkit.FormatMicros(m.P99us), benchkit.FormatMicros(m.MaxUs),
			benchkit.FormatMicros(m.Health), float64(m.Guesses)/secs, benchkit.FormatPercent(m.CPU),
			benchkit.FormatPercent(m.Other), m.Warnings, answersText(m.Answers))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	med := func(mode string, f func(measurement) float64) float64 {
		var xs []float64
		for _, m := range r.Measurements {
			if m.Mode == mode {
				xs = append(xs, f(m))
			}
		}
		return benchkit.Median(xs)
	}
	p50 := func(m measurement) float64 { return m.P50us }
	p99 := func(m measurement) float64 { return m.P99us }
	hp99 := func(m measurement) float64 { return m.Health }
	fmt.Fprintf(w, "\nmedians over %d rounds:\n", r.Params.Rounds)
	fmt.Fprintf(w, "  publisher QoS 1 p50: calm %s µs, storm %s µs (%.2fx)\n", benchkit.FormatMicros(med(modeCalm, p50)), benchkit.FormatMicros(med(modeStorm, p50)), med(modeStorm, p50)/med(modeCalm, p50))
	fmt.Fprintf(w, "  publisher QoS 1 p99: calm %s µs, storm %s µs (%.2fx)\n", benchkit.FormatMicros(med(modeCalm, p99)), benchkit.FormatMicros(med(modeStorm, p99)), med(modeStorm, p99)/med(modeCalm, p99))
	fmt.Fprintf(w, "  /healthz p99:        calm %s µs, storm %s µs (%.2fx)\n", benchkit.FormatMicros(med(modeCalm, hp99)), benchkit.FormatMicros(med(modeStorm, hp99)), med(modeStorm, hp99)/med(modeCalm, hp99))
	fmt.Fprintf(w, "  guesses/s in storm:  %.0f\n", med(modeStorm, func(m measurement) float64 { return float64(m.Guesses) / secs }))
	return nil
}

func answersText(a map[string]int64) string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, a[k])
	}
	return strings.Join(parts, ", ")
}
