package api

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/internal/backoff"
	"github.com/opsfirehose/firehose/internal/metric"
)

// relay publishes the events the store committed to its outbox, oldest
// first, and deletes them once the publisher has made them safe. A failed
// event stays in the outbox and is retried with backoff: it is never lost,
// and may be published more than once (consumers de-duplicate on its id).
type relay struct {
	store *configdb.Store
	pub   bus.Publisher
	log   zerolog.Logger
	cfg   OutboxConfig

	// sem lets one flush run at a time, so that events go out in order; a
	// channel rather than a mutex, so that waiting respects ctx.
	sem  chan struct{}
	kick chan struct{}

	published prometheus.Counter
	failures  prometheus.Counter
}

// batch is how many events one Publish call carries.
const batch = 100

func newRelay(store *configdb.Store, pub bus.Publisher, log zerolog.Logger, cfg OutboxConfig) *relay {
	return &relay{
		store: store, pub: pub, log: log, cfg: cfg,
		sem:  make(chan struct{}, 1),
		kick: make(chan struct{}, 1),
		published: metric.Counter("firehose_configdb_events_published_total",
			"ConfigDB events published from the outbox."),
		failures: metric.Counter("firehose_configdb_event_publish_failures_total",
			"Attempts to publish ConfigDB events that failed; the events stay in the outbox and are retried."),
	}
}

// flush publishes everything in the outbox. It returns nil once the outbox
// was seen empty.
func (r *relay) flush(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.sem }()
	for {
		events, err := r.store.Pending(ctx, batch)
		if err != nil || len(events) == 0 {
			return err
		}
		msgs := make([]bus.Message, len(events))
		for i, e := range events {
			msgs[i] = bus.NewMessage("configdb", e.ID, e.Topic, e.Payload, e.Time)
		}
		err = r.pub.Publish(ctx, msgs...)
		if errors.Is(err, bus.ErrTooLarge) {
			err = r.publishEach(ctx, events, msgs)
		}
		if err != nil {
			r.failures.Inc()
			return err
		}
		for _, e := range events {
			r.log.Debug().Str("topic", e.Topic).Str("id", e.ID).Msg("published")
		}
		r.published.Add(float64(len(events)))
		if err := r.store.Delete(ctx, events); err != nil {
			return err
		}
	}
}

// publishEach publishes a batch that holds an event too large for a
// required route one event at a time, and drops the events too large:
// their change is committed, no retry can make them fit, and keeping them
// would hold every later event back for good.
func (r *relay) publishEach(ctx context.Context, events []configdb.Event, msgs []bus.Message) error {
	for i := range msgs {
		err := r.pub.Publish(ctx, msgs[i])
		if errors.Is(err, bus.ErrTooLarge) {
			r.log.Error().Err(err).Str("topic", events[i].Topic).Str("id", events[i].ID).
				Msg("a ConfigDB event is too large for a required route; it is dropped, and its change stands")
			continue
		}
		if err != nil {
			// What went out already goes again on the retry; consumers de-duplicate on its id.
			return err
		}
	}
	return nil
}

// afterWrite publishes a committed change's event before the write is
// answered, when the bus takes it. When it does not, the write still stands:
// the event waits in the outbox and the run loop is woken to retry it.
func (r *relay) afterWrite(ctx context.Context) {
	if err := r.flush(ctx); err != nil {
		r.log.Warn().Err(err).Msg("event not published yet; it stays in the outbox and is retried")
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// run retries the outbox until ctx ends: at once when woken, with backoff
// while publishing fails, and every poll interval for events left by a crash
// or by another bridge sharing the database.
func (r *relay) run(ctx context.Context) {
	retry := backoff.Backoff{Min: r.cfg.RetryMin, Max: r.cfg.RetryMax}
	for {
		wait := r.cfg.PollInterval
		failing := false
		if err := r.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			wait, failing = retry.Next(), true
			r.log.Warn().Err(err).Dur("retry_in", wait).Msg("publishing ConfigDB events failed; retrying")
		} else {
			retry.Reset()
		}
		timer := time.NewTimer(wait)
		kick := r.kick
		if failing {
			kick = nil // a write's own failed attempt must not cut the backoff short
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-kick:
			timer.Stop()
		}
	}
}
