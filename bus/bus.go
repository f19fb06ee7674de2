// Package bus defines the one message type and the one Publisher interface that
// every adapter publishes through and every destination implements: the
// embedded broker, the sinks (an external MQTT broker, NATS, JetStream) and the
// app's routed publisher, which hands a message to the router's routes and then
// to the broker. Nothing in it does I/O.
package bus

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Header names that travel beside a payload: NATS headers, and MQTT v5 user
// properties for subscribers that speak v5. Payloads stay each source's own JSON.
const (
	// HeaderMsgID is the de-duplication id. JetStream de-duplicates on it, so
	// it must be stable across retries of the same message.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderSource names the adapter that produced the message ("chef", "ansible", ...).
	HeaderSource = "Firehose-Source"
	// HeaderReceivedAt is when the bridge accepted the message, RFC 3339 with nanoseconds, UTC.
	HeaderReceivedAt = "Firehose-Received-At"
)

// Message is one message on the bus.
type Message struct {
	// Topic is an MQTT topic name, built by the topics package.
	Topic string
	// Payload is passed through untouched; publishers must not modify it.
	Payload []byte
	// QoS is the MQTT quality of service, 0 or 1. The bridge publishes at 1 by default.
	QoS byte
	// Retain asks the broker to keep the message as the topic's last known value.
	Retain bool
	// Headers are metadata beside the payload (see the Header constants). May be nil.
	Headers map[string]string
}

// NewMessage returns a QoS 1 message with the standard headers set.
func NewMessage(source, id, topic string, payload []byte, receivedAt time.Time) Message {
	return Message{
		Topic:   topic,
		Payload: payload,
		QoS:     1,
		Headers: map[string]string{
			HeaderMsgID:      id,
			HeaderSource:     source,
			HeaderReceivedAt: receivedAt.UTC().Format(time.RFC3339Nano),
		},
	}
}

// Publisher publishes messages.
//
// Publish returns nil only once every message in msgs is safe: handed to the
// broker, and confirmed by every required route's sink or written to that
// route's outbox. A nil return is what lets an adapter answer 2xx. On error, some of
// the messages may have been published and others not; callers treat the whole
// call as failed and the sender retries, which is why delivery is at-least-once
// and consumers de-duplicate on HeaderMsgID.
//
// Errors wrap ErrUnavailable or ErrOverloaded when the cause is transient and the
// sender should retry later (HTTP 503 or 429 with Retry-After), ErrTooLarge
// when a message is bigger than a destination it must reach takes (HTTP 413),
// and ErrInvalid when the message itself can never be published (HTTP 400).
// ErrTooLarge is decided before anything is published: a Publisher that
// returns it has published none of msgs, anywhere, so that a 2xx is never
// followed by a message dropped for its size. A Publisher of
// several messages returns ErrInvalid only once every other message is safe,
// so that the caller may drop the batch without losing any of them; it
// returns a *Rejected to say how many it refused. When ctx is done
// before the messages are safe, Publish returns an error wrapping ctx.Err().
//
// Publish must be safe for concurrent use, and must not keep msgs or their
// payloads after it returns, except in its own durable copies.
type Publisher interface {
	Publish(ctx context.Context, msgs ...Message) error
}

// CheckedPublisher is a Publisher that checks each message's topic itself
// (topics.ValidName: its library does not) and lets a caller that has
// checked them already skip that: router.Publisher checks the topics of
// the adapters' messages once, at its entry, for the router and the bus.
type CheckedPublisher interface {
	Publisher
	// PublishChecked is Publish for msgs whose every Topic has passed
	// topics.ValidName; it does not check them again.
	PublishChecked(ctx context.Context, msgs ...Message) error
}

// Sentinel errors for Publisher implementations; wrap them with %w.
var (
	// ErrUnavailable means the bus, or a required sink, cannot take messages now.
	ErrUnavailable = errors.New("bus unavailable")
	// ErrOverloaded means the bus is up but full; the sender should slow down.
	ErrOverloaded = errors.New("bus overloaded")
	// ErrInvalid means the message can never be published as it is (for example, an invalid topic).
	ErrInvalid = errors.New("invalid message")
	// ErrTooLarge means a message is bigger than a destination it must reach
	// takes (a required route's sink: a NATS server's max_payload, an MQTT
	// broker's packet size limit), and that none of the messages of the call
	// was published. The error that wraps it names the destination and its limit.
	ErrTooLarge = errors.New("message too large")
)

// Rejected is the error of a Publish that made every message safe but Count,
// which no retry can publish. It wraps ErrInvalid and Err, the first refusal.
type Rejected struct {
	Count int
	Err   error
}

func (e *Rejected) Error() string {
	return fmt.Sprintf("%d message(s) refused for good: %v", e.Count, e.Err)
}

// Unwrap lets errors.Is find ErrInvalid and the refusal's own cause.
func (e *Rejected) Unwrap() []error { return []error{ErrInvalid, e.Err} }
