package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// brokerResult is everything measured on one broker.
type brokerResult struct {
	Name      string    `json:"name"`
	Publish   published `json:"publish"`
	RSSBefore int64     `json:"rss_before_bytes"`
	RSSFleet  int64     `json:"rss_fleet_bytes"`
	// IdleCPU is the server's CPU with the fleet held and nothing
	// happening, in % of one core.
	IdleCPU  float64      `json:"idle_cpu_percent"`
	LateQoS0 lateResult   `json:"late_qos0"`
	LateQoS1 lateResult   `json:"late_qos1"`
	TwoLate  []lateResult `json:"two_late_qos0"`
	Restart  lateResult   `json:"after_restart"`
	Kill     lateResult   `json:"after_kill"`
	// FleetView is how many nodes the bridge's dashboard shows once the
	// fleet is published (GET /api/v1/fleet); -1 for mosquitto.
	FleetView int64 `json:"fleet_view"`
	// ConvergeFleet is the bridge's CPU per converge with the fleet held;
	// nil for mosquitto.
	ConvergeFleet *convergeCPU `json:"converge_fleet,omitempty"`
}

func (r brokerResult) rssPerNode(nodes int) float64 {
	return float64(r.RSSFleet-r.RSSBefore) / float64(nodes)
}

// report is a run's outcome.
type report struct {
	Params       params         `json:"params"`
	Mosquitto    string         `json:"mosquitto_version,omitempty"`
	PayloadBytes int            `json:"payload_bytes"`
	Results      []brokerResult `json:"results"`
	// ConvergeEmpty is the bridge's CPU per converge with no fleet; nil
	// unless the bridge was measured.
	ConvergeEmpty *convergeCPU `json:"converge_empty,omitempty"`
	Rows          []row        `json:"rows"`
}

func run(ctx context.Context, p params, progress io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "bench-retained-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := p.BridgeBin
	if bin == "" {
		fmt.Fprintf(progress, "building %s\n", p.BridgePkg)
		bin = filepath.Join(dir, "bridge")
		if err := benchkit.Build(ctx, p.BridgePkg, bin); err != nil {
			return nil, err
		}
	}
	fix, err := readFixture(p.Fixture)
	if err != nil {
		return nil, err
	}
	rep := &report{Params: p}
	measureOurs := false
	for _, b := range p.Brokers {
		measureOurs = measureOurs || b == nameOurs
		if b == nameMosquitto {
			rep.Mosquitto = benchkit.MosquittoVersion(p.MosqBin)
		}
	}

	// A bridge with no fleet: its own status for the fixture's converge is
	// the fleet's payload, and its CPU per converge the Chef row's baseline.
	empty, err := startIn(ctx, p, dir, "empty", func(d string) (*server, error) { return newBridge(p, bin, d) })
	if err != nil {
		return nil, err
	}
	tmpl, err := captureStatus(ctx, empty, fix)
	if err == nil && measureOurs {
		fmt.Fprintf(progress, "empty bridge: %d converges of %d nodes to warm up, then %d rounds of %d\n", p.ConvergeNodes, p.ConvergeNodes, p.ConvergeRounds, p.Converges)
		var cpu convergeCPU
		cpu, err = measureConverges(ctx, empty, fix, p, perfFile(p, "converge-empty"))
		rep.ConvergeEmpty = &cpu
		fmt.Fprintf(progress, "empty bridge: CPU per converge %v (rounds %v)\n", cpu.Median, cpu.Rounds)
	}
	if stopErr := empty.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, err
	}
	rep.PayloadBytes = len(tmpl.payload)
	fmt.Fprintf(progress, "the bridge's own status payload: %d bytes\n", rep.PayloadBytes)

	for _, name := range p.Brokers {
		newServer := func(d string) (*server, error) { return newMosquitto(p, d) }
		if name == nameOurs {
			newServer = func(d string) (*server, error) { return newBridge(p, bin, d) }
		}
		s, err := startIn(ctx, p, dir, name, newServer)
		if err != nil {
			return nil, err
		}
		res, err := measureBroker(ctx, s, p, fix, tmpl, progress)
		if stopErr := s.stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rep.Results = append(rep.Results, res)
	}
	rep.Rows = rows(rep)
	return rep, nil
}

// startIn makes a server in a fresh directory under dir and starts it.
func startIn(ctx context.Context, p params, dir, name string, newServer func(dir string) (*server, error)) (*server, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o750); err != nil {
		return nil, err
	}
	s, err := newServer(d)
	if err != nil {
		return nil, err
	}
	if err := s.start(ctx, p.ReadyTimeout); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

