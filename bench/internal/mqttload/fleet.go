package mqttload

import (
	"context"
	"sync"
	"time"
)

// Fleet runs publishers together for one publish window.
type Fleet struct {
	pubs     []*Publisher
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	returned chan struct{}
}

// StartFleet starts every publisher's Run, paced from t0 at rate msgs/s
// each (0: as fast as allowed).
func StartFleet(pubs []*Publisher, t0 time.Time, rate float64) *Fleet {
	f := &Fleet{pubs: pubs, stop: make(chan struct{}), returned: make(chan struct{})}
	for _, p := range pubs {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			p.Run(f.stop, t0, rate)
		}()
	}
	go func() { f.wg.Wait(); close(f.returned) }()
	return f
}

// StopAt lets the publishers run until end, then stops them and returns the
// time the window ended. If ctx is cancelled first, it stops them, waits
// until they have returned and returns ctx's error.
func (f *Fleet) StopAt(ctx context.Context, end time.Time) (time.Time, error) {
	window := time.NewTimer(time.Until(end))
	defer window.Stop()
	select {
	case <-window.C:
	case <-ctx.Done():
		f.Stop()
		f.Wait()
		return time.Time{}, ctx.Err()
	}
	f.Stop()
	return time.Now(), nil
}

// Stop ends the publish window; the publishers return soon after, unless
// one is blocked on a connection that does not take its writes.
func (f *Fleet) Stop() { f.stopOnce.Do(func() { close(f.stop) }) }

// Acked sums the publishers' PUBACKs so far.
func (f *Fleet) Acked() int64 {
	var n int64
	for _, p := range f.pubs {
		n += p.Acked()
	}
	return n
}

// WaitReturned waits, after Stop, until every publisher has returned (true)
// or deadline passes (false: one is blocked; closing the clients unblocks
// it), or ctx is cancelled.
func (f *Fleet) WaitReturned(ctx context.Context, deadline time.Time) (bool, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-f.returned:
		return true, nil
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// AllAcked reports whether every message sent has been acknowledged; it is
// meaningful once the publishers have returned.
func (f *Fleet) AllAcked() bool {
	for _, p := range f.pubs {
		if p.Acked() < int64(p.Sent()) {
			return false
		}
	}
	return true
}

// Wait waits for every publisher to return: after Stop, and after closing
// the clients if WaitReturned gave up.
func (f *Fleet) Wait() { <-f.returned }
