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

// summary is the median over rounds of one mode.
type summary struct {
	Mode        string        `json:"mode"`
	Rounds      int           `json:"rounds"`
	PubRate     float64       `json:"pub_msgs_per_sec"`
	P50         time.Duration `json:"p50_ns"`
	P99         time.Duration `json:"p99_ns"`
	Acked       float64       `json:"acked"`
	Stored      float64       `json:"stored"` // -1 for the baseline
	BridgeCPU   float64       `json:"bridge_cpu_pct"`
	GenNATSCPU  float64       `json:"generator_and_nats_cpu_pct"`
	OtherCPU    float64       `json:"other_cpu_pct"`
	BridgeUsMsg float64       `json:"bridge_cpu_us_per_msg"`
	TotalUsMsg  float64       `json:"total_cpu_us_per_msg"`
	// Not medians: routed rounds whose stream held exactly the PUBACKed
	// messages, and messages that went through the outbox in all rounds.
	StoredOKRounds int   `json:"stored_ok_rounds"`
	Outboxed       int64 `json:"route_outboxed"`
}

// verdict is the target.
type verdict struct {
	Ratio float64 `json:"routed_over_baseline_pub"`
	// CPURatio is baseline over routed total CPU per message: the
	// throughput ratio to expect when the system under test has the
	// machine's cores to itself and saturates them. -1 when unknown.
	CPURatio  float64 `json:"baseline_over_routed_total_cpu"`
	Target    float64 `json:"target"`
	AllStored bool    `json:"all_stored"` // every routed round stored exactly what was PUBACKed
	Met       bool    `json:"met"`
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
	Verdict      *verdict      `json:"verdict,omitempty"`
}

func (r *report) summarize() {
	r.Summaries, r.Verdict = nil, nil
	rates, costs := map[string]float64{}, map[string]float64{}
	allStored := true
	for _, mode := range []string{modeBaseline, modeRouted} {
		s := summary{Mode: mode, Stored: -1}
		var pub, p50, p99, acked, stored, bcpu, gcpu, ocpu, upm, tpm []float64
		for _, m := range r.Measurements {
			if m.Mode != mode {
				continue
			}
			s.Rounds++
			pub = append(pub, m.PubRate)
			p50 = append(p50, float64(m.P50))
			p99 = append(p99, float64(m.P99))
			acked = append(acked, float64(m.Acked))
			bcpu = append(bcpu, m.BridgeCPU)
			gcpu = append(gcpu, m.GenNATSCPU)
			ocpu = append(ocpu, m.OtherCPU)
			upm = append(upm, m.BridgeUsMsg)
			tpm = append(tpm, m.TotalUsMsg)
			if mode == modeRouted {
				stored = append(stored, float64(m.Stored))
				if m.storedOK() {
					s.StoredOKRounds++
				} else {
					allStored = false
				}
				s.Outboxed += max(0, m.Outboxed)
			}
		}
		if s.Rounds == 0 {
			continue
		}
		s.PubRate = benchkit.Median(pub)
		s.P50, s.P99 = time.Duration(benchkit.Median(p50)), time.Duration(benchkit.Median(p99))
		s.Acked = benchkit.Median(acked)
		if len(stored) > 0 {
			s.Stored = benchkit.Median(stored)
		}
		s.BridgeCPU, s.GenNATSCPU, s.OtherCPU = benchkit.Median(bcpu), benchkit.Median(gcpu), benchkit.Median(ocpu)
		s.BridgeUsMsg, s.TotalUsMsg = benchkit.Median(upm), benchkit.Median(tpm)
		r.Summaries = append(r.Summaries, s)
		rates[mode], costs[mode] = s.PubRate, s.TotalUsMsg
	}
	if base, routed := rates[modeBaseline], rates[modeRouted]; base > 0 {
		v := &verdict{Ratio: routed / base, CPURatio: -1, Target: ratioTarget, AllStored: allStored}
		if b, r := costs[modeBaseline], costs[modeRouted]; b > 0 && r > 0 {
			v.CPURatio = b / r
		}
		v.Met = v.Ratio >= v.Target && v.AllStored
		r.Verdict = v
	}
}

