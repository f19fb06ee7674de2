// Package sinktest is the conformance suite every sink passes (NATS core,
// JetStream, external MQTT, and the embedded broker): what reaches the
// destination, in what order, with which headers, and how a sink behaves
// when it is closed or its destination goes away. It is imported only by tests.
package sinktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/sinks"
)

// Delivery is one message as the destination's consumer saw it.
type Delivery struct {
	Dest    string
	Payload []byte
	Headers map[string]string // nil when the consumer cannot see headers
}

// Harness adapts one kind of sink to the suite.
type Harness struct {
	// New returns a connected sink, and a channel on which a consumer of the
	// destination receives everything published under the test's namespace.
	New func(t *testing.T) (sinks.Sink, <-chan Delivery)
	// Dest builds a destination in the sink's namespace from levels, e.g.
	// "sinktest.a.b" for NATS or "sinktest/a/b" for MQTT.
	Dest func(levels ...string) string
	// HeadersVisible says whether the consumer sees headers.
	HeadersVisible bool
	// Outage, when set, makes the destination unreachable and returns a
	// function that brings it back.
	Outage func(t *testing.T) (restore func())
	// MaxPayload is the largest payload the destination takes, for a sink
	// that knows no limit (Limit().Bytes is 0).
	MaxPayload int
}

// New's sinks must have a confirm timeout of at least failFast × 2: the
// suite tells a publish that failed at once (a sink that is not Ready)
// from one that waited for a confirmation by how long it took, with room
// for a busy machine.
const failFast = 10 * time.Second

const timeout = 20 * time.Second

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("PublishOneArrives", func(t *testing.T) { publishOne(t, h) })
	t.Run("BatchArrivesInOrder", func(t *testing.T) { batchInOrder(t, h) })
	t.Run("ConcurrentPublishersLoseNothing", func(t *testing.T) { concurrent(t, h) })
	t.Run("LimitIsExact", func(t *testing.T) { limitIsExact(t, h) })
	t.Run("CloseIsIdempotentAndFinal", func(t *testing.T) { closeFinal(t, h) })
	if h.Outage != nil {
		t.Run("OutageFailsFastAndRecovers", func(t *testing.T) { outage(t, h) })
	}
}

func msg(dest, payload, id string) bus.Message {
	return bus.Message{Topic: dest, Payload: []byte(payload), QoS: 1, Headers: map[string]string{
		bus.HeaderMsgID: id, bus.HeaderSource: "sinktest", bus.HeaderReceivedAt: "2026-11-22T00:00:00Z",
	}}
}

func waitReady(t *testing.T, s sinks.Sink) {
	t.Helper()
	testkit.Eventually(t, s.Ready, "sink %s to become ready", s.Name())
}

func publishOne(t *testing.T, h Harness) {
	s, ch := h.New(t)
	waitReady(t, s)
	dest := h.Dest("sinktest", "one")
	if err := s.Publish(context.Background(), msg(dest, `{"hello":"world"}`, "one-1")); err != nil {
		t.Fatal(err)
	}
	d := testkit.NextWithin(t, timeout, ch)
	if d.Dest != dest || string(d.Payload) != `{"hello":"world"}` {
		t.Fatalf("got %s %q, want %s", d.Dest, d.Payload, dest)
	}
	if h.HeadersVisible {
		for k, want := range map[string]string{bus.HeaderMsgID: "one-1", bus.HeaderSource: "sinktest", bus.HeaderReceivedAt: "2026-11-22T00:00:00Z"} {
			if d.Headers[k] != want {
				t.Errorf("header %s = %q, want %q", k, d.Headers[k], want)
			}
		}
	}
}

func batchInOrder(t *testing.T, h Harness) {
	s, ch := h.New(t)
	waitReady(t, s)
	dest := h.Dest("sinktest", "batch")
	var batch []bus.Message
	for i := 0; i < 200; i++ {
		batch = append(batch, msg(dest, fmt.Sprint(i), fmt.Sprint("batch-", i)))
	}
	if err := s.Publish(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if d := testkit.NextWithin(t, timeout, ch); string(d.Payload) != fmt.Sprint(i) {
			t.Fatalf("message %d arrived as %q: out of order", i, d.Payload)
		}
	}
}

func concurrent(t *testing.T, h Harness) {
	s, ch := h.New(t)
	waitReady(t, s)
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("c-%d-%d", g, i)
				if err := s.Publish(context.Background(), msg(h.Dest("sinktest", "conc", fmt.Sprint(g)), id, id)); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < goroutines*each {
		seen[string(testkit.NextWithin(t, timeout, ch).Payload)] = true
	}
}

