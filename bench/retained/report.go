package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// row is one line of the report: the measure, each broker's figure, the
// ratio ours / mosquitto (or fleet / empty for the Chef row), the target.
type row struct {
	Measure   string  `json:"measure"`
	Mosquitto string  `json:"mosquitto"`
	Ours      string  `json:"ours"`
	Ratio     float64 `json:"ratio"` // -1: none
	Target    string  `json:"target"`
}

// rows renders the results; a broker not measured shows "-".
func rows(rep *report) []row {
	var mosq, ours *brokerResult
	for i := range rep.Results {
		if rep.Results[i].Name == nameMosquitto {
			mosq = &rep.Results[i]
		} else {
			ours = &rep.Results[i]
		}
	}
	n := rep.Params.Nodes
	// each makes a row from one number per broker: f renders it. The ratio
	// ours / mosquitto is given when mosquitto's number is at least floor:
	// below, it is noise (0.1 MB of RSS, 0.2% of a core).
	each := func(measure, target string, v func(*brokerResult) float64, f func(float64) string, floor float64) row {
		r := row{Measure: measure, Mosquitto: "-", Ours: "-", Ratio: -1, Target: target}
		if mosq != nil {
			r.Mosquitto = f(v(mosq))
		}
		if ours != nil {
			r.Ours = f(v(ours))
		}
		if mosq != nil && ours != nil && v(mosq) >= floor {
			r.Ratio = ratioOf(v(ours), v(mosq))
		}
		return r
	}
	// gotRow is how many of the fleet a late subscriber got.
	gotRow := func(measure string, l func(*brokerResult) lateResult) row {
		r := row{Measure: measure, Mosquitto: "-", Ours: "-", Ratio: -1, Target: "every node"}
		if mosq != nil {
			r.Mosquitto = count(l(mosq).Got) + " of " + count(l(mosq).Expected)
		}
		if ours != nil {
			r.Ours = count(l(ours).Got) + " of " + count(l(ours).Expected)
		}
		if mosq != nil && ours != nil {
			r.Ratio = ratioOf(l(ours).completeness(), l(mosq).completeness())
		}
		return r
	}
	secs := func(l func(*brokerResult) lateResult) func(*brokerResult) float64 {
		return func(b *brokerResult) float64 { return l(b).Took.Seconds() }
	}
	fmtSecs := func(s float64) string { return benchkit.FormatDuration(time.Duration(s * float64(time.Second))) }
	rssAdded := func(l func(*brokerResult) lateResult) func(*brokerResult) float64 {
		return func(b *brokerResult) float64 { return mb(l(b).RSSAdded) }
	}
	fmtMB := func(v float64) string { return fmt.Sprintf("%.1f MB", v) }
	q0 := func(b *brokerResult) lateResult { return b.LateQoS0 }
	q1 := func(b *brokerResult) lateResult { return b.LateQoS1 }
	two := func(b *brokerResult) lateResult {
		if len(b.TwoLate) == 0 {
			return lateResult{}
		}
		return b.TwoLate[0]
	}
	twoGot := func(b *brokerResult) string {
		if len(b.TwoLate) < 2 {
			return "-"
		}
		return count(b.TwoLate[0].Got) + " and " + count(b.TwoLate[1].Got) + " of " + count(b.TwoLate[0].Expected)
	}
	restart := func(b *brokerResult) lateResult { return b.Restart }
	kill := func(b *brokerResult) lateResult { return b.Kill }

	out := []row{
		each(fmt.Sprintf("retained publish rate, QoS 1, %d in flight", rep.Params.Inflight), ">= 1.0",
			func(b *brokerResult) float64 { return b.Publish.rate() }, func(v float64) string { return fmt.Sprintf("%.0f msgs/s", v) }, 1),
		each("RSS per retained node", "<= 1.0",
			func(b *brokerResult) float64 { return b.rssPerNode(n) }, func(v float64) string { return fmt.Sprintf("%.0f bytes", v) }, 1),
		each(fmt.Sprintf("idle CPU with the fleet held (%v)", rep.Params.Idle), "0%",
			func(b *brokerResult) float64 { return b.IdleCPU }, func(v float64) string { return fmt.Sprintf("%.1f%% of a core", v) }, 1),
		gotRow("late subscriber, QoS 0: got", q0),
		each("late subscriber, QoS 0: time", "-", secs(q0), fmtSecs, 0.001),
		each("late subscriber, QoS 0: RSS added", "bounded", rssAdded(q0), fmtMB, 1),
		gotRow("late subscriber, QoS 1 (acking): got", q1),
		each("late subscriber, QoS 1 (acking): time", "-", secs(q1), fmtSecs, 0.001),
		each("RSS added by two late subscribers (QoS 0)", "bounded", rssAdded(two), fmtMB, 1),
	}
	twoRow := row{Measure: "two late subscribers (QoS 0): got", Mosquitto: "-", Ours: "-", Ratio: -1, Target: "every node"}
	if mosq != nil {
		twoRow.Mosquitto = twoGot(mosq)
	}
	if ours != nil {
		twoRow.Ours = twoGot(ours)
	}
	out = append(out, twoRow,
		gotRow("after a clean restart: got", restart),
		gotRow("after kill -9 at the last PUBACK: got (of those PUBACKed)", kill))

	view := row{Measure: "the bridge's dashboard: nodes in the Fleet view", Mosquitto: "n/a", Ours: "-", Ratio: -1, Target: "every node"}
	if ours != nil {
		view.Ours = count(ours.FleetView) + " of " + count(int64(n))
	}
	out = append(out, view)
	chef := row{Measure: fmt.Sprintf("Chef CPU per converge, %s nodes held / none", count(int64(n))), Mosquitto: "n/a", Ours: "-", Ratio: -1, Target: "<= 1.2"}
	if ours != nil && ours.ConvergeFleet != nil && rep.ConvergeEmpty != nil {
		chef.Ours = fmt.Sprintf("%s / %s", benchkit.FormatDuration(ours.ConvergeFleet.Median), benchkit.FormatDuration(rep.ConvergeEmpty.Median))
		chef.Ratio = ratioOf(float64(ours.ConvergeFleet.Median), float64(rep.ConvergeEmpty.Median))
	}
	return append(out, chef)
}

// count renders n with thousands separators: 100,000.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// WriteText prints the table.
func (rep *report) WriteText(w io.Writer) error {
	p := rep.Params
	fmt.Fprintf(w, "\nbench/retained: %s retained chef/<org>/<node>/status messages of %d bytes (the bridge's own status for %s)\n",
		count(int64(p.Nodes)), rep.PayloadBytes, p.Fixture)
	if rep.Mosquitto != "" {
		fmt.Fprintf(w, "mosquitto: %s, its defaults, persistence on; ours: cmd/bridge, its defaults\n", rep.Mosquitto)
	}
	fmt.Fprintf(w, "Chef CPU: %d rounds of %d converges over %d nodes, %d clients, after one converge of each\n\n",
		p.ConvergeRounds, p.Converges, p.ConvergeNodes, p.Clients)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmosquitto\tours\tratio\ttarget\t")
	for _, r := range rep.Rows {
		ratio := "-"
		if r.Ratio >= 0 {
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.Measure, r.Mosquitto, r.Ours, ratio, r.Target)
	}
	return tw.Flush()
}