// WriteText prints the report as a table and the verdict.
func (r *report) WriteText(w io.Writer) error {
	p := r.Params
	var b strings.Builder
	fmt.Fprintf(&b, "firehose fan-out benchmark  (%s, %d CPUs, %s)\n", r.GoVersion, r.CPUs, r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "params: -pubs %d -size %d -inflight %d -duration %s -drain %s -rounds %d\n",
		p.Pubs, p.Size, p.Inflight, p.Duration, p.Drain, p.Rounds)
	fmt.Fprintf(&b, "load: %d QoS 1 publishers -> bench/<i> (user %q), at most %d unacknowledged each, publishing as fast as PUBACKs return; no subscribers\n",
		p.Pubs, p.User, p.Inflight)
	fmt.Fprintf(&b, "bridge: %s; a fresh process per measurement: embedded broker, a bcrypt (cost 10) user with publish [\"#\"], log.level warn\n", r.Bridge)
	fmt.Fprintf(&b, "  %s: no routes\n", modeBaseline)
	fmt.Fprintf(&b, "  %s: route %q filters [\"#\"] -> jetstream sink %q: stream %s (subjects %s, file storage, created by the bridge), required route, sink defaults\n",
		modeRouted, routeName, sinkName, streamName, streamSubject)
	fmt.Fprintf(&b, "nats-server %s runs inside this process (its CPU counts under gen+nats cpu) with JetStream file storage in a temp dir; the stream is deleted after each routed round\n", r.NATSVersion)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nmedians over %d rounds (baseline, routed, baseline, routed, ...)\n", p.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tpub msgs/s\tp50\tp99\tPUBACKed\tstored\tbridge cpu\tµs/msg\tgen+nats cpu\ttotal µs/msg\tother cpu\t")
	var notes []string
	for _, s := range r.Summaries {
		stored := "-"
		if s.Stored >= 0 {
			stored = fmt.Sprintf("%.0f", s.Stored)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			s.Mode, s.PubRate, benchkit.FormatDuration(s.P50), benchkit.FormatDuration(s.P99), s.Acked, stored,
			benchkit.FormatPercent(s.BridgeCPU), benchkit.FormatMicros(s.BridgeUsMsg), benchkit.FormatPercent(s.GenNATSCPU),
			benchkit.FormatMicros(s.TotalUsMsg), benchkit.FormatPercent(s.OtherCPU))
		if s.OtherCPU > noisyOtherCPU {
			notes = append(notes, fmt.Sprintf("note: other processes used %.0f%% CPU (median) while %s was measured: numbers are noisy", s.OtherCPU, s.Mode))
		}
		if s.Outboxed > 0 {
			notes = append(notes, fmt.Sprintf("note: %d routed messages went through the outbox (JetStream did not confirm within confirm_timeout)", s.Outboxed))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var rounds []string
	okRounds, routedRounds := 0, 0
	for _, m := range r.Measurements {
		if m.Unacked > 0 || m.UnexpectedAcks > 0 {
			notes = append(notes, fmt.Sprintf("note: %s round %d: %d publishes never acknowledged, %d unexpected PUBACKs", m.Mode, m.Round, m.Unacked, m.UnexpectedAcks))
		}
		if m.Mode != modeRouted {
			continue
		}
		routedRounds++
		mark := ""
		if m.storedOK() {
			okRounds++
		} else {
			mark = " MISMATCH"
		}
		rounds = append(rounds, fmt.Sprintf("r%d %d/%d%s", m.Round, m.Stored, m.Acked, mark))
	}
	if routedRounds > 0 {
		fmt.Fprintf(w, "stored == PUBACKed in %d of %d routed rounds (stored/PUBACKed: %s)\n", okRounds, routedRounds, strings.Join(rounds, ", "))
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	if v := r.Verdict; v != nil {
		if v.CPURatio > 0 {
			fmt.Fprintf(w, "cpu per message baseline/routed: %.2f (the throughput ratio to expect on cores that only the bridge, the generator and nats-server use)\n", v.CPURatio)
		}
		fmt.Fprintf(w, "ratio routed/baseline: %.2f (target >= %.1f)\n", v.Ratio, v.Target)
		verdict := "MET"
		if !v.Met {
			verdict = "NOT MET"
		}
		fmt.Fprintf(w, "target (routed >= %.1f x baseline pub msgs/s, every PUBACKed message stored): %s\n", v.Target, verdict)
	}
	return nil
}