// limitIsExact: a message of exactly Limit().Bytes, as MessageSize counts
// it, arrives whole, and one a byte larger is refused for good
// (bus.ErrInvalid) with nothing of it arriving: the router trusts both to
// refuse a message before its sender's 2xx. A sink that knows no limit
// delivers a large payload.
func limitIsExact(t *testing.T, h Harness) {
	s, ch := h.New(t)
	waitReady(t, s)
	dest := h.Dest("sinktest", "large")
	lim := s.Limit()
	if lim.Bytes == 0 {
		size := h.MaxPayload
		if size == 0 || size > 4<<20 {
			size = 4 << 20
		}
		payload := strings.Repeat("x", size-1024)
		if err := s.Publish(context.Background(), msg(dest, payload, "large-1")); err != nil {
			t.Fatal(err)
		}
		if d := testkit.NextWithin(t, timeout, ch); len(d.Payload) != len(payload) {
			t.Fatalf("payload of %d bytes arrived as %d", len(payload), len(d.Payload))
		}
		return
	}
	if lim.From == "" {
		t.Errorf("Limit %d does not say where it comes from", lim.Bytes)
	}
	exact := msg(dest, "", "exact-1")
	exact.Payload = make([]byte, lim.Bytes-s.MessageSize(&exact))
	for s.MessageSize(&exact) > lim.Bytes { // a packet's length field may grow by a byte
		exact.Payload = exact.Payload[:len(exact.Payload)-1]
	}
	if got := s.MessageSize(&exact); got != lim.Bytes {
		t.Logf("no message weighs exactly %d bytes; the largest weighs %d", lim.Bytes, got)
	}
	if err := s.Publish(context.Background(), exact); err != nil {
		t.Fatalf("a message of exactly the limit (%d bytes, %s): %v", lim.Bytes, lim.From, err)
	}
	if d := testkit.NextWithin(t, timeout, ch); len(d.Payload) != len(exact.Payload) {
		t.Fatalf("payload of %d bytes arrived as %d", len(exact.Payload), len(d.Payload))
	}
	over := msg(dest, "", "over-1")
	over.Payload = make([]byte, len(exact.Payload)+1)
	for s.MessageSize(&over) <= lim.Bytes {
		over.Payload = append(over.Payload, 0)
	}
	if err := s.Publish(context.Background(), over); !errors.Is(err, bus.ErrInvalid) || errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("a message a byte over the limit (%d bytes): %v, want bus.ErrInvalid only", s.MessageSize(&over), err)
	}
	if err := s.Publish(context.Background(), msg(dest, "after", "after-1")); err != nil {
		t.Fatal(err)
	}
	if d := testkit.NextWithin(t, timeout, ch); string(d.Payload) != "after" {
		t.Fatalf("%d bytes arrived of the message over the limit", len(d.Payload))
	}
}

func closeFinal(t *testing.T, h Harness) {
	s, _ := h.New(t)
	waitReady(t, s)
	if why := s.NotReadyReason(); why != "" {
		t.Fatalf("ready, yet NotReadyReason is %q", why)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if s.Ready() {
		t.Fatal("Ready after Close")
	}
	if s.NotReadyReason() == "" {
		t.Fatal("closed, yet no NotReadyReason")
	}
	err := s.Publish(context.Background(), msg(h.Dest("sinktest", "closed"), "x", "closed-1"))
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("Publish after Close: %v, want bus.ErrUnavailable", err)
	}
}

func outage(t *testing.T, h Harness) {
	s, ch := h.New(t)
	waitReady(t, s)
	restore := h.Outage(t)
	testkit.Eventually(t, func() bool { return !s.Ready() }, "the sink to notice the outage (not Ready)")
	start := time.Now()
	err := s.Publish(context.Background(), msg(h.Dest("sinktest", "outage"), "lost?", "outage-1"))
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("Publish during the outage: %v, want bus.ErrUnavailable", err)
	}
	if took := time.Since(start); took > failFast {
		t.Fatalf("Publish during the outage took %v; a sink that is not Ready must fail at once, not wait for a confirmation", took)
	}
	restore()
	waitReady(t, s)
	dest := h.Dest("sinktest", "outage")
	// The destination's consumer reconnects on its own schedule and may
	// miss a message sent before it has subscribed again, so the message
	// is sent until one arrives; every send must succeed.
	sent := 1
	testkit.Eventually(t, func() bool {
		sent++
		if err := s.Publish(context.Background(), msg(dest, "after", fmt.Sprint("outage-", sent))); err != nil {
			t.Fatalf("Publish after the outage: %v", err)
		}
		window := time.After(time.Second) // for this send to arrive before the next
		for {
			select {
			case d := <-ch:
				if string(d.Payload) == "after" {
					return true
				}
			case <-window:
				return false
			}
		}
	}, "a message published after the outage to arrive")
}
