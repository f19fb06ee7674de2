package app

import (
	"context"
	"fmt"
	"maps"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/mqttin"
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
// dead, or on a broker that may drop what it queued for it.
//
// Every bridge's router subscriber receives its share of those messages
// from the broker and routes them again: MQTT 3.1.1 carries nothing that
// would say a bridge routed them already. So the message is routed under
// the de-duplication id that subscriber will give it, made from its topic
// and payload (mqttin.ContentID): JetStream stores the second routing's
// copy as the first one, whichever bridge routes it, within the stream's
// duplicate_window.
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
	routed := make([]bus.Message, len(msgs))
	for i, m := range msgs {
		m.Headers = maps.Clone(m.Headers) // the caller's map stays as it was
		if m.Headers == nil {
			m.Headers = make(map[string]string, 1)
		}
		m.Headers[bus.HeaderMsgID] = mqttin.ContentID(m.Topic, m.Payload)
		routed[i] = m
	}
	if err := p.router.Route(ctx, routed...); err != nil {
		return err
	}
	return p.next.Publish(ctx, msgs...)
}
