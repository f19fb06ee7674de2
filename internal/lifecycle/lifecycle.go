// Package lifecycle is the one lifecycle shape of the parts the bridge runs
// (broker, HTTP server, router, sinks, adapters with background work,
// dashboard), the helper that runs a part's background work, and Serve, the
// wait-then-close that ends a program's Run.
//
// A part is built by its New (or Open, when building does I/O), which
// validates, allocates and binds; Start(ctx) sets it working; Close(ctx)
// stops it. Start/Close rather than Run(ctx) because most parts serve in the
// background and must be stopped in an order (the pipeline's) that is not
// the reverse of a context tree; Run(ctx) is for the process as a whole
// (app.Bridge.Run), which blocks until a signal.
//
// It must not import anything of the bridge's: every package may use it.
package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// Component is the lifecycle of one running part.
//
// Start sets the part working and returns once it does (a listener accepts,
// a loop runs). ctx bounds the start, not the part's life: cancelling it
// later stops nothing; Close does. Start returns ctx's error, wrapped, when
// ctx is done before it starts.
//
// Close stops the part and waits, until ctx is done, for work in flight
// (requests, messages, a last flush); it then releases what the part holds.
// It is idempotent and safe without Start. When ctx ends first it returns an
// error wrapping ctx's.
type Component interface {
	Start(ctx context.Context) error
	Close(ctx context.Context) error
}

// Background runs one function from Start until Stop, for a part whose
// Start begins a loop (reloads, retries, periodic publishing). The zero value
// is ready to use; it is safe for concurrent use.
type Background struct {
	mu      sync.Mutex
	stopped bool
	stop    context.CancelFunc
	done    chan struct{} // nil until Start
}

// Start runs fn in a goroutine of its own, with a context that Stop cancels
// (ctx's values are kept, its cancellation is not: ctx bounds the start
// only). Calling it again, or after Stop, does nothing.
func (b *Background) Start(ctx context.Context, fn func(ctx context.Context)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil || b.stopped {
		return
	}
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stop, b.done = stop, make(chan struct{})
	go func() { defer close(b.done); fn(run) }()
}

// Stop cancels fn's context and waits, until ctx is done, for fn to return.
// It reports whether Start ran fn. A Start after Stop does nothing.
func (b *Background) Stop(ctx context.Context) (started bool, err error) {
	b.mu.Lock()
	b.stopped = true
	stop, done := b.stop, b.done
	b.mu.Unlock()
	if done == nil {
		return false, nil
	}
	stop()
	select {
	case <-done:
		return true, nil
	case <-ctx.Done():
		return true, fmt.Errorf("gave up waiting for background work: %w", ctx.Err())
	}
}
