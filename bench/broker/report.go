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

// targetFor is issue 13's target for ours/mosquitto in a workload: the
// ratio, and whether ours must also lose nothing. The windowed shape
// compares received msgs/s, the waits shape the publishers' msgs/s (what
// mqtt-benchmark reports).
func targetFor(w workload) (ratio float64, noLoss bool) {
	switch {
	case w.Shape == shapeWindowed && w.QoS == 1:
		return 1.5, true
	case w.Shape == shapeWindowed:
		return 0.9, false
	case w.QoS == 1:
		return 1.0, w.Subs > 0
	default:
		return 1.0, false
	}
}

type brokerInfo struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	External bool   `json:"external"`
	Version  string `json:"version,omitempty"`
	Setup    string `json:"setup"`
}

// summary is the median over rounds of one (broker, workload).
type summary struct {
	Broker        string        `json:"broker"`
	Workload      workload      `json:"workload"`
	Rounds        int           `json:"rounds"`
	PubRate       float64       `json:"pub_msgs_per_sec"`
	ClientRateSum float64       `json:"client_rate_sum,omitempty"`
	RecvRate      float64       `json:"recv_msgs_per_sec"`
	Received      float64       `json:"received"`
	Expected      float64       `json:"expected"`
	Lost          float64       `json:"lost"`
	Dup           float64       `json:"dup"`
	AckP50        time.Duration `json:"ack_p50_ns,omitempty"`
	AckP99        time.Duration `json:"ack_p99_ns,omitempty"`
	P50           time.Duration `json:"p50_ns"`
	P99           time.Duration `json:"p99_ns"`
	BrokerCPU     float64       `json:"broker_cpu_pct"`
	GenCPU        float64       `json:"generator_cpu_pct"`
	OtherCPU      float64       `json:"other_cpu_pct"`
	UsPerMsg      float64       `json:"broker_cpu_us_per_msg"`
	// Not medians: how many rounds lost anything, the worst round, and
	// rounds in which a client did not finish in time (waits shape).
	LossyRounds      int   `json:"lossy_rounds"`
	MaxLost          int64 `json:"max_lost"`
	IncompleteRounds int   `json:"incomplete_rounds,omitempty"`
}

type ratio struct {
	Workload workload `json:"workload"`
	Metric   string   `json:"metric"` // what was compared
	Ratio    float64  `json:"ours_over_mosquitto"`
	Target   float64  `json:"target"`
	NoLoss   bool     `json:"target_needs_no_loss"`
	Met      bool     `json:"met"` // ratio >= target, ours finished, and (NoLoss) lost nothing
}

type report struct {
	Params       params        `json:"params"`
	GoVersion    string        `json:"go_version"`
	CPUs         int           `json:"cpus"`
	Started      time.Time     `json:"started"`
	Brokers      []brokerInfo  `json:"brokers"`
	Measurements []measurement `json:"measurements"`
	Summaries    []summary     `json:"summaries"`
	Ratios       []ratio       `json:"ratios"`
}

func (m measurement) workload() workload { return workload{Shape: m.Shape, QoS: m.QoS, Subs: m.Subs} }

