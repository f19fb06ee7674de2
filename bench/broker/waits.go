package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// The two shapes of load.
const (
	// shapeWindowed: publishers for a fixed time, each with a window of
	// unacknowledged QoS 1 messages, and several subscribers (measure).
	shapeWindowed = "windowed"
	// shapeWaits: the widely used mqtt-benchmark's shape. Each client
	// publishes a fixed count, at QoS 1 waiting for each PUBACK before
	// its next publish; optionally one subscriber (measureWaits).
	shapeWaits = "waits"
)

// waitsLoad is one measurement of the mqtt-benchmark shape.
type waitsLoad struct {
	Clients int
	Count   int // messages per client
	Size    int
	QoS     byte
	Subs    int // subscribers on bench/#, at QoS: 0 or 1
	// Timeout bounds the publishing; a broker that stalls a client is
	// reported as incomplete instead of hanging the benchmark.
	Timeout time.Duration
	Drain   time.Duration // max wait for the subscriber afterwards
}

// measureWaits runs one measurement of the mqtt-benchmark shape: connect
// the subscriber (if any) and the clients, let every client publish its
// count (QoS 1: one message in flight, the next only after its PUBACK;
// QoS 0: as fast as the socket takes them, then a PINGREQ fence; see
// mqttload.Counted), wait for the subscriber to receive everything (at most
// l.Drain), disconnect and account. Publishing is timed from the common
// start to each client's end, connection set-up excluded.
func measureWaits(ctx context.Context, tg target, l waitsLoad, round int) (m measurement, err error) {
	m = measurement{Broker: tg.Name, Shape: shapeWaits, QoS: int(l.QoS), Subs: l.Subs, Round: round,
		BrokerCPU: -1, OtherCPU: -1, BrokerUsPerMsg: -1}
	// No keepalive PINGREQ may pass for a QoS 0 fence: the keepalive is
	// far longer than any measurement.
	cs := &conns{tg: tg, runID: rand.Uint32(), keepAlive: 30 * time.Minute}
	defer cs.closeAll()
	subs, err := cs.subscribe(l.Subs, l.Clients, l.QoS)
	if err != nil {
		return m, err
	}
	pubs := make([]*mqttload.Publisher, l.Clients)
	for i := range pubs {
		c, err := cs.dial(fmt.Sprintf("bench-%08x-w%d", cs.runID, i), 256)
		if err != nil {
			return m, err
		}
		c.SetPublishTemplate(fmt.Sprintf("bench/%d", i), mqttload.NewPayload(l.Size, i, cs.runID))
		pubs[i] = mqttload.NewPublisher(c, l.QoS, 1, l.QoS > 0)
	}
	counted := mqttload.NewCounted(pubs, l.Count)
	for _, p := range pubs {
		p.Client().Start()
	}
	defer func() {
		cs.closeAll() // unblocks a publisher stuck on a full queue
		counted.Wait()
	}()

	// Publish phase: every client publishes its count.
	cpu := benchkit.StartCPUWindow(tg.Proc.PID())
	res, err := counted.Run(ctx, l.Timeout, tg.Proc)
	if err != nil {
		return m, err
	}
	elapsed := res.End.Sub(res.Start)
	use := cpu.End(elapsed)
	m.BrokerCPU, m.GenCPU, m.OtherCPU = use.Proc, use.Self, use.Other
	m.Incomplete, m.ClientRateSum = res.Incomplete, res.ClientRateSum
	m.PublishedInWindow = published(pubs, l.QoS)
	m.PubRate = float64(m.PublishedInWindow) / elapsed.Seconds()
	if use.Proc >= 0 && m.PublishedInWindow > 0 {
		m.BrokerUsPerMsg = float64(use.ProcTime) / float64(time.Microsecond) / float64(m.PublishedInWindow)
	}

	// Drain: the subscriber receives what is still queued for it.
	if err := waitDelivered(ctx, tg, time.Now().Add(l.Drain), subs, pubs, l.QoS); err != nil {
		return m, err
	}
	m.Drain = time.Since(res.End)

	// Disconnect everything; after Close the reader-owned state is ours.
	cs.closeAll()
	counted.Wait()
	if err := tg.Proc.Alive(); err != nil {
		return m, err
	}
	m.account(subs, pubs, l.QoS, res.Start)
	var ackHist benchkit.Histogram
	for _, p := range pubs {
		if lat := p.Latency(); lat != nil {
			ackHist.Merge(lat)
		}
	}
	m.AckP50, m.AckP99 = ackHist.Quantile(0.50), ackHist.Quantile(0.99)
	return m, nil
}
