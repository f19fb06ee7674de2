package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// load describes the traffic of one measurement.
type load struct {
	Pubs     int
	Subs     int
	QoS      byte
	Size     int
	Duration time.Duration
	Drain    time.Duration
	Inflight int
	Rate     float64 // per publisher, msgs/s; 0 = unlimited
}

// target is a broker to measure.
type target struct {
	Name string
	Addr string
	User string
	Pass string
	Proc *benchkit.Proc // nil for an external broker
}

// measurement is the result of one (broker, workload, round).
type measurement struct {
	Broker string `json:"broker"`
	Shape  string `json:"shape"` // shapeWindowed or shapeWaits
	QoS    int    `json:"qos"`
	Subs   int    `json:"subscribers"`
	Round  int    `json:"round"`

	// Published in the publish window: at PUBACK for QoS 1, at write for
	// QoS 0 (waits shape: until the client's fence). The waits shape's
	// window runs from the common start to the last client's last PUBACK.
	PublishedInWindow int64   `json:"published_in_window"`
	PubRate           float64 `json:"pub_msgs_per_sec"`
	// Waits shape: the sum over clients of each one's count ÷ its own
	// time, which is what mqtt-benchmark prints as "Total Bandwidth".
	ClientRateSum float64 `json:"client_rate_sum,omitempty"`
	// Waits shape: clients that had not finished when -waits-timeout passed.
	Incomplete int `json:"incomplete_clients,omitempty"`
	// Waits shape at QoS 1: publish-to-PUBACK latency.
	AckP50 time.Duration `json:"ack_p50_ns,omitempty"`
	AckP99 time.Duration `json:"ack_p99_ns,omitempty"`
	// All messages that count as published by the end of the drain (acked
	// for QoS 1, written for QoS 0); Expected = PublishedTotal × subscribers.
	PublishedTotal int64 `json:"published_total"`
	Unacked        int64 `json:"unacked"` // QoS 1: sent but never acknowledged
	Expected       int64 `json:"expected"`

	Received int64   `json:"received"` // unique deliveries, all subscribers
	RecvRate float64 `json:"recv_msgs_per_sec"`
	Lost     int64   `json:"lost"`
	Dup      int64   `json:"dup"`
	Foreign  int64   `json:"foreign"` // deliveries not belonging to this measurement

	UnexpectedAcks int64 `json:"unexpected_acks"` // PUBACKs for packet ids not in flight
	WrongQoS       int64 `json:"wrong_qos"`       // deliveries at another QoS than requested

	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`

	// Time from first publish to last receive, and drain time used.
	RecvSpan time.Duration `json:"recv_span_ns"`
	Drain    time.Duration `json:"drain_ns"`

	// CPU used during the publish window, in % of one core (-1 = unknown,
	// e.g. for a broker we did not start).
	BrokerCPU float64 `json:"broker_cpu_pct"`
	GenCPU    float64 `json:"generator_cpu_pct"`
	// CPU used by everything else on the machine during the publish window
	// (system busy time minus broker and generator), in % of one core: a
	// noise indicator on a shared machine. -1 when unknown.
	OtherCPU float64 `json:"other_cpu_pct"`
	// Broker CPU time per delivery during the publish window, in µs: a
	// measure of efficiency that noise from other processes affects less
	// than throughput does. -1 when unknown.
	BrokerUsPerMsg float64 `json:"broker_cpu_us_per_delivery"`
	// Unique deliveries during the publish window.
	ReceivedInWindow int64 `json:"received_in_window"`
}

type subscriber struct {
	c     *mqttload.Client
	runID uint32
	qos   byte
	seen  []benchkit.Bitset // per publisher; reader-owned
	recv  atomic.Int64
	_     [56]byte // keep the hot counters of different subscribers apart
	dup   int64
	other int64
	wrong int64 // deliveries at a QoS other than subscribed and published
	last  int64 // UnixNano of the last unique delivery
	hist  benchkit.Histogram
}

func (s *subscriber) onPublish(_, payload []byte, qos byte, now int64) {
	h, ok := mqttload.ParsePayload(payload)
	if !ok || h.RunID != s.runID || int(h.Pub) >= len(s.seen) {
		s.other++
		return
	}
	if s.seen[h.Pub].TestAndSet(h.Seq) {
		s.dup++
		return
	}
	if qos != s.qos {
		s.wrong++
	}
	s.hist.Record(now - h.SentAt)
	s.last = now
	s.recv.Add(1)
}

// conns are one measurement's connections to the broker under test.
type conns struct {
	tg        target
	runID     uint32
	keepAlive time.Duration // 0: the client's default
	clients   []*mqttload.Client
}

func (cs *conns) dial(id string, queue int) (*mqttload.Client, error) {
	c, err := mqttload.Dial(mqttload.Options{
		Addr: cs.tg.Addr, ClientID: id, Username: cs.tg.User, Password: cs.tg.Pass, QueueLen: queue, KeepAlive: cs.keepAlive,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: connect %s: %w", cs.tg.Name, id, err)
	}
	cs.clients = append(cs.clients, c)
	return c, nil
}

// closeAll disconnects every client; afterwards the state their reader
// goroutines own (subscriber tallies, PUBACK sets) is the caller's.
func (cs *conns) closeAll() {
	for _, c := range cs.clients {
		c.Close()
	}
	cs.clients = nil
}

// subscribe connects n subscribers to bench/# at qos, each counting what it
// gets from pubs publishers, and returns once every SUBACK granted qos.
func (cs *conns) subscribe(n, pubs int, qos byte) ([]*subscriber, error) {
	subs := make([]*subscriber, n)
	for i := range subs {
		c, err := cs.dial(fmt.Sprintf("bench-%08x-s%d", cs.runID, i), 64)
		if err != nil {
			return nil, err
		}
		s := &subscriber{c: c, runID: cs.runID, qos: qos, seen: make([]benchkit.Bitset, pubs)}
		c.OnPublish = s.onPublish
		c.Start()
		subs[i] = s
	}
	for _, s := range subs {
		granted, err := s.c.Subscribe("bench/#", qos, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cs.tg.Name, err)
		}
		if granted != qos {
			return nil, fmt.Errorf("%s: subscribed at QoS %d, granted %d", cs.tg.Name, qos, granted)
		}
	}
	return subs, nil
}

// published is what counts as published so far: PUBACKed at QoS 1,
// written at QoS 0.
func published(pubs []*mqttload.Publisher, qos byte) int64 {
	var n int64
	for _, p := range pubs {
		if qos > 0 {
			n += p.Acked()
		} else {
			n += p.Client().Written()
		}
	}
	return n
}

// waitDelivered polls until the subscribers have received everything
// published, or deadline.
func waitDelivered(ctx context.Context, tg target, deadline time.Time, subs []*subscriber, pubs []*mqttload.Publisher, qos byte) error {
	return benchkit.PollUntil(ctx, deadline, 2*time.Millisecond, tg.Proc, func() (bool, error) {
		var received int64
		for _, s := range subs {
			received += s.recv.Load()
		}
		return received >= published(pubs, qos)*int64(len(subs)), nil
	})
}

// account fills in what the publishers published and the subscribers got,
// lost and got twice, and the delivery latency, once every client is
// closed; t0 is the start of publishing.
func (m *measurement) account(subs []*subscriber, pubs []*mqttload.Publisher, qos byte, t0 time.Time) {
	var hist benchkit.Histogram
	var last int64
	for _, s := range subs {
		m.Received += s.recv.Load()
		m.Dup += s.dup
		m.Foreign += s.other
		m.WrongQoS += s.wrong
		hist.Merge(&s.hist)
		last = max(last, s.last)
	}
	for i, p := range pubs {
		if qos > 0 {
			m.PublishedTotal += p.Acked()
			m.Unacked += int64(p.Sent()) - p.Acked()
			m.UnexpectedAcks += p.UnexpectedAcks()
		} else {
			m.PublishedTotal += p.Client().Written()
		}
		for _, s := range subs {
			if qos > 0 {
				m.Lost += s.seen[i].CountMissing(p.AckedSet())
			} else {
				m.Lost += s.seen[i].CountMissingPrefix(uint64(p.Client().Written()))
			}
		}
	}
	m.Expected = m.PublishedTotal * int64(len(subs))
	if last > 0 {
		m.RecvSpan = time.Duration(last - t0.UnixNano())
		m.RecvRate = float64(m.Received) / m.RecvSpan.Seconds()
	}
	m.P50, m.P99, m.Max = hist.Quantile(0.50), hist.Quantile(0.99), hist.Max()
}

// measure runs one measurement: connect, subscribe, publish for l.Duration,
// drain for up to l.Drain, disconnect, and account.
func measure(ctx context.Context, tg target, l load, round int) (m measurement, err error) {
	m = measurement{Broker: tg.Name, Shape: shapeWindowed, QoS: int(l.QoS), Subs: l.Subs, Round: round,
		BrokerCPU: -1, OtherCPU: -1, BrokerUsPerMsg: -1}
	cs := &conns{tg: tg, runID: rand.Uint32()}
	defer cs.closeAll()
	subs, err := cs.subscribe(l.Subs, l.Pubs, l.QoS)
	if err != nil {
		return m, err
	}
	pubs := make([]*mqttload.Publisher, l.Pubs)
	for i := range pubs {
		c, err := cs.dial(fmt.Sprintf("bench-%08x-p%d", cs.runID, i), 256)
		if err != nil {
			return m, err
		}
		c.SetPublishTemplate(fmt.Sprintf("bench/%d", i), mqttload.NewPayload(l.Size, i, cs.runID))
		pubs[i] = mqttload.NewPublisher(c, l.QoS, l.Inflight, false)
		c.Start()
	}

	// Publish phase.
	cpu := benchkit.StartCPUWindow(tg.Proc.PID())
	t0 := time.Now()
	fleet := mqttload.StartFleet(pubs, t0, l.Rate)
	tEnd, err := fleet.StopAt(ctx, t0.Add(l.Duration))
	if err != nil {
		return m, err
	}
	m.PublishedInWindow = published(pubs, l.QoS)
	for _, s := range subs {
		m.ReceivedInWindow += s.recv.Load()
	}
	elapsed := tEnd.Sub(t0)
	use := cpu.End(elapsed)
	m.BrokerCPU, m.GenCPU, m.OtherCPU = use.Proc, use.Self, use.Other
	if use.Proc >= 0 && m.ReceivedInWindow > 0 {
		m.BrokerUsPerMsg = float64(use.ProcTime) / float64(time.Microsecond) / float64(m.ReceivedInWindow)
	}
	m.PubRate = float64(m.PublishedInWindow) / elapsed.Seconds()

	// Drain phase: wait for outstanding acks / queued writes and for the
	// subscribers to receive everything, for at most l.Drain. A publisher
	// stuck in a full queue is unblocked by closing the clients below.
	drainDeadline := tEnd.Add(l.Drain)
	if _, err := fleet.WaitReturned(ctx, drainDeadline); err != nil {
		return m, err
	}
	if l.QoS == 0 {
		for _, p := range pubs {
			p.Client().FlushSync(time.Until(drainDeadline))
		}
	}
	err = benchkit.PollUntil(ctx, drainDeadline, 2*time.Millisecond, tg.Proc, func() (bool, error) {
		for _, p := range pubs {
			if l.QoS > 0 && p.Acked() < int64(p.Sent()) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return m, err
	}
	if err := waitDelivered(ctx, tg, drainDeadline, subs, pubs, l.QoS); err != nil {
		return m, err
	}
	m.Drain = time.Since(tEnd)

	// Disconnect everything; after Close the reader-owned state is ours.
	cs.closeAll()
	fleet.Wait() // publishers blocked on a dead connection have returned now
	if err := tg.Proc.Alive(); err != nil {
		return m, err
	}
	m.account(subs, pubs, l.QoS, t0)
	return m, nil
}
