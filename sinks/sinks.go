// Package sinks is the contract of the places routes deliver to: the Sink
// interface, its limits and refusals. The sinks themselves live apart, so
// that the router links no client library: NATS core and JetStream in
// sinks/nats, an external MQTT broker in sinks/mqtt. One conformance suite
// (sinks/sinktest) runs against all of them and the embedded broker.
//
// A sink delivers what it is given: it must not filter or buffer on disk.
// Which messages go where is the router's, buffering the outbox's; a sink
// only says, through Address, how a topic is named in its namespace.
package sinks

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/opsfirehose/firehose/bus"
)

// Sink is one destination of routes.
//
// Publish (from bus.Publisher) returns nil only once the sink has confirmed
// every message: a JetStream ack, an MQTT PUBACK, or for NATS core the
// server's answer to a flush. Each msg.Topic is already the destination in the
// sink's own namespace, as Address made it (a NATS subject for NATS sinks, a
// topic for MQTT). When
// the sink is not connected, Publish fails at once with an error wrapping
// bus.ErrUnavailable, so the caller can buffer without waiting out a timeout.
// A message the destination can never take (over its size limit, an invalid
// subject) fails with an error wrapping bus.ErrInvalid, which no retry fixes.
// Publish is safe for concurrent use.
//
// Limit and MessageSize tell, before anything is sent, whether the
// destination takes a message: it does when MessageSize(m) <= Limit().Bytes
// (or Bytes is 0), exactly: a message of Limit().Bytes is delivered, one of
// a byte more is refused. The router uses them to refuse a message before
// its sender is told it is safe.
type Sink interface {
	bus.Publisher
	// Name is the sink's configured name, for logs and metrics.
	Name() string
	// Ready reports whether the sink is connected and able to confirm now.
	Ready() bool
	// NotReadyReason says why the sink is not ready, for /readyz and
	// the log: the reason its last connection attempt failed, as the
	// server or the network gave it ("not Authorized", "connection
	// refused"), or what else it waits for. It is "" while Ready.
	NotReadyReason() string
	// Address is where the sink sends a message published on topic (a bus
	// topic, after its route's rewrite), in the sink's own namespace: for
	// NATS the subject under subjectPrefix (the route's subject_prefix), for
	// MQTT the topic itself. It is pure and cheap: the router asks it of
	// every message a route takes. topic has passed topics.ValidName and
	// subjectPrefix topics.ValidSubjectPrefix: the router checks a topic
	// once, where it enters (Route, Publisher), and a route's prefix with
	// the config, so Address need not check them again. An error means the
	// topic has no destination here; the route drops that message.
	Address(subjectPrefix, topic string) (string, error)
	// Limit is the largest message the destination takes now. It may
	// change: a NATS sink learns it from the server once connected.
	Limit() Limit
	// MessageSize is what m weighs against Limit: its payload and what the
	// sink sends beside it (NATS headers; the MQTT topic and packet header).
	// m.Topic is the destination, as for Publish.
	MessageSize(m *bus.Message) int
	// Close waits, until ctx is done, for messages in flight, then
	// disconnects. It is idempotent; Publish after Close fails with
	// bus.ErrUnavailable.
	Close(ctx context.Context) error
}

// Limit is the largest message a sink's destination takes.
type Limit struct {
	// Bytes is the largest message, as the sink's MessageSize counts it;
	// 0 means the sink knows of no limit.
	Bytes int
	// From says where the limit comes from, for people: "the NATS
	// server's max_payload", "sinks.out.max_packet_size".
	From string
}

// Refusals collects the messages of one Publish that no retry can deliver,
// so that one of them does not make the router drop the batch around it: it
// is reported (as a *bus.Rejected) only once all the others are safe.
type Refusals struct {
	count int
	first error
}

// Add counts a message refused for good by err.
func (r *Refusals) Add(err error) {
	if r.count == 0 {
		r.first = err
	}
	r.count++
}

// Err is nil if nothing was refused, else a *bus.Rejected naming the first refusal.
func (r *Refusals) Err() error {
	if r.count == 0 {
		return nil
	}
	return &bus.Rejected{Count: r.count, Err: r.first}
}

// CheckURL checks a sink's server URL for its config: a URL with a host
// and one of schemes (the first is the example in the error).
func CheckURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL like %s://host:port", raw, schemes[0])
	}
	if slices.Contains(schemes, u.Scheme) {
		return nil
	}
	return fmt.Errorf("%q: scheme must be one of %s", raw, strings.Join(schemes, ", "))
}
