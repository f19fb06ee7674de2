package mqttload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// Counted runs publishers that each publish a fixed count from one common
// start, and times each to its end: its last PUBACK at QoS 1, or at QoS 0
// the PINGRESP to a PINGREQ sent after its last PUBLISH (a broker handles a
// connection's packets in order, so that is when it had processed them
// all; a QoS 0 publish has no ack). With publishers made with a window of
// 1, each QoS 1 message waits for the PUBACK of the one before: the shape
// of the widely used mqtt-benchmark.
type Counted struct {
	pubs   []*Publisher
	count  int
	fences []fence

	stop     chan struct{}
	stopOnce sync.Once
	running  sync.WaitGroup
}

// fence is a QoS 0 publisher's end marker.
type fence struct {
	sent atomic.Bool  // set just before the fence PINGREQ is queued
	at   atomic.Int64 // UnixNano of the fence's PINGRESP; 0 until then
}

func (f *fence) onPingresp() {
	if f.sent.Load() {
		f.at.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// NewCounted prepares pubs to publish count messages each. Call it before
// the publishers' clients are started: it takes their OnPingresp. The
// clients' keepalive must be longer than the measurement, so that no
// keepalive PINGRESP passes for a fence.
func NewCounted(pubs []*Publisher, count int) *Counted {
	c := &Counted{pubs: pubs, count: count, fences: make([]fence, len(pubs)), stop: make(chan struct{})}
	for i, p := range pubs {
		p.SetLimit(uint64(count))
		p.Client().OnPingresp = c.fences[i].onPingresp
	}
	return c
}

// CountedResult is what Run measured.
type CountedResult struct {
	Start time.Time // the common start
	// End is the last publisher's end, or the timeout when one did not finish.
	End time.Time
	// ClientRateSum is the sum over the publishers that finished of count ÷
	// their own time: what mqtt-benchmark prints as "Total Bandwidth".
	ClientRateSum float64
	// Incomplete is the number of publishers not done by the timeout.
	Incomplete int
}

// Run starts every publisher at once and returns when all are done, at the
// timeout, when proc (nil for none) exits, or when ctx is cancelled (an
// error). Publishers still running are then stopped; Wait waits for them.
func (c *Counted) Run(ctx context.Context, timeout time.Duration, proc *benchkit.Proc) (CountedResult, error) {
	r := CountedResult{Start: time.Now()}
	for i, p := range c.pubs {
		c.running.Add(1)
		go func() {
			defer c.running.Done()
			p.Run(c.stop, r.Start, 0)
			if p.qos == 0 && p.Sent() == uint64(c.count) {
				c.fences[i].sent.Store(true)
				p.Client().Ping()
			}
		}()
	}
	defer c.Stop()
	err := benchkit.PollUntil(ctx, r.Start.Add(timeout), time.Millisecond, proc, func() (bool, error) {
		for i := range c.pubs {
			if c.doneAt(i).IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return r, err
	}
	r.End = r.Start
	for i := range c.pubs {
		d := c.doneAt(i)
		if d.IsZero() {
			r.Incomplete++
			continue
		}
		if d.After(r.End) {
			r.End = d
		}
		r.ClientRateSum += float64(c.count) / d.Sub(r.Start).Seconds()
	}
	if r.Incomplete > 0 {
		r.End = time.Now()
	}
	return r, nil
}

// doneAt is when publisher i finished, or zero while it has not.
func (c *Counted) doneAt(i int) time.Time {
	p := c.pubs[i]
	if p.qos == 0 {
		if ns := c.fences[i].at.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
		return time.Time{}
	}
	if p.Acked() < int64(c.count) {
		return time.Time{}
	}
	return p.LastAck()
}

// Stop stops the publishers that are still publishing; one blocked on a
// connection that takes no writes returns once its client is closed.
func (c *Counted) Stop() { c.stopOnce.Do(func() { close(c.stop) }) }

// Wait waits for every publisher to return: after Run, and after closing
// the clients if one was blocked.
func (c *Counted) Wait() { c.running.Wait() }
