package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// measurement is the result of one (shape, mode, round).
type measurement struct {
	Shape string `json:"shape"`
	Mode  string `json:"mode"`
	Round int    `json:"round"`

	// PUBACKs received in the publish window, and per second of it. The
	// waits shape's window runs from the common start to the last client's
	// last PUBACK.
	AckedInWindow int64   `json:"acked_in_window"`
	PubRate       float64 `json:"pub_msgs_per_sec"`
	// Waits shape: the sum over clients of each one's count ÷ its own
	// time, which is what mqtt-benchmark prints as "Total Bandwidth"; and
	// the clients that had not finished when -waits-timeout passed.
	ClientRateSum float64 `json:"client_rate_sum,omitempty"`
	Incomplete    int     `json:"incomplete_clients,omitempty"`
	// All PUBACKs by the end of the drain, publishes never acknowledged,
	// and PUBACKs for packet ids not in flight (a broker bug if not 0).
	Acked          int64 `json:"acked"`
	Unacked        int64 `json:"unacked"`
	UnexpectedAcks int64 `json:"unexpected_acks"`

	// Messages in the JetStream stream (-1 for the baseline): routed, once
	// the bridge has stopped; nats-mqtt, once it held every PUBACKed
	// message or the drain ended. Routed only (-1 otherwise), the route's
	// own counts: confirmed by JetStream directly, or put in the outbox
	// because it did not confirm within confirm_timeout, or refused
	// (outbox full).
	Stored    int64 `json:"stored"`
	Delivered int64 `json:"route_delivered"`
	Outboxed  int64 `json:"route_outboxed"`
	Refused   int64 `json:"route_refused"`

	// Publish-to-PUBACK latency over every acknowledged message.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`

	Drain time.Duration `json:"drain_ns"`

	// CPU during the publish window in % of one core (-1 = unknown): the
	// bridge (unknown for nats-mqtt, which has none); this process, which
	// is the load generator and the in-process nats-server; and everything
	// else on the machine (noise).
	BridgeCPU   float64 `json:"bridge_cpu_pct"`
	GenNATSCPU  float64 `json:"generator_and_nats_cpu_pct"`
	OtherCPU    float64 `json:"other_cpu_pct"`
	BridgeUsMsg float64 `json:"bridge_cpu_us_per_msg"` // bridge CPU per PUBACKed message in the window
	// Bridge, generator and nats-server CPU per PUBACKed message in the
	// window: what one message costs the machine, which noise from other
	// processes affects much less than throughput. -1 when unknown.
	TotalUsMsg float64 `json:"total_cpu_us_per_msg"`
}

// bench is the state of one run shared by its measurements.
type bench struct {
	p        params
	dir      string
	bin      string
	hash     string
	nats     *natsServer
	progress io.Writer
}

