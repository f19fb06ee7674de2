package router

import (
	"context"
	"fmt"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/topics"
)

// RoutedPublisher is the adapters' publisher in embedded mode: it routes
// first (every required sink confirmed, or the outbox written; a message too
// large for a required route stops the call before anything is delivered),
// then publishes on the local broker, whose router hook skips the bridge's own
// messages. A failure anywhere fails the call, and the sender retries; the
// duplicates that retry may cause are what Nats-Msg-Id is for.
type RoutedPublisher struct {
	Router *Router
	Local  bus.Publisher
}

func (p *RoutedPublisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	// Refuse a bad topic before anything reaches a sink.
	for i := range msgs {
		if err := topics.ValidName(msgs[i].Topic); err != nil {
			return fmt.Errorf("publish %q: %w: %w", msgs[i].Topic, bus.ErrInvalid, err)
		}
	}
	if err := p.Router.Route(ctx, msgs...); err != nil {
		return err
	}
	return p.Local.Publish(ctx, msgs...)
}

// ExternalPublisher is the adapters' publisher in external mode. It keeps
// the promise of embedded mode: it routes first (every required sink
// confirmed, or the outbox written), then publishes on the external broker,
// so a sender's 2xx never waits on another bridge's router, which may be
// dead, or on a broker that may drop what it queued for that router. The
// router subscribers of the fleet do not route these messages again: they
// skip the adapters' topic prefixes (mqttin.NewSubscriber), so each message
// is routed once, under its adapter's de-duplication id.
type ExternalPublisher struct {
	Router *Router
	Next   bus.Publisher
}

func (p *ExternalPublisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	for i := range msgs {
		if err := topics.ValidName(msgs[i].Topic); err != nil {
			return fmt.Errorf("publish %q: %w: %w", msgs[i].Topic, bus.ErrInvalid, err)
		}
	}
	if err := p.Router.Route(ctx, msgs...); err != nil {
		return err
	}
	return p.Next.Publish(ctx, msgs...)
}