func (r *report) summarize() {
	r.Summaries, r.Ratios = nil, nil
	for _, w := range r.Params.workloads() {
		rate := map[string]float64{}
		lossless, finished := map[string]bool{}, map[string]bool{}
		for _, b := range r.Params.Brokers {
			s := summary{Broker: b, Workload: w}
			var pub, sum, rec, rcv, exp, lst, dup, a50, a99, p50, p99, bcpu, gcpu, ocpu, upm []float64
			for _, m := range r.Measurements {
				if m.Broker != b || m.workload() != w {
					continue
				}
				s.Rounds++
				pub = append(pub, m.PubRate)
				sum = append(sum, m.ClientRateSum)
				rec = append(rec, m.RecvRate)
				rcv = append(rcv, float64(m.Received))
				exp = append(exp, float64(m.Expected))
				lst = append(lst, float64(m.Lost))
				dup = append(dup, float64(m.Dup))
				a50 = append(a50, float64(m.AckP50))
				a99 = append(a99, float64(m.AckP99))
				p50 = append(p50, float64(m.P50))
				p99 = append(p99, float64(m.P99))
				bcpu = append(bcpu, m.BrokerCPU)
				gcpu = append(gcpu, m.GenCPU)
				ocpu = append(ocpu, m.OtherCPU)
				upm = append(upm, m.BrokerUsPerMsg)
				if m.Lost > 0 {
					s.LossyRounds++
				}
				s.MaxLost = max(s.MaxLost, m.Lost)
				if m.Incomplete > 0 {
					s.IncompleteRounds++
				}
			}
			if s.Rounds == 0 {
				continue
			}
			med := benchkit.Median
			s.PubRate, s.ClientRateSum, s.RecvRate = med(pub), med(sum), med(rec)
			s.Received, s.Expected, s.Lost, s.Dup = med(rcv), med(exp), med(lst), med(dup)
			s.AckP50, s.AckP99 = time.Duration(med(a50)), time.Duration(med(a99))
			s.P50, s.P99 = time.Duration(med(p50)), time.Duration(med(p99))
			s.BrokerCPU, s.GenCPU, s.OtherCPU, s.UsPerMsg = med(bcpu), med(gcpu), med(ocpu), med(upm)
			r.Summaries = append(r.Summaries, s)
			rate[b] = s.RecvRate
			if w.Shape == shapeWaits {
				rate[b] = s.PubRate
			}
			lossless[b] = s.MaxLost == 0
			finished[b] = s.IncompleteRounds == 0
		}
		mo, okM := rate[nameMosquitto]
		ou, okO := rate[nameOurs]
		if !okM || !okO || mo <= 0 {
			continue
		}
		rt := ratio{Workload: w, Metric: "recv msgs/s", Ratio: ou / mo}
		if w.Shape == shapeWaits {
			rt.Metric = "pub msgs/s"
		}
		rt.Target, rt.NoLoss = targetFor(w)
		rt.Met = rt.Ratio >= rt.Target && finished[nameOurs] && (!rt.NoLoss || lossless[nameOurs])
		r.Ratios = append(r.Ratios, rt)
	}
}

