package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// Above this much CPU (% of one core) used by other processes during a
// measurement, the report warns that the machine was busy.
const noisyOtherCPU = 25

// targets are issue 13's, per shape: routed PUBACKed msgs/s over the
// baseline's, and (0: none) over nats-mqtt's.
var targets = map[string]struct{ Baseline, NATSMQTT float64 }{
	shapeWindowed: {Baseline: 0.8},
	shapeWaits:    {Baseline: 0.6, NATSMQTT: 1.0},
}

// summary is the median over rounds of one (shape, mode).
type summary struct {
	Shape         string        `json:"shape"`
	Mode          string        `json:"mode"`
	Rounds        int           `json:"rounds"`
	PubRate       float64       `json:"pub_msgs_per_sec"`
	ClientRateSum float64       `json:"client_rate_sum,omitempty"`
	P50           time.Duration `json:"p50_ns"`
	P99           time.Duration `json:"p99_ns"`
	Acked         float64       `json:"acked"`
	Stored        float64       `json:"stored"` // -1 for the baseline
	BridgeCPU     float64       `json:"bridge_cpu_pct"`
	GenNATSCPU    float64       `json:"generator_and_nats_cpu_pct"`
	OtherCPU      float64       `json:"other_cpu_pct"`
	BridgeUsMsg   float64       `json:"bridge_cpu_us_per_msg"`
	TotalUsMsg    float64       `json:"total_cpu_us_per_msg"`
	// Not medians: rounds whose stream held exactly the PUBACKed messages
	// (routed, nats-mqtt), messages that went through the outbox in all
	// rounds, and rounds in which a client did not finish (waits shape).
	StoredOKRounds   int   `json:"stored_ok_rounds"`
	Outboxed         int64 `json:"route_outboxed"`
	IncompleteRounds int   `json:"incomplete_rounds,omitempty"`
}

// verdict is the target for one shape.
type verdict struct {
	Shape string  `json:"shape"`
	Ratio float64 `json:"routed_over_baseline_pub"`
	// CPURatio is baseline over routed total CPU per message: the
	// throughput ratio to expect when the system under test has the
	// machine's cores to itself and saturates them. -1 when unknown.
	CPURatio float64 `json:"baseline_over_routed_total_cpu"`
	Target   float64 `json:"target"`
	// NATSRatio is routed over nats-mqtt PUBACKed msgs/s (-1 when not
	// measured), and NATSTarget its target (0: none).
	NATSRatio  float64 `json:"routed_over_nats_mqtt_pub"`
	NATSTarget float64 `json:"nats_mqtt_target,omitempty"`
	AllStored  bool    `json:"all_stored"` // every routed round stored exactly what was PUBACKed, and finished
	Met        bool    `json:"met"`
}

type report struct {
	Params       params        `json:"params"`
	GoVersion    string        `json:"go_version"`
	CPUs         int           `json:"cpus"`
	Started      time.Time     `json:"started"`
	Bridge       string        `json:"bridge"`
	NATSVersion  string        `json:"nats_server_version"`
	Measurements []measurement `json:"measurements"`
	Summaries    []summary     `json:"summaries"`
	Verdicts     []verdict     `json:"verdicts"`
}

