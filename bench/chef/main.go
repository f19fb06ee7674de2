// Command chef benchmarks the Chef data-collector adapter against a minimal
// receiver, in one run, and checks the two targets:
//
//   - converge messages accepted per second by the bridge (HTTP front door,
//     adapter, embedded broker, with a real MQTT subscriber on chef/#
//     receiving every message) ≥ 1.0 × the requests per second of a minimal
//     Go server that json.Unmarshals each body into a map and answers 204;
//
//   - posting a 10 MB converge grows the bridge's peak RSS by less than 4 ×
//     the body size.
//
//     go run ./bench/chef                       # 5 rounds of 5 s, 8 clients, then the RSS test
//     go run ./bench/chef -rounds 3 -duration 3s -clients 4
//     go run ./bench/chef -json
//
// See README.md in this directory.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// params are one run's settings.
type params struct {
	Fixture  string        `json:"fixture"`
	Rounds   int           `json:"rounds"`
	Duration time.Duration `json:"duration_ns"`
	Clients  int           `json:"clients"`
	BigSize  int           `json:"big_size"`
	BigPosts int           `json:"big_posts"`
	Drain    time.Duration `json:"drain_ns"`
}

func defaultParams() params {
	return params{
		Fixture:  filepath.Join("adapters", "chef", "testdata", "02_run_converge_success_chef12_ubuntu", "input.json"),
		Rounds:   5,
		Duration: 5 * time.Second,
		Clients:  8,
		BigSize:  10_000_000,
		BigPosts: 1,
		Drain:    30 * time.Second,
	}
}

