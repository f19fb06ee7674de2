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

// Targets for ours/mosquitto received msgs/s, by QoS.
var ratioTarget = map[int]float64{1: 1.0, 0: 0.9}

type brokerInfo struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	External bool   `json:"external"`
	Version  string `json:"version,omitempty"`
	Setup    string `json:"setup"`
}

// summary is the median over rounds of one (broker, qos).
type summary struct {
	Broker    string        `json:"broker"`
	QoS       int           `json:"qos"`
	Rounds    int           `json:"rounds"`
	PubRate   float64       `json:"pub_msgs_per_sec"`
	RecvRate  float64       `json:"recv_msgs_per_sec"`
	Lost      float64       `json:"lost"`
	Dup       float64       `json:"dup"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	BrokerCPU float64       `json:"broker_cpu_pct"`
	GenCPU    float64       `json:"generator_cpu_pct"`
	OtherCPU  float64       `json:"other_cpu_pct"`
	UsPerMsg  float64       `json:"broker_cpu_us_per_delivery"`
	// Not medians: how many rounds lost anything, and the worst round.
	LossyRounds int   `json:"lossy_rounds"`
	MaxLost     int64 `json:"max_lost"`
}

type ratio struct {
	QoS    int     `json:"qos"`
	Ratio  float64 `json:"ours_over_mosquitto_recv"`
	Target float64 `json:"target"`
	Met    bool    `json:"met"` // ratio >= target and ours lost nothing (QoS 1)
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

func (r *report) summarize() {
	r.Summaries, r.Ratios = nil, nil
	for _, q := range r.Params.QoS {
		recv := map[string]float64{}
		lost := map[string]int64{}
		for _, b := range r.Params.Brokers {
			s := summary{Broker: b, QoS: q}
			var pub, rec, lst, dup, p50, p99, bcpu, gcpu, ocpu, upm []float64
			for _, m := range r.Measurements {
				if m.Broker != b || m.QoS != q {
					continue
				}
				s.Rounds++
				pub = append(pub, m.PubRate)
				rec = append(rec, m.RecvRate)
				lst = append(lst, float64(m.Lost))
				dup = append(dup, float64(m.Dup))
				p50 = append(p50, float64(m.P50))
				p99 = append(p99, float64(m.P99))
				bcpu = append(bcpu, m.BrokerCPU)
				gcpu = append(gcpu, m.GenCPU)
				ocpu = append(ocpu, m.OtherCPU)
				upm = append(upm, m.BrokerUsPerMsg)
				if m.Lost > 0 {
					s.LossyRounds++
				}
				if m.Lost > s.MaxLost {
					s.MaxLost = m.Lost
				}
			}
			if s.Rounds == 0 {
				continue
			}
			s.PubRate, s.RecvRate = benchkit.Median(pub), benchkit.Median(rec)
			s.Lost, s.Dup = benchkit.Median(lst), benchkit.Median(dup)
			s.P50, s.P99 = time.Duration(benchkit.Median(p50)), time.Duration(benchkit.Median(p99))
			s.BrokerCPU, s.GenCPU, s.OtherCPU = benchkit.Median(bcpu), benchkit.Median(gcpu), benchkit.Median(ocpu)
			s.UsPerMsg = benchkit.Median(upm)
			r.Summaries = append(r.Summaries, s)
			recv[b] = s.RecvRate
			lost[b] = s.MaxLost
		}
		if mo, ok := recv[nameMosquitto]; ok && mo > 0 {
			if ou, ok := recv[nameOurs]; ok {
				rt := ratio{QoS: q, Ratio: ou / mo, Target: ratioTarget[q]}
				rt.Met = rt.Ratio >= rt.Target && (q == 0 || lost[nameOurs] == 0)
				r.Ratios = append(r.Ratios, rt)
			}
		}
	}
}

// WriteText prints the report as tables.
func (r *report) WriteText(w io.Writer) error {
	p := r.Params
	rate := "unlimited"
	if p.Rate > 0 {
		rate = fmt.Sprintf("%g msgs/s per publisher", p.Rate)
	}
	qos := make([]string, len(p.QoS))
	for i, q := range p.QoS {
		qos[i] = fmt.Sprint(q)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "firehose broker benchmark  (%s, %d CPUs, %s)\n", r.GoVersion, r.CPUs, r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "params: -brokers %s -qos %s -pubs %d -subs %d -size %d -duration %s -drain %s -rounds %d -inflight %d -rate %g (%s)\n",
		strings.Join(p.Brokers, ","), strings.Join(qos, ","), p.Pubs, p.Subs, p.Size, p.Duration, p.Drain, p.Rounds, p.Inflight, p.Rate, rate)
	fmt.Fprintf(&b, "load: %d publishers -> bench/<i>, %d subscribers on bench/# (each message expected %d times), user %q\n", p.Pubs, p.Subs, p.Subs, p.User)
	for _, bi := range r.Brokers {
		fmt.Fprintf(&b, "broker %-9s %s: %s\n", bi.Name, bi.Addr, bi.Setup)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}

	for _, q := range p.QoS {
		fmt.Fprintf(w, "\nQoS %d (medians over %d rounds)\n", q, p.Rounds)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "broker\tpub msgs/s\trecv msgs/s\tlost\tdup\tp50\tp99\tbroker cpu\tµs/msg\tgen cpu\tother cpu\t")
		var notes []string
		for _, s := range r.Summaries {
			if s.QoS != q {
				continue
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				s.Broker, s.PubRate, s.RecvRate, s.Lost, s.Dup, benchkit.FormatDuration(s.P50), benchkit.FormatDuration(s.P99), benchkit.FormatPercent(s.BrokerCPU), benchkit.FormatMicros(s.UsPerMsg), benchkit.FormatPercent(s.GenCPU), benchkit.FormatPercent(s.OtherCPU))
			if s.OtherCPU > noisyOtherCPU {
				notes = append(notes, fmt.Sprintf("note: other processes used %.0f%% CPU (median) while %s was measured: numbers are noisy", s.OtherCPU, s.Broker))
			}
			if s.LossyRounds > 0 {
				notes = append(notes, fmt.Sprintf("note: %s lost messages in %d of %d rounds (worst round: %d)", s.Broker, s.LossyRounds, s.Rounds, s.MaxLost))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, m := range r.Measurements {
			if m.QoS == q && (m.Unacked > 0 || m.Foreign > 0 || m.UnexpectedAcks > 0 || m.WrongQoS > 0) {
				notes = append(notes, fmt.Sprintf("note: %s round %d: %d publishes never acknowledged, %d foreign deliveries, %d unexpected PUBACKs, %d deliveries at the wrong QoS",
					m.Broker, m.Round, m.Unacked, m.Foreign, m.UnexpectedAcks, m.WrongQoS))
			}
		}
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
		for _, rt := range r.Ratios {
			if rt.QoS != q {
				continue
			}
			fmt.Fprintf(w, "ratio ours/mosquitto recv msgs/s: %.2f (target >= 1.0 at QoS 1, >= 0.9 at QoS 0)\n", rt.Ratio)
			verdict := "MET"
			if !rt.Met {
				verdict = "NOT MET"
			}
			cond := fmt.Sprintf(">= %.1f", rt.Target)
			if q == 1 {
				cond += " with no loss"
			}
			fmt.Fprintf(w, "QoS %d target (%s): %s\n", q, cond, verdict)
		}
	}
	return nil
}
