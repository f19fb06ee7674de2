// Command history measures what the bus's history costs the live path: the
// HTTP intake's and the broker's throughput with history on (the default:
// an embedded JetStream) against history off, in one run, rounds
// alternating between the two, and prints each with the ratio of medians
// (target: at least 0.9, issue 27), and that the history kept every
// message.
//
// Both bridges run in this process (app.New, as the tests start them),
// each on its own loopback ports and data directory; the load generator
// shares the machine with them in both modes alike. That puts both bridges
// on one footing: one Go runtime, whose garbage collector runs for the
// heap of both. With -processes each bridge is a process of cmd/bridge, as
// users run it; then the bridge with the history, whose heap is larger,
// collects garbage about a third as often as the one without, which
// offsets part of the history's CPU (the report prints each one's GC
// cycles). The 0.9 target is the default's; GOGC=off GOMEMLIMIT=1GiB go
// run ./bench/history -processes puts processes on one footing too.
//
//	go run ./bench/history [-rounds 3] [-posts 6000] [-msgs 100000] [-payload-kind json|text|random] [-processes]
//
// The history compresses what it stores, so what the payloads hold
// matters: -payload-kind json (the default) varies a Chef status's node,
// run id and times from message to message; random is the worst case.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// params are the benchmark's knobs.
type params struct {
	Rounds   int    // measurements of each mode, alternating
	Posts    int    // Ansible task events POSTed per intake measurement
	Senders  int    // concurrent HTTP senders
	Msgs     int    // QoS 1 messages per MQTT publisher per broker measurement
	Pubs     int    // MQTT publishers
	Subs     int    // MQTT subscribers to bench/history/# (QoS 1), each taking every message
	Inflight int    // each publisher's window of unacknowledged messages
	Payload  int    // MQTT payload bytes
	Kind     string // what the MQTT payloads hold: payloadKinds
	JSON     bool
	// Processes runs each bridge as a process of cmd/bridge, not in this
	// process beside the load.
	Processes bool
}

func defaultParams() params {
	return params{Rounds: 3, Posts: 6000, Senders: 8, Msgs: 100000, Pubs: 4, Inflight: 64, Payload: 512, Kind: "json"}
}

func main() { os.Exit(realMain()) }

func realMain() int {
	p := defaultParams()
	fs := flag.NewFlagSet("bench/history", flag.ExitOnError)
	fs.IntVar(&p.Rounds, "rounds", p.Rounds, "measurements of each mode (history off, on), alternating")
	fs.IntVar(&p.Posts, "posts", p.Posts, "Ansible events POSTed per intake measurement")
	fs.IntVar(&p.Senders, "senders", p.Senders, "concurrent HTTP senders")
	fs.IntVar(&p.Msgs, "msgs", p.Msgs, "QoS 1 messages per MQTT publisher per broker measurement")
	fs.IntVar(&p.Pubs, "pubs", p.Pubs, "MQTT publishers")
	fs.IntVar(&p.Subs, "subs", p.Subs, "MQTT subscribers to bench/history/# at QoS 1: a measurement ends when each has every message (a bus that is read; 0: none)")
	fs.IntVar(&p.Inflight, "inflight", p.Inflight, "each publisher's window of unacknowledged messages")
	fs.IntVar(&p.Payload, "payload", p.Payload, "MQTT payload bytes")
	fs.StringVar(&p.Kind, "payload-kind", p.Kind, "what the MQTT payloads hold: json (a Chef status whose node, run id and times vary from message to message), text (one repeated alphabet, which compresses to nothing) or random (new random bytes each, which do not compress: the history's worst case)")
	fs.BoolVar(&p.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&p.Processes, "processes", false, "run each bridge as a process of its own (./cmd/bridge, built first), as users run it, with the load in this process (whose -cpuprofile then profiles the load only); by default both bridges run in this process, beside the load")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the load, and both bridges unless -processes) to `file`")
	_ = fs.Parse(os.Args[1:])
	if _, ok := payloadKinds[p.Kind]; !ok {
		fmt.Fprintf(os.Stderr, "bench/history: -payload-kind %q: want json, text or random\n", p.Kind)
		return 2
	}
	if p.Rounds < 1 || p.Posts < p.Senders || p.Senders < 1 || p.Msgs < 1 || p.Pubs < 1 || p.Subs < 0 || p.Inflight < 1 || p.Payload < mqttload.MinPayload {
		fmt.Fprintln(os.Stderr, "bench/history: every count must be positive, posts at least senders, payload at least", mqttload.MinPayload)
		return 2
	}
	prog := benchkit.Program{Name: "history", Stopped: "bridges", JSON: p.JSON, CPUProfile: *cpuProfile}
	return prog.Run(func(ctx context.Context) (benchkit.Report, error) { return run(ctx, p, os.Stderr) })
}

