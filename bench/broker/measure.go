package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
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
	Proc *brokerProc // nil for an external broker
}

// measurement is the result of one (broker, qos, round).
type measurement struct {
	Broker string `json:"broker"`
	QoS    int    `json:"qos"`
	Round  int    `json:"round"`

	// Published in the publish window: at PUBACK for QoS 1, at write for QoS 0.
	PublishedInWindow int64   `json:"published_in_window"`
	PubRate           float64 `json:"pub_msgs_per_sec"`
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

type publisher struct {
	c     *client
	idx   int
	qos   byte
	sem   chan struct{} // QoS 1 in-flight window
	sent  atomic.Uint64 // messages handed to the client, set when run returns
	acked atomic.Int64

	// QoS 1: packet id -> busy flag | sequence, so PUBACKs can be mapped to
	// sequence numbers exactly (lost = acked but never delivered).
	pidSeq     []atomic.Uint64
	ackedSet   bitset // owned by the reader goroutine
	unexpected int64  // PUBACKs for unknown packet ids; reader-owned
}

const pidBusy = 1 << 63

func (p *publisher) onPuback(pid uint16) {
	v := p.pidSeq[pid].Swap(0)
	if v&pidBusy == 0 {
		p.unexpected++
		return
	}
	p.ackedSet.set(v &^ pidBusy)
	p.acked.Add(1)
	select {
	case <-p.sem:
	default:
	}
}

// run publishes until stop is closed.
func (p *publisher) run(stop <-chan struct{}, t0 time.Time, rate float64) {
	var pid uint16
	var interval time.Duration
	var pace *time.Timer
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
		pace = time.NewTimer(time.Hour)
		defer pace.Stop()
	}
	for seq := uint64(0); ; seq++ {
		select {
		case <-stop:
			p.sent.Store(seq)
			return
		default:
		}
		if interval > 0 {
			// Behind schedule: send at once (catch up); ahead: wait.
			if d := time.Until(t0.Add(time.Duration(seq) * interval)); d > 0 {
				pace.Reset(d)
				select {
				case <-stop:
					p.sent.Store(seq)
					return
				case <-pace.C:
				}
			}
		}
		if p.qos > 0 {
			select {
			case p.sem <- struct{}{}:
			case <-stop:
				p.sent.Store(seq)
				return
			case <-p.c.dead:
				p.sent.Store(seq)
				return
			}
			for {
				pid++
				if pid == 0 {
					pid = 1
				}
				if p.pidSeq[pid].Load()&pidBusy == 0 {
					break
				}
			}
			p.pidSeq[pid].Store(pidBusy | seq)
		}
		if !p.c.publish(p.qos, pid, seq) {
			p.sent.Store(seq)
			return
		}
	}
}

type subscriber struct {
	c     *client
	runID uint32
	qos   byte
	seen  []bitset // per publisher; reader-owned
	recv  atomic.Int64
	_     [56]byte // keep the hot counters of different subscribers apart
	dup   int64
	other int64
	wrong int64 // deliveries at a QoS other than subscribed and published
	last  int64 // UnixNano of the last unique delivery
	hist  histogram
}

func (s *subscriber) onPublish(_, payload []byte, qos byte, now int64) {
	if len(payload) < minPayload || binary.LittleEndian.Uint32(payload[20:]) != s.runID {
		s.other++
		return
	}
	pub := int(binary.LittleEndian.Uint32(payload[16:]))
	if pub >= len(s.seen) {
		s.other++
		return
	}
	if s.seen[pub].testAndSet(binary.LittleEndian.Uint64(payload[8:])) {
		s.dup++
		return
	}
	if qos != s.qos {
		s.wrong++
	}
	s.hist.record(now - int64(binary.LittleEndian.Uint64(payload[0:])))
	s.last = now
	s.recv.Add(1)
}