// WriteText prints the report as tables, one per workload.
func (r *report) WriteText(w io.Writer) error {
	p := r.Params
	rate := "unlimited"
	if p.Rate > 0 {
		rate = fmt.Sprintf("%g msgs/s per publisher", p.Rate)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "firehose broker benchmark  (%s, %d CPUs, %s)\n", r.GoVersion, r.CPUs, r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "params: -brokers %s -shapes %s -qos %s -rounds %d -drain %s\n",
		strings.Join(p.Brokers, ","), strings.Join(p.Shapes, ","), joinInts(p.QoS), p.Rounds, p.Drain)
	for _, shape := range p.Shapes {
		switch shape {
		case shapeWaits:
			fmt.Fprintf(&b, "waits shape (mqtt-benchmark's): -waits-clients %d -waits-count %d -waits-size %d -waits-subs %s -waits-timeout %s: "+
				"client i publishes to bench/<i>, at QoS 1 waiting for each PUBACK before the next; subscribers take bench/#\n",
				p.WaitsClients, p.WaitsCount, p.WaitsSize, joinInts(p.WaitsSubs), p.WaitsTimeout)
		case shapeWindowed:
			fmt.Fprintf(&b, "windowed shape: -pubs %d -subs %d -size %d -duration %s -inflight %d -rate %g (%s): "+
				"publisher i -> bench/<i>, %d subscribers on bench/# (each message expected %d times)\n",
				p.Pubs, p.Subs, p.Size, p.Duration, p.Inflight, p.Rate, rate, p.Subs, p.Subs)
		}
	}
	fmt.Fprintf(&b, "user %q on both brokers, with publish rights on bench/# only\n", p.User)
	for _, bi := range r.Brokers {
		fmt.Fprintf(&b, "broker %-9s %s: %s\n", bi.Name, bi.Addr, bi.Setup)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, wl := range p.workloads() {
		if err := r.writeWorkload(w, wl); err != nil {
			return err
		}
	}
	return nil
}

// writeWorkload prints one workload's table, notes, ratio and verdict.
func (r *report) writeWorkload(w io.Writer, wl workload) error {
	p := r.Params
	var notes []string
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if wl.Shape == shapeWaits {
		subs := "no subscriber"
		if wl.Subs > 0 {
			subs = fmt.Sprintf("%d subscriber on bench/#", wl.Subs)
		}
		fmt.Fprintf(w, "\nwaits shape, QoS %d, %s: %d clients x %d msgs of %d B (medians over %d rounds)\n",
			wl.QoS, subs, p.WaitsClients, p.WaitsCount, p.WaitsSize, p.Rounds)
		fmt.Fprintln(tw, "broker\tpub msgs/s\tclient sum\tack p50\tack p99\treceived\tof\tlost\tdup\tbroker cpu\tµs/msg\tgen cpu\tother cpu\t")
	} else {
		fmt.Fprintf(w, "\nwindowed shape, QoS %d (medians over %d rounds)\n", wl.QoS, p.Rounds)
		fmt.Fprintln(tw, "broker\tpub msgs/s\trecv msgs/s\tlost\tdup\tp50\tp99\tbroker cpu\tµs/msg\tgen cpu\tother cpu\t")
	}
	for _, s := range r.Summaries {
		if s.Workload != wl {
			continue
		}
		cpu := fmt.Sprintf("%s\t%s\t%s\t%s", benchkit.FormatPercent(s.BrokerCPU), benchkit.FormatMicros(s.UsPerMsg), benchkit.FormatPercent(s.GenCPU), benchkit.FormatPercent(s.OtherCPU))
		if wl.Shape == shapeWaits {
			recv, of, lost, dup := "-", "-", "-", "-"
			if wl.Subs > 0 {
				recv, of, lost, dup = fmt.Sprintf("%.0f", s.Received), fmt.Sprintf("%.0f", s.Expected), fmt.Sprintf("%.0f", s.Lost), fmt.Sprintf("%.0f", s.Dup)
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Broker, s.PubRate, s.ClientRateSum,
				benchkit.FormatDuration(s.AckP50), benchkit.FormatDuration(s.AckP99), recv, of, lost, dup, cpu)
		} else {
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\t\n",
				s.Broker, s.PubRate, s.RecvRate, s.Lost, s.Dup, benchkit.FormatDuration(s.P50), benchkit.FormatDuration(s.P99), cpu)
		}
		if s.OtherCPU > noisyOtherCPU {
			notes = append(notes, fmt.Sprintf("note: other processes used %.0f%% CPU (median) while %s was measured: numbers are noisy", s.OtherCPU, s.Broker))
		}
		if s.LossyRounds > 0 {
			notes = append(notes, fmt.Sprintf("note: %s lost messages in %d of %d rounds (worst round: %d)", s.Broker, s.LossyRounds, s.Rounds, s.MaxLost))
		}
		if s.IncompleteRounds > 0 {
			notes = append(notes, fmt.Sprintf("note: %s did not let every client finish within -waits-timeout in %d of %d rounds", s.Broker, s.IncompleteRounds, s.Rounds))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range r.Measurements {
		if m.workload() == wl && (m.Unacked > 0 || m.Foreign > 0 || m.UnexpectedAcks > 0 || m.WrongQoS > 0) {
			notes = append(notes, fmt.Sprintf("note: %s round %d: %d publishes never acknowledged, %d foreign deliveries, %d unexpected PUBACKs, %d deliveries at the wrong QoS",
				m.Broker, m.Round, m.Unacked, m.Foreign, m.UnexpectedAcks, m.WrongQoS))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	for _, rt := range r.Ratios {
		if rt.Workload != wl {
			continue
		}
		cond := fmt.Sprintf(">= %.1f", rt.Target)
		if rt.NoLoss {
			cond += " with no loss"
		}
		verdict := "MET"
		if !rt.Met {
			verdict = "NOT MET"
		}
		fmt.Fprintf(w, "ratio ours/mosquitto %s: %.2f\n", rt.Metric, rt.Ratio)
		fmt.Fprintf(w, "target (%s): %s\n", cond, verdict)
	}
	return nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