func perfFile(p params, name string) string {
	if p.PerfDir == "" {
		return ""
	}
	return filepath.Join(p.PerfDir, name+".perf.data")
}

// publishTimeout bounds publishing a fleet: generous, at 500 msgs/s.
func publishTimeout(nodes int) time.Duration {
	return max(time.Minute, time.Duration(nodes/500)*time.Second)
}

// measureBroker measures one started server, row by row, and leaves it
// running (restarted twice).
func measureBroker(ctx context.Context, s *server, p params, fix *fixture, tmpl statusTemplate, progress io.Writer) (brokerResult, error) {
	res := brokerResult{Name: s.name, FleetView: -1}
	var err error
	if res.RSSBefore, err = s.rss(); err != nil {
		return res, err
	}
	first := tmpl.newPass(p.Nodes, tmpl.runID)
	var rec *benchkit.PerfRecorder
	if out := perfFile(p, "publish-"+s.name); out != "" && s.name == nameOurs {
		if rec, err = benchkit.StartPerf(s.proc.PID(), out); err != nil {
			return res, err
		}
	}
	res.Publish, err = publish(ctx, s, first, p.Inflight, publishTimeout(p.Nodes), nil)
	rec.Stop()
	if err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "%s: %d retained statuses PUBACKed in %v: %.0f msgs/s\n", s.name, res.Publish.Acked, res.Publish.Elapsed.Round(time.Millisecond), res.Publish.rate())

	cpu0, err := s.cpu()
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	select {
	case <-time.After(p.Idle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	cpu1, err := s.cpu()
	if err != nil {
		return res, err
	}
	res.IdleCPU = 100 * float64(cpu1-cpu0) / float64(time.Since(t0))
	if res.RSSFleet, err = s.rss(); err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "%s: idle CPU %.1f%% of a core; RSS %.1f MB, %.0f bytes per node\n", s.name, res.IdleCPU, mb(res.RSSFleet), res.rssPerNode(p.Nodes))

	if s.httpAddr != "" {
		if res.FleetView, err = fleetView(ctx, s); err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "%s: the dashboard's Fleet view shows %d nodes\n", s.name, res.FleetView)
		cpu, err := measureConverges(ctx, s, fix, p, perfFile(p, "converge-fleet"))
		if err != nil {
			return res, err
		}
		res.ConvergeFleet = &cpu
		fmt.Fprintf(progress, "%s: with the fleet held, CPU per converge %v (rounds %v)\n", s.name, cpu.Median, cpu.Rounds)
	}

	want := int64(p.Nodes)
	lateOne := func(what string, qos byte, runID string, expected int64) (lateResult, error) {
		r, err := late(ctx, s, p, 1, qos, runID, expected)
		if err != nil {
			return lateResult{}, err
		}
		fmt.Fprintf(progress, "%s: %s: got %d of %d in %v (%d others), RSS +%.1f MB\n", s.name, what, r[0].Got, r[0].Expected, r[0].Took.Round(time.Millisecond), r[0].Other, mb(r[0].RSSAdded))
		return r[0], nil
	}
	if res.LateQoS0, err = lateOne("late subscriber QoS 0", 0, first.runID, want); err != nil {
		return res, err
	}
	if res.LateQoS1, err = lateOne("late subscriber QoS 1", 1, first.runID, want); err != nil {
		return res, err
	}
	if res.TwoLate, err = late(ctx, s, p, 2, 0, first.runID, want); err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "%s: two late subscribers QoS 0: got %d and %d of %d, RSS +%.1f MB\n", s.name, res.TwoLate[0].Got, res.TwoLate[1].Got, want, mb(res.TwoLate[0].RSSAdded))

	if err := s.restart(ctx, false, p.ReadyTimeout); err != nil {
		return res, err
	}
	if res.Restart, err = lateOne("after a clean restart", 0, first.runID, want); err != nil {
		return res, err
	}

	// Every node's status again, with another run id, and kill -9 as soon
	// as the last PUBACK arrives.
	again := tmpl.newPass(p.Nodes, otherRunID(tmpl.runID, 9))
	pub, err := publish(ctx, s, again, p.Inflight, publishTimeout(p.Nodes), s.proc.Kill)
	if err != nil {
		return res, err
	}
	if err := s.start(ctx, p.ReadyTimeout); err != nil {
		return res, err
	}
	if res.Kill, err = lateOne("after kill -9 at the last PUBACK", 0, again.runID, pub.Acked); err != nil {
		return res, err
	}
	return res, nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