func main() {
	if mode := os.Getenv(serveEnv); mode != "" {
		if err := serve(mode); err != nil {
			fmt.Fprintln(os.Stderr, "bench/chef server:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(realMain())
}

func realMain() int {
	p := defaultParams()
	flag.StringVar(&p.Fixture, "fixture", p.Fixture, "converge message to post (relative to the repository root)")
	flag.IntVar(&p.Rounds, "rounds", p.Rounds, "rounds; each measures the baseline and the bridge, in alternating order (0 skips the throughput test)")
	flag.DurationVar(&p.Duration, "duration", p.Duration, "load phase of each measurement")
	flag.IntVar(&p.Clients, "clients", p.Clients, "concurrent HTTP clients")
	flag.IntVar(&p.BigSize, "big-size", p.BigSize, "size in bytes of the big converge for the RSS test (0 skips it)")
	flag.IntVar(&p.BigPosts, "big-posts", p.BigPosts, "how many times the big converge is posted, one after the other")
	jsonOut := flag.Bool("json", false, "print the report as JSON")
	teams := flag.String("teams", "", "compare the CPU per converge of the bridge with teams and the rollout against today's: "+
		workloadSteady+" (one node's unchanged runs; the target) or "+workloadFirstRun+" (every converge a new node)")
	fleet := flag.Int("fleet", 0, "populate the rollout store with this many nodes through the HTTP endpoint and report its memory and disk")
	cookbooks := flag.Int("cookbooks", 100, "cookbooks per node, with -fleet")
	fleetPasses := flag.Int("fleet-passes", 3, "with -fleet, the passes over the fleet: 1 (every node's first run), 2 (then a new version of one cookbook on every node) or 3 (then runs that change nothing)")
	fleetToday := flag.Bool("fleet-today", false, "with -fleet, post the same converges to today's bridge (no rollout, no teams), to compare")
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *teams != "" || *fleet > 0 {
		mode := modeTeams
		if *fleetToday {
			mode = modeBridge
		}
		return runTeamsMain(ctx, p, *teams, mode, *fleet, *cookbooks, *fleetPasses, *jsonOut)
	}
	rep, err := run(ctx, p, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/chef:", err)
		return 1
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.writeText(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/chef:", err)
		return 1
	}
	if !rep.ThroughputMet || (rep.RSS != nil && !rep.RSS.Met) {
		return 2
	}
	return 0
}

// runTeamsMain runs -teams or -fleet and prints its report.
func runTeamsMain(ctx context.Context, p params, teams, fleetMode string, fleet, cookbooks, passes int, jsonOut bool) int {
	var out any
	var write func() error
	met := true
	if teams != "" {
		rep, err := runTeams(ctx, p, teams, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/chef:", err)
			return 1
		}
		out, write, met = rep, func() error { return rep.writeText(os.Stdout, p) }, rep.Met
	} else {
		rep, err := runFleet(ctx, fleetMode, fleet, cookbooks, passes, p.Clients, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/chef:", err)
			return 1
		}
		out, write = rep, func() error { return rep.writeText(os.Stdout) }
	}
	var err error
	if jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(out)
	} else {
		err = write()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/chef:", err)
		return 1
	}
	if !met {
		return 2
	}
	return 0
}

// report is a run's outcome.
type report struct {
	Params         params   `json:"params"`
	BodyBytes      int      `json:"body_bytes"`
	Baseline       []result `json:"baseline"`
	Bridge         []result `json:"bridge"`
	BaselineMedian float64  `json:"baseline_median_req_s"`
	BridgeMedian   float64  `json:"bridge_median_msgs_s"`
	Ratio          float64  `json:"ratio"`
	// Server CPU time per request, medians: less sensitive to a loaded
	// machine than rates.
	BaselineCPU   time.Duration `json:"baseline_cpu_per_request_ns"`
	BridgeCPU     time.Duration `json:"bridge_cpu_per_request_ns"`
	Lost          int64         `json:"lost"`
	ThroughputMet bool          `json:"throughput_met"`
	RSS           *rss          `json:"rss,omitempty"`
}

// rss is the peak-memory test's outcome.
type rss struct {
	BodyBytes      int   `json:"body_bytes"`
	Posts          int   `json:"posts"`
	Before, After  int64 `json:"-"`
	Growth         int64 `json:"growth_bytes"`
	BaselineGrowth int64 `json:"baseline_growth_bytes"`
	Received       int64 `json:"received"`
	Expected       int64 `json:"expected"`
	Ratio          float64
	BaselineRatio  float64
	Met            bool `json:"met"`
}

func run(ctx context.Context, p params, progress io.Writer) (*report, error) {
	body, err := os.ReadFile(fixturePath(p.Fixture))
	if err != nil {
		return nil, err
	}
	rep := &report{Params: p, BodyBytes: len(body)}
	for r := range p.Rounds {
		order := []string{modeBaseline, modeBridge}
		if r%2 == 1 {
			order = []string{modeBridge, modeBaseline}
		}
		for _, mode := range order {
			res, err := measure(ctx, mode, body, p)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", r+1, mode, err)
			}
			if mode == modeBaseline {
				rep.Baseline = append(rep.Baseline, res)
			} else {
				rep.Bridge = append(rep.Bridge, res)
				rep.Lost += res.Expected - res.Received
			}
			fmt.Fprintf(progress, "round %d %-8s %8.1f req/s  server CPU %5.2f ms/req  (%d accepted, %d refused", r+1, mode,
				res.rate(), ms(res.cpuPerRequest()), res.Accepted, res.Refused)
			if mode == modeBridge {
				fmt.Fprintf(progress, ", %d of %d messages received", res.Received, res.Expected)
			}
			fmt.Fprintln(progress, ")")
		}
	}
	rep.BaselineMedian = median(rep.Baseline, result.rate)
	rep.BridgeMedian = median(rep.Bridge, result.rate)
	rep.BaselineCPU = time.Duration(median(rep.Baseline, func(r result) float64 { return float64(r.cpuPerRequest()) }))
	rep.BridgeCPU = time.Duration(median(rep.Bridge, func(r result) float64 { return float64(r.cpuPerRequest()) }))
	if rep.BaselineMedian > 0 {
		rep.Ratio = rep.BridgeMedian / rep.BaselineMedian
	}
	rep.ThroughputMet = rep.Ratio >= 1.0 && rep.Lost == 0 || p.Rounds == 0
	if p.BigSize > 0 {
		if rep.RSS, err = measureRSS(ctx, body, p, progress); err != nil {
			return nil, fmt.Errorf("rss: %w", err)
		}
	}
	return rep, nil
}

// measure starts a fresh server, loads it, and for the bridge waits until the
// subscriber has every message.
func measure(ctx context.Context, mode string, body []byte, p params) (result, error) {
	c, err := startChild(ctx, mode)
	if err != nil {
		return result{}, err
	}
	defer c.stop()
	url := "http://" + c.httpAddr + "/data-collector/v0/"
	var sub *subscriber
	var per int64
	if mode == modeBridge {
		if sub, err = subscribe(c.mqttAddr); err != nil {
			return result{}, err
		}
		defer sub.client.Disconnect(100)
		if per, err = perRequest(httpClient(), url, body); err != nil {
			return result{}, err
		}
		if !sub.waitFor(per, p.Drain) {
			return result{}, fmt.Errorf("the warm-up request's %d messages did not arrive", per)
		}
		sub.received.Store(0)
	}
	serverBefore, err := c.cpu()
	if err != nil {
		return result{}, err
	}
	clientBefore := selfCPU()
	res, err := load(ctx, url, body, p.Clients, p.Duration)
	if err != nil {
		return res, err
	}
	if sub != nil {
		res.PerRequest, res.Expected = per, per*res.Accepted
		sub.waitFor(res.Expected, p.Drain)
		res.Received = sub.received.Load()
	}
	serverAfter, err := c.cpu()
	if err != nil {
		return res, err
	}
	res.ServerCPU, res.ClientCPU = serverAfter-serverBefore, selfCPU()-clientBefore
	return res, nil
}

// measureRSS posts a big converge to a fresh bridge (and, for comparison,
// to a fresh baseline) and reads the peak RSS before and after.
func measureRSS(ctx context.Context, fixture []byte, p params, progress io.Writer) (*rss, error) {
	big, err := bigConverge(fixture, p.BigSize)
	if err != nil {
		return nil, err
	}
	out := &rss{BodyBytes: len(big), Posts: p.BigPosts}
	for _, mode := range []string{modeBaseline, modeBridge} {
		c, err := startChild(ctx, mode)
		if err != nil {
			return nil, err
		}
		url := "http://" + c.httpAddr + "/data-collector/v0/"
		client := httpClient()
		var sub *subscriber
		if mode == modeBridge {
			if sub, err = subscribe(c.mqttAddr); err != nil {
				c.stop()
				return nil, err
			}
		}
		// Warm up with the normal fixture, so that "before" includes what any
		// request costs (buffers, goroutines, the broker's client state).
		var warm int64
		if sub != nil {
			if warm, err = perRequest(client, url, fixture); err == nil && !sub.waitFor(warm, p.Drain) {
				err = errors.New("the warm-up messages did not arrive")
			}
		} else if code, b, perr := post(client, url, fixture); perr != nil || code/100 != 2 {
			err = fmt.Errorf("%s warm-up: %d %s %v", mode, code, b, perr)
		}
		if err != nil {
			c.stop()
			return nil, err
		}
		before, err := c.hwm()
		if err != nil {
			c.stop()
			return nil, err
		}
		start := int64(0)
		if sub != nil {
			start = sub.received.Load()
		}
		var per int64
		for range p.BigPosts {
			code, b, err := post(client, url, big)
			if err != nil || code/100 != 2 {
				c.stop()
				return nil, fmt.Errorf("%s: posting %d bytes: %d %.200s %v", mode, len(big), code, b, err)
			}
			if mode == modeBridge {
				var a struct {
					Messages int64 `json:"messages"`
				}
				_ = json.Unmarshal(b, &a)
				per = a.Messages
				// Wait for delivery, so the peak includes the broker's copy
				// to the subscriber.
				sub.waitFor(start+per, p.Drain)
				start = sub.received.Load()
			}
		}
		after, err := c.hwm()
		if err != nil {
			c.stop()
			return nil, err
		}
		if sub != nil {
			out.Received = sub.received.Load()
			out.Expected = warm + per*int64(p.BigPosts)
			sub.client.Disconnect(100)
		}
		c.stop()
		growth := after - before
		fmt.Fprintf(progress, "rss %-8s before %6.1f MB, after %6.1f MB: growth %6.1f MB = %.2f × the %d-byte body\n",
			mode, mb(before), mb(after), mb(growth), float64(growth)/float64(len(big)), len(big))
		if mode == modeBridge {
			out.Before, out.After, out.Growth = before, after, growth
			out.Ratio = float64(growth) / float64(len(big))
		} else {
			out.BaselineGrowth = growth
			out.BaselineRatio = float64(growth) / float64(len(big))
		}
	}
	out.Met = out.Ratio < 4 && out.Received == out.Expected
	return out, nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(rs []result, f func(result) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	rates := make([]float64, len(rs))
	for i, r := range rs {
		rates[i] = f(r)
	}
	slices.Sort(rates)
	if len(rates)%2 == 1 {
		return rates[len(rates)/2]
	}
	return (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
}

func (r *report) writeText(w io.Writer) error {
	if r.Params.Rounds == 0 {
		return r.writeRSS(w)
	}
	_, err := fmt.Fprintf(w, `
bench/chef: %d-byte converge (%s), %d clients, %d rounds of %s

  baseline (json.Unmarshal into a map, 204)   median %8.1f req/s             server CPU %5.2f ms/request
  bridge (adapter + broker + subscriber)      median %8.1f converge msgs/s   server CPU %5.2f ms/request   (%d bus messages per request)
  ratio bridge / baseline                     %.2f   (target >= 1.00, every message received: %d lost)   %s
  server CPU per request, bridge / baseline   %.2f   (for information: less sensitive to a loaded machine)
`, r.BodyBytes, r.Params.Fixture, r.Params.Clients, r.Params.Rounds, r.Params.Duration,
		r.BaselineMedian, ms(r.BaselineCPU), r.BridgeMedian, ms(r.BridgeCPU), perRequestOf(r.Bridge), r.Ratio, r.Lost,
		verdictOf(r.ThroughputMet), float64(r.BridgeCPU)/float64(max(r.BaselineCPU, 1)))
	if err != nil {
		return err
	}
	return r.writeRSS(w)
}

func (r *report) writeRSS(w io.Writer) error {
	if r.RSS == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, `
  peak RSS growth, %d-byte converge posted %d times:
    bridge    %6.1f MB = %.2f × the body   (target < 4; %d of %d messages received)   %s
    baseline  %6.1f MB = %.2f × the body   (for comparison)
`, r.RSS.BodyBytes, r.RSS.Posts, mb(r.RSS.Growth), r.RSS.Ratio, r.RSS.Received, r.RSS.Expected, verdictOf(r.RSS.Met),
		mb(r.RSS.BaselineGrowth), r.RSS.BaselineRatio)
	return err
}

func verdictOf(ok bool) string {
	if ok {
		return "MET"
	}
	return "NOT MET"
}

func perRequestOf(rs []result) int64 {
	if len(rs) == 0 {
		return 0
	}
	return rs[0].PerRequest
}