func (r *report) summarize() {
	r.Summaries, r.Verdicts = nil, nil
	for _, shape := range r.Params.Shapes {
		rates, costs := map[string]float64{}, map[string]float64{}
		routedOK := true
		for _, mode := range modes {
			s := summary{Shape: shape, Mode: mode, Stored: -1}
			var pub, sum, p50, p99, acked, stored, bcpu, gcpu, ocpu, upm, tpm []float64
			for _, m := range r.Measurements {
				if m.Shape != shape || m.Mode != mode {
					continue
				}
				s.Rounds++
				pub = append(pub, m.PubRate)
				sum = append(sum, m.ClientRateSum)
				p50 = append(p50, float64(m.P50))
				p99 = append(p99, float64(m.P99))
				acked = append(acked, float64(m.Acked))
				bcpu = append(bcpu, m.BridgeCPU)
				gcpu = append(gcpu, m.GenNATSCPU)
				ocpu = append(ocpu, m.OtherCPU)
				upm = append(upm, m.BridgeUsMsg)
				tpm = append(tpm, m.TotalUsMsg)
				if m.Incomplete > 0 {
					s.IncompleteRounds++
				}
				if mode == modeBaseline {
					continue
				}
				stored = append(stored, float64(m.Stored))
				if m.storedOK() {
					s.StoredOKRounds++
				}
				s.Outboxed += max(0, m.Outboxed)
				if mode == modeRouted && (!m.storedOK() || m.Incomplete > 0) {
					routedOK = false
				}
			}
			if s.Rounds == 0 {
				continue
			}
			med := benchkit.Median
			s.PubRate, s.ClientRateSum = med(pub), med(sum)
			s.P50, s.P99 = time.Duration(med(p50)), time.Duration(med(p99))
			s.Acked = med(acked)
			if len(stored) > 0 {
				s.Stored = med(stored)
			}
			s.BridgeCPU, s.GenNATSCPU, s.OtherCPU = med(bcpu), med(gcpu), med(ocpu)
			s.BridgeUsMsg, s.TotalUsMsg = med(upm), med(tpm)
			r.Summaries = append(r.Summaries, s)
			rates[mode], costs[mode] = s.PubRate, s.TotalUsMsg
		}
		base, routed := rates[modeBaseline], rates[modeRouted]
		if base <= 0 {
			continue
		}
		t := targets[shape]
		v := verdict{Shape: shape, Ratio: routed / base, CPURatio: -1, Target: t.Baseline, NATSRatio: -1, NATSTarget: t.NATSMQTT, AllStored: routedOK}
		if b, r := costs[modeBaseline], costs[modeRouted]; b > 0 && r > 0 {
			v.CPURatio = b / r
		}
		if n := rates[modeNATSMQTT]; n > 0 {
			v.NATSRatio = routed / n
		}
		v.Met = v.Ratio >= v.Target && v.AllStored && (v.NATSTarget == 0 || v.NATSRatio >= v.NATSTarget)
		r.Verdicts = append(r.Verdicts, v)
	}
}

// WriteText prints one table per shape and its verdict.
func (r *report) WriteText(w io.Writer) error {
	p := r.Params
	var b strings.Builder
	fmt.Fprintf(&b, "firehose fan-out benchmark  (%s, %d CPUs, %s)\n", r.GoVersion, r.CPUs, r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "params: -shapes %s -rounds %d -drain %s\n", strings.Join(p.Shapes, ","), p.Rounds, p.Drain)
	for _, shape := range p.Shapes {
		switch shape {
		case shapeWindowed:
			fmt.Fprintf(&b, "windowed shape: -pubs %d -size %d -inflight %d -duration %s: %d QoS 1 publishers -> bench/<i>, at most %d unacknowledged each, publishing as fast as PUBACKs return\n",
				p.Pubs, p.Size, p.Inflight, p.Duration, p.Pubs, p.Inflight)
		case shapeWaits:
			fmt.Fprintf(&b, "waits shape (mqtt-benchmark's): -waits-clients %d -waits-count %d -waits-size %d -waits-timeout %s: each client publishes to bench/<i> at QoS 1, waiting for each PUBACK before the next\n",
				p.WaitsClients, p.WaitsCount, p.WaitsSize, p.WaitsTimeout)
		}
	}
	fmt.Fprintf(&b, "no subscribers; user %q with a bcrypt (cost 10) password everywhere\n", p.User)
	fmt.Fprintf(&b, "bridge: %s; a fresh process per measurement: embedded broker, publish [\"#\"], log.level warn\n", r.Bridge)
	fmt.Fprintf(&b, "  %s: no routes\n", modeBaseline)
	fmt.Fprintf(&b, "  %s: route %q filters [\"#\"] -> jetstream sink %q: stream %s (subjects %s, file storage, created by the bridge), required route, sink defaults\n",
		modeRouted, routeName, sinkName, streamName, streamSubject)
	fmt.Fprintf(&b, "  %s: nats-server's own MQTT listener; stream %s (subjects %s, file storage) captures what it publishes (it PUBACKs before the stream stores, the bridge after)\n",
		modeNATSMQTT, mqttStreamName, mqttStreamSubject)
	fmt.Fprintf(&b, "nats-server %s runs inside this process (its CPU counts under gen+nats cpu) with JetStream file storage in a temp dir; streams are made anew each round\n", r.NATSVersion)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, shape := range p.Shapes {
		if err := r.writeShape(w, shape); err != nil {
			return err
		}
	}
	return nil
}

