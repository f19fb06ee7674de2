// Package backoff is the wait between retries of something that fails until
// a peer comes back: it starts short, doubles after each failure up to a
// bound, starts short again after a success, and is cut short when the
// caller's context ends.
package backoff

import (
	"context"
	"time"
)

// Backoff hands out the waits between retries: Min, 2*Min, 4*Min, ... up to
// Max. Min must be positive and Max at least Min. The zero value of next
// means Min, so a Backoff is ready when Min and Max are set. A Backoff is not
// safe for concurrent use; each retry loop has its own.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the wait before the coming retry, and doubles the one after,
// up to Max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if d == 0 {
		d = b.Min
	}
	b.next = min(2*d, b.Max)
	return d
}

// Reset makes the next wait Min again: the retried thing worked.
func (b *Backoff) Reset() { b.next = 0 }

// Wait sleeps for Next, or until ctx ends. It reports whether the wait ran
// its course: false means ctx ended and the caller should stop retrying.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits for d, or until ctx ends. It reports whether d elapsed, false
// when ctx ended first (or had ended already).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return ctx.Err() == nil
	}
}