// measure runs one measurement: connect, subscribe, publish for l.Duration,
// drain for up to l.Drain, disconnect, and account.
func measure(ctx context.Context, tg target, l load, round int) (m measurement, err error) {
	m = measurement{Broker: tg.Name, QoS: int(l.QoS), Round: round, BrokerCPU: -1, OtherCPU: -1, BrokerUsPerMsg: -1}
	runID := rand.Uint32()
	var clients []*client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	dial := func(id string, queue int) (*client, error) {
		c, err := dialMQTT(clientOptions{
			Addr: tg.Addr, ClientID: id, Username: tg.User, Password: tg.Pass, QueueLen: queue,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: connect %s: %w", tg.Name, id, err)
		}
		clients = append(clients, c)
		return c, nil
	}

	subs := make([]*subscriber, l.Subs)
	for i := range subs {
		c, err := dial(fmt.Sprintf("bench-%08x-s%d", runID, i), 64)
		if err != nil {
			return m, err
		}
		s := &subscriber{c: c, runID: runID, qos: l.QoS, seen: make([]bitset, l.Pubs)}
		c.onPublish = s.onPublish
		c.start()
		subs[i] = s
	}
	for _, s := range subs {
		granted, err := s.c.subscribe("bench/#", l.QoS, 5*time.Second)
		if err != nil {
			return m, fmt.Errorf("%s: %w", tg.Name, err)
		}
		if granted != l.QoS {
			return m, fmt.Errorf("%s: subscribed at QoS %d, granted %d", tg.Name, l.QoS, granted)
		}
	}

	pubs := make([]*publisher, l.Pubs)
	for i := range pubs {
		c, err := dial(fmt.Sprintf("bench-%08x-p%d", runID, i), 256)
		if err != nil {
			return m, err
		}
		p := &publisher{c: c, idx: i, qos: l.QoS}
		payload := make([]byte, l.Size)
		for j := minPayload; j < len(payload); j++ {
			payload[j] = byte('a' + j%26)
		}
		binary.LittleEndian.PutUint32(payload[16:], uint32(i))
		binary.LittleEndian.PutUint32(payload[20:], runID)
		c.setPublishTemplate(fmt.Sprintf("bench/%d", i), payload)
		if l.QoS > 0 {
			p.sem = make(chan struct{}, l.Inflight)
			p.pidSeq = make([]atomic.Uint64, 1<<16)
			c.onPuback = p.onPuback
		}
		c.start()
		pubs[i] = p
	}

	// Publish phase.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	brokerCPU0, brokerCPUok := procCPU(tg.Proc.pid())
	genCPU0 := selfCPU()
	sysBusy0, sysOK := systemBusy()
	t0 := time.Now()
	for _, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(stop, t0, l.Rate)
		}()
	}
	window := time.NewTimer(l.Duration)
	select {
	case <-window.C:
	case <-ctx.Done():
		close(stop)
		wg.Wait()
		return m, ctx.Err()
	}
	close(stop)
	tEnd := time.Now()
	for _, p := range pubs {
		if l.QoS > 0 {
			m.PublishedInWindow += p.acked.Load()
		} else {
			m.PublishedInWindow += p.c.written.Load()
		}
	}
	for _, s := range subs {
		m.ReceivedInWindow += s.recv.Load()
	}
	window.Stop()
	elapsed := tEnd.Sub(t0)
	brokerCPU1, ok := procCPU(tg.Proc.pid())
	genCPU1 := selfCPU()
	sysBusy1, ok2 := systemBusy()
	if ok && brokerCPUok {
		m.BrokerCPU = 100 * float64(brokerCPU1-brokerCPU0) / float64(elapsed)
		if m.ReceivedInWindow > 0 {
			m.BrokerUsPerMsg = float64(brokerCPU1-brokerCPU0) / float64(time.Microsecond) / float64(m.ReceivedInWindow)
		}
	}
	m.GenCPU = 100 * float64(genCPU1-genCPU0) / float64(elapsed)
	m.OtherCPU = -1
	if sysOK && ok2 && m.BrokerCPU >= 0 {
		m.OtherCPU = max(0, 100*float64(sysBusy1-sysBusy0)/float64(elapsed)-m.BrokerCPU-m.GenCPU)
	}
	m.PubRate = float64(m.PublishedInWindow) / elapsed.Seconds()

	// Drain phase: wait for outstanding acks / queued writes and for the
	// subscribers to receive everything, for at most l.Drain.
	drainDeadline := tEnd.Add(l.Drain)
	pubsDone := make(chan struct{})
	go func() { wg.Wait(); close(pubsDone) }()
	select {
	case <-pubsDone:
	case <-time.After(time.Until(drainDeadline)):
		// A publisher is stuck in a full queue; closing the clients below
		// unblocks it.
	case <-ctx.Done():
		return m, ctx.Err()
	}
	if l.QoS == 0 {
		for _, p := range pubs {
			p.c.flushSync(time.Until(drainDeadline))
		}
	}
	for {
		final := true
		var published int64
		for _, p := range pubs {
			if l.QoS > 0 {
				published += p.acked.Load()
				if p.acked.Load() < int64(p.sent.Load()) {
					final = false
				}
			} else {
				published += p.c.written.Load()
			}
		}
		var received int64
		for _, s := range subs {
			received += s.recv.Load()
		}
		if final && received >= published*int64(l.Subs) {
			break
		}
		if !time.Now().Before(drainDeadline) {
			break
		}
		if err := tg.Proc.alive(); err != nil {
			return m, err
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(2 * time.Millisecond): // poll interval
		}
	}
	m.Drain = time.Since(tEnd)

	// Disconnect everything; after Close the reader-owned state is ours.
	for _, c := range clients {
		c.Close()
	}
	clients = nil
	wg.Wait() // publishers blocked on a dead connection have returned now
	if err := tg.Proc.alive(); err != nil {
		return m, err
	}

	var hist histogram
	var last int64
	for _, s := range subs {
		m.Received += s.recv.Load()
		m.Dup += s.dup
		m.Foreign += s.other
		m.WrongQoS += s.wrong
		hist.merge(&s.hist)
		if s.last > last {
			last = s.last
		}
	}
	for _, p := range pubs {
		if l.QoS > 0 {
			m.PublishedTotal += p.acked.Load()
			m.Unacked += int64(p.sent.Load()) - p.acked.Load()
			m.UnexpectedAcks += p.unexpected
		} else {
			m.PublishedTotal += p.c.written.Load()
		}
		for _, s := range subs {
			if l.QoS > 0 {
				m.Lost += s.seen[p.idx].countMissing(&p.ackedSet)
			} else {
				m.Lost += s.seen[p.idx].countMissingPrefix(uint64(p.c.written.Load()))
			}
		}
	}
	m.Expected = m.PublishedTotal * int64(l.Subs)
	if last > 0 {
		m.RecvSpan = time.Duration(last - t0.UnixNano())
		m.RecvRate = float64(m.Received) / m.RecvSpan.Seconds()
	}
	m.P50 = hist.quantile(0.50)
	m.P99 = hist.quantile(0.99)
	m.Max = time.Duration(hist.max)
	return m, nil
}