func (r *report) writeShape(w io.Writer, shape string) error {
	fmt.Fprintf(w, "\n%s shape, medians over %d rounds (%s, ...)\n", shape, r.Params.Rounds, strings.Join(modes, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tpub msgs/s\tclient sum\tp50\tp99\tPUBACKed\tstored\tbridge cpu\tµs/msg\tgen+nats cpu\ttotal µs/msg\tother cpu\t")
	var notes []string
	for _, s := range r.Summaries {
		if s.Shape != shape {
			continue
		}
		stored, sum := "-", "-"
		if s.Stored >= 0 {
			stored = fmt.Sprintf("%.0f", s.Stored)
		}
		if shape == shapeWaits {
			sum = fmt.Sprintf("%.0f", s.ClientRateSum)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			s.Mode, s.PubRate, sum, benchkit.FormatDuration(s.P50), benchkit.FormatDuration(s.P99), s.Acked, stored,
			benchkit.FormatPercent(s.BridgeCPU), benchkit.FormatMicros(s.BridgeUsMsg), benchkit.FormatPercent(s.GenNATSCPU),
			benchkit.FormatMicros(s.TotalUsMsg), benchkit.FormatPercent(s.OtherCPU))
		if s.OtherCPU > noisyOtherCPU {
			notes = append(notes, fmt.Sprintf("note: other processes used %.0f%% CPU (median) while %s was measured: numbers are noisy", s.OtherCPU, s.Mode))
		}
		if s.Outboxed > 0 {
			notes = append(notes, fmt.Sprintf("note: %d routed messages went through the outbox (JetStream did not confirm within confirm_timeout)", s.Outboxed))
		}
		if s.IncompleteRounds > 0 {
			notes = append(notes, fmt.Sprintf("note: %s did not let every client finish within -waits-timeout in %d of %d rounds", s.Mode, s.IncompleteRounds, s.Rounds))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	for _, mode := range []string{modeRouted, modeNATSMQTT} {
		var rounds []string
		ok, n := 0, 0
		for _, m := range r.Measurements {
			if m.Shape != shape || m.Mode != mode {
				continue
			}
			n++
			mark := ""
			if m.storedOK() {
				ok++
			} else {
				mark = " MISMATCH"
			}
			rounds = append(rounds, fmt.Sprintf("r%d %d/%d%s", m.Round, m.Stored, m.Acked, mark))
		}
		if n > 0 {
			fmt.Fprintf(w, "%s: stored == PUBACKed in %d of %d rounds (stored/PUBACKed: %s)\n", mode, ok, n, strings.Join(rounds, ", "))
		}
	}
	for _, m := range r.Measurements {
		if m.Shape == shape && (m.Unacked > 0 || m.UnexpectedAcks > 0) {
			notes = append(notes, fmt.Sprintf("note: %s round %d: %d publishes never acknowledged, %d unexpected PUBACKs", m.Mode, m.Round, m.Unacked, m.UnexpectedAcks))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	for _, v := range r.Verdicts {
		if v.Shape != shape {
			continue
		}
		if v.CPURatio > 0 {
			fmt.Fprintf(w, "cpu per message baseline/routed: %.2f (the throughput ratio to expect on cores that only the bridge, the generator and nats-server use)\n", v.CPURatio)
		}
		fmt.Fprintf(w, "ratio routed/baseline: %.2f (target >= %.1f)\n", v.Ratio, v.Target)
		cond := fmt.Sprintf("routed >= %.1f x baseline", v.Target)
		if v.NATSRatio > 0 {
			if v.NATSTarget > 0 {
				fmt.Fprintf(w, "ratio routed/nats-mqtt: %.2f (target >= %.1f)\n", v.NATSRatio, v.NATSTarget)
				cond += fmt.Sprintf(" and >= %.1f x nats-mqtt", v.NATSTarget)
			} else {
				fmt.Fprintf(w, "ratio routed/nats-mqtt: %.2f (no target)\n", v.NATSRatio)
			}
		}
		verdict := "MET"
		if !v.Met {
			verdict = "NOT MET"
		}
		fmt.Fprintf(w, "target (%s pub msgs/s, every PUBACKed message stored): %s\n", cond, verdict)
	}
	return nil
}
