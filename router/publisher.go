package router

import (
	"context"
	"fmt"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/topics"
)

// Publisher is the publish policy for the messages the bridge accepts
// itself (its adapters'): required routes first, then the bus. It checks
// each topic (topics.ValidName), the one check on the message's way, and
// refuses a bad one before anything reaches a sink; the router's routes
// and the sinks' Address trust it, and so does a bus that is a
// bus.CheckedPublisher (the embedded broker, which checks the topics of its
// other callers itself). Then it routes (every required sink
// confirmed, or the outbox written; a message too large for a required
// route stops the call before anything is delivered); then it publishes on
// the bus it was given.
//
// On the embedded broker, the router hook skips the bridge's own messages.
// On an external broker, the router subscribers of the fleet skip the
// adapters' topic prefixes (mqttin.NewSubscriber), so each message is
// routed once, under its adapter's de-duplication id, and a sender's 2xx
// never waits on another bridge's router, which may be dead, or on a
// broker that may drop what it queued for that router.
//
// A failure anywhere fails the call, and the sender retries; the duplicates
// that retry may cause are what Nats-Msg-Id is for. Publish is safe for
// concurrent use.
type Publisher struct {
	router *Router
	bus    bus.Publisher
	// checked is bus when it can skip its own topic check.
	checked bus.CheckedPublisher
}

// NewPublisher publishes through r, then onto bus.
func NewPublisher(r *Router, onto bus.Publisher) *Publisher {
	p := &Publisher{router: r, bus: onto}
	p.checked, _ = onto.(bus.CheckedPublisher)
	return p
}

// Publish routes msgs, then publishes them on the bus.
func (p *Publisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	for i := range msgs {
		if err := topics.ValidName(msgs[i].Topic); err != nil {
			return fmt.Errorf("publish %q: %w: %w", msgs[i].Topic, bus.ErrInvalid, err)
		}
	}
	if err := p.router.route(ctx, msgs, nil); err != nil {
		return err
	}
	if p.checked != nil {
		return p.checked.PublishChecked(ctx, msgs...)
	}
	return p.bus.Publish(ctx, msgs...)
}