// modes are the two bridges compared.
var modes = []string{"off", "on"}

// report is what run measured: per mode, each round's msgs/s.
type report struct {
	Params params               `json:"params"`
	Intake map[string][]float64 `json:"intake_msgs_per_s"`
	Broker map[string][]float64 `json:"broker_msgs_per_s"`
	// CPU is the CPU per message of each measurement, the history's
	// writing to its end included: this process's (the load generator's,
	// and the bridges' when they run in it) and, with -processes, the
	// measured bridge's. On a shared machine, the cost that other load does
	// not blur.
	CPU map[string][]float64 `json:"cpu_us_per_msg"`
	// GC is how many times the measured bridge's Go runtime collected
	// garbage during each measurement (in this process, the one runtime
	// the bridges and the load share).
	GC      map[string][]float64 `json:"gc_cycles"`
	Stored  int64                `json:"history_stored"`
	Lost    int64                `json:"history_lost"`
	Offered int64                `json:"history_offered"`
}

const target = 0.9

// WriteText prints the medians, the ratios and the verdicts.
func (r *report) WriteText(w io.Writer) error {
	var b strings.Builder
	where := "both in this process, beside the load: one Go runtime, one garbage collector"
	if r.Params.Processes {
		where = "each a process of its own (cmd/bridge), as users run it; the load in this one"
	}
	fmt.Fprintf(&b, "history on vs off, %d rounds each, alternating (medians); bridges %s\n", r.Params.Rounds, where)
	row := func(what string, xs map[string][]float64) {
		off, on := benchkit.Median(xs["off"]), benchkit.Median(xs["on"])
		ratio := on / off
		verdict := "OK"
		if ratio < target {
			verdict = fmt.Sprintf("BELOW the %.1fx target", target)
		}
		fmt.Fprintf(&b, "  %-40s off %9.0f msgs/s   on %9.0f msgs/s   on/off %.2fx  %s\n", what, off, on, ratio, verdict)
	}
	row(fmt.Sprintf("intake (HTTP, %d senders, Ansible events)", r.Params.Senders), r.Intake)
	row(fmt.Sprintf("broker (MQTT QoS 1, %d pubs x %d window, %d subs, %d B %s)", r.Params.Pubs, r.Params.Inflight, r.Params.Subs, r.Params.Payload, r.Params.Kind), r.Broker)
	// Rounds measure both modes back to back: the ratio within each round
	// is steadier than the ratio of medians when the machine's load moves.
	paired := func(xs map[string][]float64) float64 {
		var ratios []float64
		for i := range min(len(xs["on"]), len(xs["off"])) {
			ratios = append(ratios, xs["on"][i]/xs["off"][i])
		}
		return benchkit.Median(ratios)
	}
	fmt.Fprintf(&b, "  median of each round's on/off: intake %.2fx, broker %.2fx\n", paired(r.Intake), paired(r.Broker))
	cpuOff, cpuOn := benchkit.Median(r.CPU["off"]), benchkit.Median(r.CPU["on"])
	fmt.Fprintf(&b, "  CPU per message (the load and the bridge): off %.1f us, on %.1f us (history writing included): off/on %.2fx, the throughput ratio when CPU-bound\n",
		cpuOff, cpuOn, cpuOff/cpuOn)
	fmt.Fprintf(&b, "  GC cycles per measurement: off %.0f, on %.0f", benchkit.Median(r.GC["off"]), benchkit.Median(r.GC["on"]))
	if r.Params.Processes {
		// A bridge with a history holds more (its store's caches, its
		// packs' buffers): its collector's goal is higher, and it runs
		// less often; GOGC=off GOMEMLIMIT=1GiB puts both on one footing.
		b.WriteString(" (each bridge's own runtime: the history's larger heap makes its collector run less often)\n")
	} else {
		b.WriteString(" (the runtime that both bridges and the load share)\n")
	}
	fmt.Fprintf(&b, "  history kept %d of the %d messages the bridge with history published (%d left out)\n", r.Stored, r.Offered, r.Lost)
	_, err := io.WriteString(w, b.String())
	return err
}

