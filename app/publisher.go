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

// fittedPublisher is the adapters' publisher in external mode: it refuses a
// message too large for a required route before publishing anything on the
// external broker, whose router subscriber could only drop it once the
// sender had its 2xx.
type fittedPublisher struct {
	router *router.Router
	next   bus.Publisher
}

func (p *fittedPublisher) Publish(ctx context.Context, msgs ...bus.Message) error {
	for i := range msgs {
		if err := p.router.Fit(&msgs[i]); err != nil {
			return err
		}
	}
	return p.next.Publish(ctx, msgs...)
}
