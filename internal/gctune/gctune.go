// Package gctune keeps the garbage collector's headroom bounded as the live
// heap grows. A message bus allocates a copy of every message per
// subscriber, so a small heap is best collected rarely (GOGC 400: the heap
// may grow by four times what is live); but the fleet's state held in memory
// (the dashboard's view of 100,000 nodes) makes the live heap large, and four
// times that is memory no one uses. The tuner lowers the percentage as the
// live heap grows so that the headroom stays near a fixed size, down to a
// floor, and runs only when the collector has run: nothing while nothing
// happens.
//
// It must not run where the operator set GOGC: the environment wins.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Config bounds the collector's percentage.
type Config struct {
	// MaxPercent is the percentage while the live heap is small (GOGC).
	MaxPercent int
	// MinPercent is the least it goes down to, however large the heap.
	MinPercent int
	// Headroom is how much the heap may grow past the live heap, as long as
	// that stays between the two percentages.
	Headroom uint64
}

// Percent is the collector's percentage for a live heap of live bytes.
func (c Config) Percent(live uint64) int {
	if live == 0 {
		return c.MaxPercent
	}
	p := int(c.Headroom * 100 / live)
	return max(c.MinPercent, min(c.MaxPercent, p))
}

// Start applies cfg now and after every collection, for the life of the
// process. It returns a function that stops the tuning.
func Start(cfg Config) (stop func()) {
	t := &tuner{cfg: cfg, current: -1, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.apply()
	t.arm()
	return func() {
		t.mu.Lock()
		t.stopped = true
		t.mu.Unlock()
	}
}

type tuner struct {
	cfg     Config
	mu      sync.Mutex
	stopped bool
	current int
	sample  []metrics.Sample
}

// arm sets a finalizer on a fresh object: the collector runs it once it has
// found the object unreachable, that is, after the next collection.
func (t *tuner) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		t.mu.Lock()
		stopped := t.stopped
		t.mu.Unlock()
		if stopped {
			return
		}
		t.apply()
		t.arm()
	})
}

func (t *tuner) apply() {
	t.mu.Lock()
	defer t.mu.Unlock()
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	if p := t.cfg.Percent(live); p != t.current {
		t.current = p
		debug.SetGCPercent(p)
	}
}