// run starts both bridges and measures each round.
func run(ctx context.Context, p params, progress io.Writer) (*report, error) {
	event, err := os.ReadFile(moduleFile("adapters/ansible/testdata/task-ok/input.json"))
	if err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("bench"), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	var bin string // cmd/bridge, with -processes
	if p.Processes {
		dir, err := os.MkdirTemp("", "bench-history-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "bridge")
		fmt.Fprintln(progress, "building ./cmd/bridge")
		if err := benchkit.Build(ctx, "./cmd/bridge", bin); err != nil {
			return nil, err
		}
	}
	bridges := map[string]*bridgeUnder{}
	for _, mode := range modes {
		dir, err := os.MkdirTemp("", "bench-history-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		var b *bridgeUnder
		if p.Processes {
			b, err = startProcess(ctx, mode, bin, dir, string(hash))
		} else {
			b, err = startInProcess(ctx, mode, dir, string(hash))
		}
		if err != nil {
			return nil, err
		}
		defer b.close()
		bridges[mode] = b
	}
	rep := &report{Params: p, Intake: map[string][]float64{}, Broker: map[string][]float64{}, CPU: map[string][]float64{}, GC: map[string][]float64{}}
	var recorded int64 // messages published on the bridge with history so far
	for round := range p.Rounds {
		order := modes
		if round%2 == 1 {
			order = []string{"on", "off"}
		}
		for _, mode := range order {
			b := bridges[mode]
			// Each measurement starts with the history caught up, so that
			// neither pays for the writing of the one before.
			if err := caughtUp(ctx, bridges["on"], recorded); err != nil {
				return nil, err
			}
			cpu0, gc0 := b.cpu(), b.gcCycles()
			in, err := intake(ctx, "http://"+b.httpAddr, event, p)
			if err != nil {
				return nil, fmt.Errorf("intake, history %s: %w", mode, err)
			}
			// The load's goroutines carry load=<mode>, as the bridges'
			// carry mode=<mode>: with -cpuprofile, what is left unlabelled
			// is the runtime's own (the collector, the scheduler).
			var br float64
			pprof.Do(ctx, pprof.Labels("load", mode), func(ctx context.Context) {
				br, err = brokerLoad(ctx, b.mqttAddr, p, uint32(round))
			})
			if err != nil {
				return nil, fmt.Errorf("broker, history %s: %w", mode, err)
			}
			if mode == "on" {
				recorded += int64(p.Posts + p.Pubs*p.Msgs)
				if err := caughtUp(ctx, b, recorded); err != nil {
					return nil, err
				}
			}
			rep.CPU[mode] = append(rep.CPU[mode], float64(b.cpu()-cpu0)/float64(time.Microsecond)/float64(p.Posts+p.Pubs*p.Msgs))
			rep.GC[mode] = append(rep.GC[mode], b.gcCycles()-gc0)
			rep.Intake[mode] = append(rep.Intake[mode], in)
			rep.Broker[mode] = append(rep.Broker[mode], br)
			fmt.Fprintf(progress, "round %d, history %-3s: intake %8.0f msgs/s, broker %8.0f msgs/s, %.1f us CPU/msg, %.0f GC cycles\n", round+1, mode, in, br, rep.CPU[mode][len(rep.CPU[mode])-1], rep.GC[mode][len(rep.GC[mode])-1])
		}
	}
	rep.Offered = int64(p.Rounds) * int64(p.Posts+p.Pubs*p.Msgs)
	if err := caughtUp(ctx, bridges["on"], rep.Offered); err != nil {
		return nil, err
	}
	rep.Stored, rep.Lost, err = historyCounts(bridges["on"])
	return rep, err
}

// caughtUp waits until the history of b has stored, or counted as lost,
// n messages: the history writes asynchronously.
func caughtUp(ctx context.Context, b *bridgeUnder, n int64) error {
	return benchkit.PollUntil(ctx, time.Now().Add(2*time.Minute), 20*time.Millisecond, nil, func() (bool, error) {
		stored, lost, err := historyCounts(b)
		return stored+lost >= n, err
	})
}

// intake POSTs p.Posts Ansible events from p.Senders senders and returns
// the accepted events per second.
func intake(ctx context.Context, base string, event []byte, p params) (float64, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: p.Senders}}
	var (
		wg    sync.WaitGroup
		fails atomic.Int64
		first atomic.Value
	)
	start := time.Now()
	for s := range p.Senders {
		n := p.Posts / p.Senders
		if s < p.Posts%p.Senders {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ansible/v1/events", bytes.NewReader(event))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("POST answered %s", resp.Status)
					}
				}
				if err != nil {
					fails.Add(1)
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := first.Load().(error); err != nil {
		return 0, fmt.Errorf("%d POSTs failed, the first: %w", fails.Load(), err)
	}
	return float64(p.Posts) / elapsed.Seconds(), nil
}

// brokerLoad runs p.Pubs QoS 1 publishers of p.Msgs messages each, with
// windows of p.Inflight, and returns the PUBACKed messages per second.
func brokerLoad(ctx context.Context, addr string, p params, runID uint32) (float64, error) {
	pubs := make([]*mqttload.Publisher, p.Pubs)
	for i := range pubs {
		c, err := mqttload.Dial(mqttload.Options{Addr: addr, ClientID: fmt.Sprintf("bench-%d-%d", runID, i), Username: "bench", Password: "bench", KeepAlive: 10 * time.Minute})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		payload, spans := payloadKinds[p.Kind](p.Payload, i, runID)
		c.SetPublishTemplate(fmt.Sprintf("bench/history/%d", i), payload)
		if spans != nil {
			c.SetPublishRandom(uint64(runID)<<32|uint64(i+1), spans...)
		}
		pubs[i] = mqttload.NewPublisher(c, 1, p.Inflight, false)
	}
	var received atomic.Int64
	for i := range p.Subs {
		c, err := mqttload.Dial(mqttload.Options{Addr: addr, ClientID: fmt.Sprintf("bench-%d-s%d", runID, i), Username: "bench", Password: "bench", KeepAlive: 10 * time.Minute})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.OnPublish = func(_, _ []byte, _ byte, _ int64) { received.Add(1) }
		c.Start()
		if _, err := c.Subscribe("bench/history/#", 1, 5*time.Second); err != nil {
			return 0, err
		}
	}
	counted := mqttload.NewCounted(pubs, p.Msgs)
	for _, pub := range pubs {
		pub.Client().Start()
	}
	res, err := counted.Run(ctx, 5*time.Minute, nil)
	counted.Wait()
	if err != nil {
		return 0, err
	}
	if res.Incomplete > 0 {
		return 0, fmt.Errorf("%d publishers did not finish", res.Incomplete)
	}
	end := res.End
	if p.Subs > 0 {
		want := int64(p.Subs * p.Pubs * p.Msgs)
		if err := benchkit.PollUntil(ctx, time.Now().Add(2*time.Minute), time.Millisecond, nil, func() (bool, error) { return received.Load() >= want, nil }); err != nil {
			return 0, fmt.Errorf("subscribers got %d of %d: %w", received.Load(), want, err)
		}
		end = time.Now()
	}
	return float64(p.Pubs*p.Msgs) / end.Sub(res.Start).Seconds(), nil
}

// historyCounts reads firehose_history_stored_total and the sum of
// firehose_history_lost_total from /metrics.
func historyCounts(b *bridgeUnder) (stored, lost int64, err error) {
	m, err := b.metrics("firehose_history_stored_total", "firehose_history_lost_total")
	return int64(m["firehose_history_stored_total"]), int64(m["firehose_history_lost_total"]), err
}

// moduleFile is a file of this module, wherever the benchmark runs from.
func moduleFile(rel string) string {
	root, err := benchkit.ModuleRoot()
	if err != nil {
		return rel
	}
	return root + "/" + rel
}

// payloadKinds make a publisher's template of size bytes and the spans of
// it that each message fills anew (nil: none; empty: all but the header).
var payloadKinds = map[string]func(size, pub int, runID uint32) ([]byte, [][2]int){
	"text": func(size, pub int, runID uint32) ([]byte, [][2]int) {
		return mqttload.NewPayload(size, pub, runID), nil
	},
	"random": func(size, pub int, runID uint32) ([]byte, [][2]int) {
		return mqttload.NewPayload(size, pub, runID), [][2]int{}
	},
	"json": jsonPayload,
}

// jsonPayload is a Chef node's status after the payload's header, cut or
// padded to size; the X runs vary with each message.
func jsonPayload(size, pub int, runID uint32) ([]byte, [][2]int) {
	const status = `{"node":"web-XXXXXXXXXXXX.example.org","org":"chef","run_id":"XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX",` +
		`"status":"success","start_time":"2026-11-28T05:XX:XX.XXXZ","end_time":"2026-11-28T05:XX:XX.XXXZ",` +
		`"updated_resources":12,"total_resources":340,"environment":"production","policy_group":"prod",` +
		`"policy_name":"web","chef_version":"18.5.0","platform":"ubuntu","platform_version":"22.04",` +
		`"cookbooks":["base","nginx","ssh","users","ntp","monitoring","logrotate","sysctl"],"tags":[]}`
	payload := mqttload.NewPayload(size, pub, runID)
	body := payload[mqttload.MinPayload:]
	n := copy(body, status)
	for i := n; i < len(body); i++ {
		body[i] = ' '
	}
	var spans [][2]int
	for i := 0; i < n; i++ {
		if body[i] != 'X' {
			continue
		}
		j := i
		for j < n && body[j] == 'X' {
			j++
		}
		spans = append(spans, [2]int{mqttload.MinPayload + i, mqttload.MinPayload + j})
		i = j
	}
	return payload, spans
}
