package broker

import (
	"context"
	"sync"
	"time"
)

// loginThrottle makes password guessing slow and cheap for the broker.
//
// Failures are counted per source address and per username. Past
// MaxFailures in a row, a key backs off: attempts from (or for) it are
// refused without a password check for Backoff, doubling with each further
// failure up to MaxBackoff. A success clears the source's and the
// username's count. Separately, at most BcryptConcurrency password checks
// run at once (bcrypt is slow on purpose), so however many guesses arrive,
// publishers keep the rest of the CPU.
type loginThrottle struct {
	cfg Login
	now func() time.Time
	sem chan struct{}

	mu   sync.Mutex
	keys map[string]*failures
}

type failures struct {
	n     int       // failures in a row
	until time.Time // refused until then
	last  time.Time // the last failure, for forgetting idle keys
}

// maxThrottleKeys bounds the table: an attacker with many addresses fills
// it with keys that expire; beyond it, new keys are not tracked (they still
// queue for the password-check slots).
const maxThrottleKeys = 1 << 16

func newLoginThrottle(cfg Login, now func() time.Time) *loginThrottle {
	if now == nil {
		now = time.Now
	}
	return &loginThrottle{cfg: cfg, now: now, sem: make(chan struct{}, cfg.BcryptConcurrency), keys: map[string]*failures{}}
}

// blocked reports whether any of the keys is backing off, and until when.
func (t *loginThrottle) blocked(keys ...string) (bool, time.Time) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if f := t.keys[k]; f != nil && now.Before(f.until) {
			return true, f.until
		}
	}
	return false, time.Time{}
}

// failed counts a failure for each key and reports whether one of them
// has just started backing off.
func (t *loginThrottle) failed(keys ...string) (started bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		f := t.keys[k]
		if f == nil {
			if len(t.keys) >= maxThrottleKeys {
				t.prune(now)
				if len(t.keys) >= maxThrottleKeys {
					continue
				}
			}
			f = &failures{}
			t.keys[k] = f
		}
		// A key idle for longer than the longest back-off starts afresh.
		if !f.last.IsZero() && now.Sub(f.last) > 2*t.cfg.MaxBackoff {
			f.n = 0
		}
		f.n++
		f.last = now
		if over := f.n - t.cfg.MaxFailures + 1; over > 0 {
			d := t.cfg.Backoff
			for i := 1; i < over && d < t.cfg.MaxBackoff; i++ {
				d *= 2
			}
			f.until = now.Add(min(d, t.cfg.MaxBackoff))
			started = started || over == 1
		}
	}
	return started
}

// succeeded clears the keys' failures.
func (t *loginThrottle) succeeded(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		delete(t.keys, k)
	}
}

// prune forgets keys idle for longer than the longest back-off.
func (t *loginThrottle) prune(now time.Time) {
	for k, f := range t.keys {
		if now.Sub(f.last) > 2*t.cfg.MaxBackoff {
			delete(t.keys, k)
		}
	}
}

// check runs fn (a password check) in one of the slots, waiting for one
// until ctx is done; ok is false if no slot freed in time.
func (t *loginThrottle) check(ctx context.Context, fn func() bool) (result, ok bool) {
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return false, false
	}
	defer func() { <-t.sem }()
	return fn(), true
}
