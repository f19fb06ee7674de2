package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// flakyPublisher is a fault injector around the real broker: while failing
// is set it refuses every message as a down bus would.
type flakyPublisher struct {
	bus.Publisher
	failing  atomic.Bool
	attempts atomic.Int64
}

func (f *flakyPublisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	f.attempts.Add(1)
	if f.failing.Load() {
		return fmt.Errorf("injected: %w", bus.ErrUnavailable)
	}
	return f.Publisher.Publish(ctx, msgs...)
}

// waitFor polls a condition of a component that works in the background.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, cond, "%s", what)
}

func pending(t *testing.T, h *Handler) int {
	t.Helper()
	n, err := h.Store().PendingCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOutboxRetriesUntilPublished: with the bus down, writes still succeed;
// their events wait in the outbox, are retried, and go out in order once the
// bus is back.
func TestOutboxRetriesUntilPublished(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		flaky := &flakyPublisher{}
		flaky.failing.Store(true)
		s := startServer(t, dsn, serverOptions{
			publisher: func(b *testbus.Bus) bus.Publisher { flaky.Publisher = b; return flaky },
			cfg:       func(c *Config) { c.Outbox.PollInterval = time.Hour },
		})
		ch := s.bus.Subscribe(t, "configdb/#")
		s.fuelSetup()
		s.must(204, "PUT", "/environments/1/nodes/node-1/resources/astute/values", map[string]any{"a": 1})
		// Answered, yet not published: nothing before the barrier.
		s.bus.Barrier(t, ch, "configdb/barrier")
		if n := pending(t, s.h); n != 3 {
			t.Fatalf("%d events pending, want 3", n)
		}
		// The relay keeps retrying with backoff.
		base := flaky.attempts.Load()
		waitFor(t, "two more attempts", func() bool { return flaky.attempts.Load() >= base+2 })
		s.bus.Barrier(t, ch, "configdb/barrier")

		flaky.failing.Store(false)
		for _, want := range []string{"configdb/components/1/created", "configdb/1/environment/created", "configdb/1/astute/values/nodes/node-1"} {
			if got := testkit.Next(t, ch); got.Topic != want {
				t.Fatalf("got %s, want %s", got.Topic, want)
			}
		}
		waitFor(t, "an empty outbox", func() bool { return pending(t, s.h) == 0 })
		s.bus.Barrier(t, ch, "configdb/barrier")
	})
}

// TestOutboxSurvivesRestart: an event not published before the process
// stops is published by the next one.
func TestOutboxSurvivesRestart(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		b := testbus.Start(t)
		ch := b.Subscribe(t, "configdb/#")
		cfg := DefaultConfig()
		cfg.DSN = dsn

		flaky := &flakyPublisher{Publisher: b}
		flaky.failing.Store(true)
		h1, err := Open(context.Background(), cfg, Options{Options: intake.Options{Publisher: flaky, Logger: zerolog.Nop()}})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		h1.Register(mux)
		srv := httptest.NewServer(mux)
		resp, err := http.Post(srv.URL+BasePath+"/components", "application/json", strings.NewReader(`{"name": "fuel"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatal(resp.Status)
		}
		srv.Close()
		if err := h1.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.Barrier(t, ch, "configdb/barrier")

		h2, err := Open(context.Background(), cfg, Options{Options: intake.Options{Publisher: b, Logger: zerolog.Nop()}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h2.Close(context.Background()) }()
		if err := h2.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := testkit.Next(t, ch); got.Topic != "configdb/components/1/created" {
			t.Fatal(got.Topic)
		}
	})
}

// sizedPublisher is a fault injector around the real broker that refuses,
// as the bridge's router does for a required route, any call holding a
// message over max bytes, publishing none of it.
type sizedPublisher struct {
	bus.Publisher
	max int
}

func (p *sizedPublisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	for _, m := range msgs {
		if len(m.Payload) > p.max {
			return fmt.Errorf("injected: %d bytes: %w", len(m.Payload), bus.ErrTooLarge)
		}
	}
	return p.Publisher.Publish(ctx, msgs...)
}

// TestOutboxDropsAnEventTooLarge: an event too large for a required route
// can never be published; the relay drops it, and the events around it go
// out, instead of holding the outbox back for good.
func TestOutboxDropsAnEventTooLarge(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{
			publisher: func(b *testbus.Bus) bus.Publisher { return &sizedPublisher{Publisher: b, max: 1000} },
		})
		ch := s.bus.Subscribe(t, "configdb/#")
		s.fuelSetup()
		s.must(204, "PUT", "/environments/1/nodes/node-1/resources/astute/values", map[string]any{"a": strings.Repeat("x", 2000)})
		s.must(204, "PUT", "/environments/1/nodes/node-2/resources/astute/values", map[string]any{"a": 1})
		for _, want := range []string{"configdb/components/1/created", "configdb/1/environment/created", "configdb/1/astute/values/nodes/node-2"} {
			if got := testkit.Next(t, ch); got.Topic != want {
				t.Fatalf("got %s, want %s", got.Topic, want)
			}
		}
		waitFor(t, "an empty outbox", func() bool { return pending(t, s.h) == 0 })
	})
}