// run builds the bridge, starts nats-server, runs every round of every
// shape (baseline, routed, nats-mqtt) and returns the report. Progress goes
// to progress.
func run(ctx context.Context, p params, progress io.Writer) (rep *report, err error) {
	rep = &report{Params: p, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Started: time.Now(), NATSVersion: server.VERSION}
	dir, err := os.MkdirTemp("", "firehose-bench-fanout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	b := &bench{p: p, dir: dir, bin: p.BridgeBin, progress: progress}
	if b.bin == "" {
		fmt.Fprintf(progress, "building %s ...\n", p.BridgePkg)
		b.bin = filepath.Join(dir, "firehose-bridge")
		if p.PerfDir != "" {
			// perf report needs the binary to resolve symbols; keep it.
			if err := os.MkdirAll(p.PerfDir, 0o755); err != nil {
				return nil, err
			}
			b.bin = filepath.Join(p.PerfDir, "firehose-bridge")
		}
		if err := benchkit.Build(ctx, p.BridgePkg, b.bin); err != nil {
			return nil, err
		}
		rep.Bridge = "built from " + p.BridgePkg
	} else {
		rep.Bridge = "binary " + b.bin
	}
	if len(p.BridgeEnv) > 0 {
		rep.Bridge += ", env " + strings.Join(p.BridgeEnv, " ")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(p.Pass), 10)
	if err != nil {
		return nil, err
	}
	b.hash = string(hash)
	if b.nats, err = startNATS(filepath.Join(dir, "jetstream"), p.User, p.Pass, b.hash); err != nil {
		return nil, err
	}
	defer b.nats.stop()

	for _, shape := range p.Shapes {
		for r := 1; r <= p.Rounds; r++ {
			for _, mode := range modes {
				m, err := b.measure(ctx, shape, mode, r)
				if err != nil {
					return nil, fmt.Errorf("%s %s round %d: %w", shape, mode, r, err)
				}
				fmt.Fprintln(progress, m.progressLine(p.Rounds))
				rep.Measurements = append(rep.Measurements, m)
			}
		}
	}
	rep.summarize()
	return rep, nil
}

func (m measurement) progressLine(rounds int) string {
	line := fmt.Sprintf("%-8s round %d/%d %-9s  pub %8.0f/s", m.Shape, m.Round, rounds, m.Mode, m.PubRate)
	if m.Shape == shapeWaits {
		line += fmt.Sprintf(" (client sum %8.0f/s)", m.ClientRateSum)
	}
	line += fmt.Sprintf("  acked %d  p50 %s  p99 %s  bridge cpu %s (%sµs/msg)  gen+nats cpu %s  total %sµs/msg  other cpu %s",
		m.Acked, benchkit.FormatDuration(m.P50), benchkit.FormatDuration(m.P99),
		benchkit.FormatPercent(m.BridgeCPU), benchkit.FormatMicros(m.BridgeUsMsg), benchkit.FormatPercent(m.GenNATSCPU),
		benchkit.FormatMicros(m.TotalUsMsg), benchkit.FormatPercent(m.OtherCPU))
	if m.Mode != modeBaseline {
		line += fmt.Sprintf("  stored %d (%s)", m.Stored, m.storedVerdict())
	}
	if m.Incomplete > 0 {
		line += fmt.Sprintf("  INCOMPLETE: %d clients not done", m.Incomplete)
	}
	return line
}

// storedOK says whether a routed or nats-mqtt measurement stored exactly
// what was PUBACKed.
func (m measurement) storedOK() bool {
	return m.Stored == m.Acked && m.Unacked == 0 && m.UnexpectedAcks == 0
}

func (m measurement) storedVerdict() string {
	if m.storedOK() {
		return "== PUBACKed"
	}
	return fmt.Sprintf("PUBACKed %d, unacked %d: MISMATCH", m.Acked, m.Unacked)
}

// system is what one measurement publishes to: a bridge it started, or
// nats-server's MQTT listener.
type system struct {
	addr string
	proc *benchkit.Proc // the bridge; nil for nats-mqtt
	br   *bridge        // nil for nats-mqtt
}

// start brings up the system for mode: a fresh bridge (routed: after
// removing the stream, which the bridge creates anew), or an empty stream
// behind nats-server's MQTT listener.
func (b *bench) start(ctx context.Context, mode, dir string) (system, error) {
	p := b.p
	switch mode {
	case modeNATSMQTT:
		if err := b.nats.resetMQTTStream(ctx); err != nil {
			return system{}, err
		}
		if err := mqttload.WaitReady(ctx, b.nats.mqttAddr, p.User, p.Pass, nil, p.ReadyTimeout); err != nil {
			return system{}, fmt.Errorf("nats-server's MQTT listener: %w", err)
		}
		return system{addr: b.nats.mqttAddr}, nil
	case modeRouted:
		if err := b.nats.deleteStream(ctx, streamName); err != nil {
			return system{}, err
		}
	}
	natsURL := ""
	if mode == modeRouted {
		natsURL = b.nats.url()
	}
	br, err := startBridge(b.bin, dir, p.BridgeEnv, p.User, b.hash, natsURL)
	if err != nil {
		return system{}, err
	}
	sys := system{addr: br.mqttAddr, proc: br.proc, br: br}
	if err := br.waitReadyz(ctx, p.ReadyTimeout); err != nil {
		_ = br.proc.Stop()
		return system{}, err
	}
	if err := mqttload.WaitReady(ctx, br.mqttAddr, p.User, p.Pass, br.proc, p.ReadyTimeout); err != nil {
		_ = br.proc.Stop()
		return system{}, err
	}
	return sys, nil
}

// measure starts the system for mode, publishes in the given shape, drains,
// stops the bridge and, routed or nats-mqtt, counts the stream.
func (b *bench) measure(ctx context.Context, shape, mode string, round int) (m measurement, err error) {
	m = measurement{Shape: shape, Mode: mode, Round: round, Stored: -1, Delivered: -1, Outboxed: -1, Refused: -1,
		BridgeCPU: -1, OtherCPU: -1, BridgeUsMsg: -1, TotalUsMsg: -1}
	p := b.p
	dir := filepath.Join(b.dir, fmt.Sprintf("%s-%s-r%d", shape, mode, round))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return m, err
	}
	defer os.RemoveAll(dir) // the outbox and the log; a failure's log tail is in the error already
	sys, err := b.start(ctx, mode, dir)
	if err != nil {
		return m, err
	}
	defer func() {
		if serr := sys.proc.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()

	runID := rand.Uint32()
	var clients []*mqttload.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	n, inflight, size := p.Pubs, p.Inflight, p.Size
	if shape == shapeWaits {
		n, inflight, size = p.WaitsClients, 1, p.WaitsSize
	}
	pubs := make([]*mqttload.Publisher, n)
	for i := range pubs {
		id := fmt.Sprintf("bench-%08x-p%d", runID, i)
		c, err := mqttload.Dial(mqttload.Options{Addr: sys.addr, ClientID: id, Username: p.User, Password: p.Pass, QueueLen: 256,
			KeepAlive: 30 * time.Minute})
		if err != nil {
			return m, fmt.Errorf("connect %s: %w", id, err)
		}
		clients = append(clients, c)
		c.SetPublishTemplate(fmt.Sprintf("bench/%d", i), mqttload.NewPayload(size, i, runID))
		pubs[i] = mqttload.NewPublisher(c, 1, inflight, true)
	}
	var counted *mqttload.Counted
	if shape == shapeWaits {
		counted = mqttload.NewCounted(pubs, p.WaitsCount)
	}
	for _, c := range clients {
		c.Start()
	}

	var perf *benchkit.PerfRecorder
	if p.PerfDir != "" && sys.proc != nil {
		if err := os.MkdirAll(p.PerfDir, 0o755); err != nil {
			return m, err
		}
		out := filepath.Join(p.PerfDir, fmt.Sprintf("%s-%s-r%d.perf.data", shape, mode, round))
		if perf, err = benchkit.StartPerf(sys.proc.PID(), out); err != nil {
			return m, err
		}
		defer perf.Stop()
		fmt.Fprintf(b.progress, "recording perf profile of the %s bridge (pid %d) into %s\n", mode, sys.proc.PID(), out)
	}

	// Publish phase.
	cpu := benchkit.StartCPUWindow(sys.proc.PID())
	if sys.proc == nil {
		cpu = benchkit.StartCPUWindowInProcess()
	}
	var t0, tEnd time.Time
	var fleet *mqttload.Fleet
	if shape == shapeWaits {
		res, err := counted.Run(ctx, p.WaitsTimeout, sys.proc)
		defer func() {
			for _, c := range clients {
				c.Close() // unblocks a publisher stuck on a full queue
			}
			counted.Wait()
		}()
		if err != nil {
			return m, err
		}
		t0, tEnd = res.Start, res.End
		m.ClientRateSum, m.Incomplete = res.ClientRateSum, res.Incomplete
		for _, pub := range pubs {
			m.AckedInWindow += pub.Acked()
		}
	} else {
		t0 = time.Now()
		fleet = mqttload.StartFleet(pubs, t0, 0)
		if tEnd, err = fleet.StopAt(ctx, t0.Add(p.Duration)); err != nil {
			return m, err
		}
		m.AckedInWindow = fleet.Acked()
	}
	elapsed := tEnd.Sub(t0)
	use := cpu.End(elapsed)
	perf.Stop() // profile the publish window only
	m.BridgeCPU, m.GenNATSCPU, m.OtherCPU = use.Proc, use.Self, use.Other
	if m.AckedInWindow > 0 {
		windowUs := float64(elapsed) / float64(time.Microsecond)
		if use.Proc >= 0 {
			m.BridgeUsMsg = use.Proc / 100 * windowUs / float64(m.AckedInWindow)
		}
		m.TotalUsMsg = (max(use.Proc, 0) + use.Self) / 100 * windowUs / float64(m.AckedInWindow)
	}
	m.PubRate = float64(m.AckedInWindow) / elapsed.Seconds()

	// Drain: wait for the PUBACKs of what is still in flight, for at most
	// p.Drain. A publisher stuck writing to a system that does not read is
	// unblocked by closing the clients below.
	drainDeadline := tEnd.Add(p.Drain)
	if fleet != nil {
		returned, err := fleet.WaitReturned(ctx, drainDeadline)
		if err != nil {
			return m, err
		}
		if returned {
			if err := benchkit.PollUntil(ctx, drainDeadline, 2*time.Millisecond, sys.proc, func() (bool, error) { return fleet.AllAcked(), nil }); err != nil {
				return m, err
			}
		}
	}
	switch mode {
	case modeRouted:
		// Messages the sink did not confirm in time wait in the outbox;
		// give the replayer until the drain deadline to store them.
		err := benchkit.PollUntil(ctx, drainDeadline, 50*time.Millisecond, sys.proc, func() (bool, error) {
			c, err := sys.br.routeCounts(ctx)
			m.Delivered, m.Outboxed, m.Refused = int64(c.Delivered), int64(c.Outboxed), int64(c.Refused)
			return c.InOutbox == 0, err
		})
		if err != nil {
			return m, err
		}
	case modeNATSMQTT:
		// nats-server PUBACKs before its stream has stored the message;
		// give the stream until the drain deadline to catch up.
		var acked int64
		for _, pub := range pubs {
			acked += pub.Acked()
		}
		err := benchkit.PollUntil(ctx, drainDeadline, 10*time.Millisecond, nil, func() (bool, error) {
			stored, err := b.nats.storedMsgs(ctx, mqttStreamName)
			m.Stored = stored
			return stored >= acked, err
		})
		if err != nil {
			return m, err
		}
	}
	m.Drain = time.Since(tEnd)

	// Disconnect; after Close the reader-owned state is ours.
	for _, c := range clients {
		c.Close()
	}
	clients = nil
	if fleet != nil {
		fleet.Wait() // publishers blocked on a dead connection have returned now
	} else {
		counted.Wait()
	}
	if err := sys.proc.Alive(); err != nil {
		return m, err
	}
	var hist benchkit.Histogram
	for _, pub := range pubs {
		m.Acked += pub.Acked()
		m.Unacked += int64(pub.Sent()) - pub.Acked()
		m.UnexpectedAcks += pub.UnexpectedAcks()
		hist.Merge(pub.Latency())
	}
	m.P50, m.P99, m.Max = hist.Quantile(0.50), hist.Quantile(0.99), hist.Max()

	// Stop the bridge (it flushes its sink) before counting the stream.
	if err := sys.proc.Stop(); err != nil {
		return m, err
	}
	if mode == modeRouted {
		if m.Stored, err = b.nats.storedMsgs(ctx, streamName); err != nil {
			return m, err
		}
		if err := b.nats.deleteStream(ctx, streamName); err != nil {
			return m, err
		}
	}
	return m, nil
}
