package broker

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker/retained"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// holdingHook does what the router's hook does, without routes: it takes
// every publish from mochi and releases it from another goroutine once
// the test says so; it records what mochi publishes (OnPublished).
type holdingHook struct {
	mqtt.HookBase
	b       *Broker
	taken   chan taken
	origins sync.Map // topic -> origin of the published packet
}

type taken struct {
	cl *mqtt.Client
	pk packets.Packet
}

func (h *holdingHook) ID() string { return "test-holding" }

func (h *holdingHook) Provides(b byte) bool {
	return bytes.IndexByte([]byte{mqtt.OnPublish, mqtt.OnPublished}, b) >= 0
}

func (h *holdingHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	if released, drop := h.b.Released(&pk); released {
		if drop {
			return pk, packets.CodeSuccessIgnore
		}
		return pk, nil
	}
	h.taken <- taken{cl, pk}
	return pk, packets.ErrRejectPacket
}

func (h *holdingHook) OnPublished(_ *mqtt.Client, pk packets.Packet) {
	h.origins.Store(pk.TopicName, pk.Origin)
}

// TestReleaseContract checks what Release relies on of mochi (see
// release.go), so that a mochi upgrade that changes it fails here: a
// publish taken in OnPublish and released later, from another goroutine,
// gets mochi's PUBACK only then (without the publisher's user properties,
// with a PUBACK reason code), is published with the publisher as its
// origin (No Local holds), retained, counted once in $SYS, and a dropped
// release is acked and delivered nowhere.
func TestReleaseContract(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"#"}}}
	b, err := New(cfg, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := &holdingHook{b: b, taken: make(chan taken, 10)}
	if err := b.AddHook(h); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	if err := b.AddHook(&holdingHook{}); err == nil {
		t.Fatal("an OnPublish hook was added after Start, after the retained store's")
	}
	other := testkit.DialRaw(t, b.Addr("mqtt"))
	other.Connect(5, testkit.ConnectOptions{Clean: true})
	other.Subscribe(1, "held/a", 1)

	// The holder's subscription streams it the retained messages after
	// its SUBACK; once it has held/ready, the stream has read past held/a.
	// Had it not, a stream still reading the store when the release
	// retains held/a would send it, No Local or not (a busy machine).
	if err := b.Publish(context.Background(), bus.Message{Topic: "held/ready", Payload: []byte("ready"), Retain: true}); err != nil {
		t.Fatal(err)
	}
	c := testkit.DialRaw(t, b.Addr("mqtt"))
	c.Connect(5, testkit.ConnectOptions{ClientID: "holder", Username: "pub", Password: "pw", Clean: true})
	c.SubscribeTo(1, packets.Subscription{Filter: "held/#", Qos: 1, NoLocal: true})
	if pk := c.Next(); pk.TopicName != "held/ready" || !pk.FixedHeader.Retain {
		t.Fatalf("the holder got %s %q, want the retained held/ready", pk.TopicName, pk.Payload)
	}
	received := atomic.LoadInt64(&b.server.Info.MessagesReceived)

	c.Send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true}, PacketID: 7,
		TopicName: "held/a", Payload: []byte("x"),
		Properties: packets.Properties{User: []packets.UserProperty{{Key: "k", Val: "v"}}},
	})
	got := <-h.taken // mochi gave it to the hook, and sent no PUBACK
	if len(got.pk.Filters) != 0 {
		t.Fatal("a publish read from the network carries Filters; Released could mistake it for a released one")
	}
	if err := b.Release(got.cl, got.pk, false); err != nil {
		t.Fatal(err)
	}
	ack := c.Next()
	if ack.FixedHeader.Type != packets.Puback || ack.PacketID != 7 || ack.ReasonCode != 0 || len(ack.Properties.User) != 0 || ack.FixedHeader.Remaining != 2 {
		t.Fatalf("got %+v, want a bare PUBACK for packet 7 after the release", ack)
	}
	if m := other.Next(); m.TopicName != "held/a" || string(m.Payload) != "x" {
		t.Fatalf("the other subscriber got %+v", m)
	}
	if origin, _ := h.origins.Load("held/a"); origin != "holder" {
		t.Fatalf("published with origin %v, want the publisher, holder", origin)
	}
	if n := atomic.LoadInt64(&b.server.Info.MessagesReceived) - received; n != 1 {
		t.Fatalf("$SYS messages received grew by %d for one message", n)
	}
	if !retainedHas(t, b, "held/a") {
		t.Fatal("a released retained message was not retained")
	}

	// Dropped: acked, delivered nowhere, not retained.
	c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true}, PacketID: 8, TopicName: "held/b", Payload: []byte("y")})
	got = <-h.taken
	if err := b.Release(got.cl, got.pk, true); err != nil {
		t.Fatal(err)
	}
	if ack := c.Next(); ack.FixedHeader.Type != packets.Puback || ack.PacketID != 8 || ack.ReasonCode != 0 {
		t.Fatalf("got %+v, want a PUBACK for the dropped message", ack)
	}
	if retainedHas(t, b, "held/b") {
		t.Fatal("a dropped release was retained")
	}
	// No Local: the holder never got its own message. mochi delivers to it
	// in order, so the barrier published after is the first thing it gets.
	if err := b.Publish(context.Background(), bus.Message{Topic: "held/barrier", Payload: []byte("barrier")}); err != nil {
		t.Fatal(err)
	}
	if pk := c.Next(); pk.FixedHeader.Type != packets.Publish || pk.TopicName != "held/barrier" {
		t.Fatalf("the publisher got %s %q before the barrier, despite No Local", pk.TopicName, pk.Payload)
	}
}

// retainedHas reports whether the broker's retained store holds topic.
func retainedHas(t *testing.T, b *Broker, topic string) bool {
	t.Helper()
	found := false
	err := b.retain.store.Scan(context.Background(), topic, func(retained.Message) error {
		found = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
