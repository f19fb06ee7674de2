// Package testbus starts a real embedded broker for tests of the packages that
// publish through it (adapters, the router), with a real MQTT subscriber.
// It is imported only by tests.
package testbus

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// Bus is a running broker on a loopback port.
type Bus struct {
	*broker.Broker
	// URL is the MQTT/TCP address for clients: tcp://127.0.0.1:port.
	URL string
	// barriers numbers the barriers, so that each is told from any other.
	barriers atomic.Uint64
}

// Start runs a broker with default settings on 127.0.0.1:0 and closes it when
// the test ends. Options, when given, change the config before the broker is
// made (more listeners, users).
func Start(t testing.TB, options ...func(*broker.Config)) *Bus {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.Listeners = []broker.ListenerConfig{{Name: "mqtt", Type: broker.ListenerTCP, Address: "127.0.0.1:0"}}
	for _, o := range options {
		o(&cfg)
	}
	b, err := broker.New(cfg, broker.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return &Bus{Broker: b, URL: "tcp://" + b.Addr("mqtt")}
}

// Subscribe connects a real MQTT client and subscribes it to filter at QoS 1.
func (b *Bus) Subscribe(t testing.TB, filter string) <-chan testkit.Received {
	t.Helper()
	return testkit.Connect(t, b.URL, testkit.ClientOptions{}).Subscribe(filter, 1)
}

// Barrier publishes a marker on topic through the broker and returns once it
// arrives on ch, failing the test if anything else arrives first. Use it to
// prove that nothing was published, without sleeping: subscribe to a filter
// that also matches topic.
func (b *Bus) Barrier(t testing.TB, ch <-chan testkit.Received, topic string) {
	t.Helper()
	marker := b.barrier()
	if err := b.Publish(context.Background(), busMessage(topic, marker)); err != nil {
		t.Fatal(err)
	}
	got := testkit.Next(t, ch)
	if got.Topic != topic || got.Payload != marker {
		t.Fatalf("expected nothing before the barrier, got %s: %.200s", got.Topic, got.Payload)
	}
}

// Collect receives messages from ch until the barrier on topic arrives, and
// returns them in order.
func (b *Bus) Collect(t testing.TB, ch <-chan testkit.Received, topic string) []testkit.Received {
	t.Helper()
	marker := b.barrier()
	if err := b.Publish(context.Background(), busMessage(topic, marker)); err != nil {
		t.Fatal(err)
	}
	var got []testkit.Received
	for {
		m := testkit.Next(t, ch)
		if m.Topic == topic && m.Payload == marker {
			return got
		}
		got = append(got, m)
	}
}

// barrier is a marker no other barrier of b has.
func (b *Bus) barrier() string {
	return fmt.Sprintf("firehose-test-barrier-%d", b.barriers.Add(1))
}

func busMessage(topic, marker string) bus.Message {
	return bus.Message{Topic: topic, Payload: []byte(marker), QoS: 1}
}
