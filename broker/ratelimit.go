package broker

import (
	"sync"
	"time"
)

// rateLimitedLog runs a log call at most once per interval, and tells the next
// call how many were suppressed, so a misbehaving client cannot flood the logs.
type rateLimitedLog struct {
	interval time.Duration // zero means 10s

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (r *rateLimitedLog) do(log func(suppressed int)) {
	interval := r.interval
	if interval == 0 {
		interval = 10 * time.Second
	}
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < interval {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	log(n)
}
