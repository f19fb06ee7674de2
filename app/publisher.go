package app

import (
	"context"
	"fmt"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/router"
	"github.com/opsfirehose/firehose/topics"
)

// routedPublisher is the adapters' publisher in embedded mode: it routes
// first (every required sink confirmed, or the outbox written; a message too
// large for a required route stops the call before anything is delivered),
// then publishes on the local broker, whose router hook skips the bridge's own
// messages. A failure anywhere fails the call, and the sender retries; the
// duplicates that retry may cause are what Nats-Msg-Id is for.
type routedPublisher struct {
	router *router.Router
	local  bus.Publisher
}

func (p *routedPublisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	// Refuse a bad topic before anything reaches a sink.
	for i := range msgs {
		if err := topics.ValidName(msgs[i].Topic); err != nil {
			return fmt.Errorf("publish %q: %w: %w", msgs[i].Topic, bus.ErrInvalid, err)
		}
	}
	if err := p.router.Route(ctx, msgs...); err != nil {
		return err
	}
	return p.local.Publish(ctx, msgs...)
}

// externalPublisher is the adapters' publisher in external mode. It keeps
// the promise of embedded mode: it routes first (every required sink
// confirmed, or the outbox written), then publishes on the external broker,
// so a sender's 2xx never waits on another bridge's router, which may be
// dead, or on a broker that may drop what it queued for that router. The
// router subscribers of the fleet do not route these messages again: they
// skip the adapters' topic prefixes (mqttin.NewSubscriber), so each message
// is routed once, under its adapter's de-duplication id.
type externalPublisher struct {
	router *router.Router
	next   bus.Publisher
}

func (p *externalPublisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	for i := range msgs {
		if err := topics.ValidName(msgs[i].Topic); err != nil {
			return fmt.Errorf("publish %q: %w: %w", msgs[i].Topic, bus.ErrInvalid, err)
		}
	}
	if err := p.router.Route(ctx, msgs...); err != nil {
		return err
	}
	return p.next.Publish(ctx, msgs...)
}
