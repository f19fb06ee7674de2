package router

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/backoff"
	"github.com/opsfirehose/firehose/outbox"
	"github.com/opsfirehose/firehose/sinks"
	"github.com/opsfirehose/firehose/topics"
)

// Options carries what the router needs besides its routes.
type Options struct {
	// DataDir holds the outboxes, one directory per required route.
	DataDir string
	Logger  zerolog.Logger
	// Registerer receives the routing and outbox metrics; nil means none.
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Router is safe for concurrent use.
type Router struct {
	routes  []*route
	log     zerolog.Logger
	now     func() time.Time
	metrics *metrics
	where   bool // some route has a `where`
	// topicGrowth bounds how much longer a route's addressing makes a
	// topic: a rewrite to a longer prefix.
	topicGrowth int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
}

type route struct {
	cfg     Config
	sink    sinks.Sink
	conds   []condition
	outbox  *outbox.Outbox     // required routes
	queue   chan []bus.Message // optional routes
	wake    chan struct{}
	log     zerolog.Logger
	metrics routeMetrics
}

// New opens every required route's outbox and prepares the routes; Start
// begins replaying. sinkSet maps sink names to sinks, each of which
// addresses the messages it is given (sinks.Sink.Address).
func New(cfgs []Config, sinkSet map[string]sinks.Sink, opts Options) (_ *Router, err error) {
	r := &Router{log: opts.Logger.With().Str("component", "router").Logger(), now: opts.Now, metrics: newMetrics()}
	if r.now == nil {
		r.now = time.Now
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			r.closeOutboxes()
		}
	}()
	for _, c := range cfgs {
		s, ok := sinkSet[c.Sink]
		if !ok {
			return nil, fmt.Errorf("route %s: no sink named %q", c.Name, c.Sink)
		}
		// The sinks' Address trusts the prefixes (see sinks.Sink); the
		// config has checked them, and so does New, for other callers.
		if err := topics.ValidSubjectPrefix(c.SubjectPrefix); err != nil {
			return nil, fmt.Errorf("route %s: subject_prefix: %w", c.Name, err)
		}
		if rw := c.Rewrite; rw != nil {
			if err := errors.Join(topics.ValidPrefix(rw.From), topics.ValidPrefix(rw.To)); err != nil {
				return nil, fmt.Errorf("route %s: rewrite: %w", c.Name, err)
			}
		}
		rt := &route{
			cfg:   c,
			sink:  s,
			conds: newConditions(c.Where),
			wake:  make(chan struct{}, 1),
			log:   r.log.With().Str("route", c.Name).Str("sink", c.Sink).Logger(),
		}
		rt.metrics = r.metrics.forRoute(c.Name)
		if c.Rewrite != nil {
			r.topicGrowth = max(r.topicGrowth, len(c.Rewrite.To)-len(c.Rewrite.From))
		}
		if len(rt.conds) > 0 {
			r.where = true
		}
		if c.Required {
			dir := filepath.Join(opts.DataDir, "outbox", c.Name)
			if rt.outbox, err = outbox.Open(dir, int64(c.OutboxMaxBytes), rt.log); err != nil {
				return nil, fmt.Errorf("route %s: %w", c.Name, err)
			}
			if n := rt.outbox.Len(); n > 0 {
				rt.log.Info().Int("messages", n).Msg("outbox holds messages from before the restart; replaying them once the sink is up")
			}
		} else {
			rt.queue = make(chan []bus.Message, c.QueueSize)
		}
		r.routes = append(r.routes, rt)
	}
	if opts.Registerer != nil {
		if err := r.metrics.register(opts.Registerer, r); err != nil {
			return nil, fmt.Errorf("router metrics: %w", err)
		}
	}
	return r, nil
}

// Start runs one replayer per required route and one sender per optional
// route, until Close; ctx bounds the start only, which does not block.
func (r *Router) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("router: start: %w", err)
	}
	for _, rt := range r.routes {
		r.wg.Add(1)
		if rt.outbox != nil {
			go func() { defer r.wg.Done(); r.replay(rt) }()
		} else {
			go func() { defer r.wg.Done(); r.sendOptional(rt) }()
		}
	}
	return nil
}

// Route delivers msgs, from MQTT publishers (the embedded broker's hook, the
// external broker's subscription), along every matching route. Their
// topics are checked here (topics.ValidName), once, before any sink's
// Address sees them: a message whose topic fails is dropped, as rejected,
// by every route it matches, and reaches no sink. (The adapters' messages
// come through Publisher, which checks them itself.) It returns nil once each
// message is confirmed by the sink of every matching required route, or
// stored in that route's outbox; optional routes only queue. An error wraps
// bus.ErrUnavailable when an outbox is full or cannot be written: the sender
// should retry later. When a message is too large for a required route that
// takes it (see Fit), Route delivers none of msgs, anywhere, and returns
// that message's *TooLargeError.
func (r *Router) Route(ctx context.Context, msgs ...bus.Message) error {
	if len(r.routes) == 0 {
		return nil
	}
	return r.route(ctx, msgs, invalidTopics(msgs))
}

// invalidTopics is nil when every topic of msgs is valid, else each
// message's problem (nil for a valid topic).
func invalidTopics(msgs []bus.Message) []error {
	var bad []error
	for i := range msgs {
		if err := topics.ValidName(msgs[i].Topic); err != nil {
			if bad == nil {
				bad = make([]error, len(msgs))
			}
			bad[i] = fmt.Errorf("%w: %w", bus.ErrInvalid, err)
		}
	}
	return bad
}

// route is Route for msgs whose topics are checked: bad, when not nil,
// holds the problem of each message whose topic is invalid, which no route
// takes.
func (r *Router) route(ctx context.Context, msgs []bus.Message, bad []error) error {
	if len(r.routes) == 0 {
		return nil
	}
	for i := range msgs {
		if bad != nil && bad[i] != nil {
			continue
		}
		if err := r.fit(&msgs[i], true); err != nil {
			return err
		}
	}
	batches := r.match(msgs, bad)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	required := 0
	for i, rt := range r.routes {
		if len(batches[i]) > 0 && rt.outbox != nil {
			required++
		}
	}
	for i, rt := range r.routes {
		batch := batches[i]
		if len(batch) == 0 {
			continue
		}
		if rt.outbox == nil {
			r.enqueueOptional(rt, batch)
			continue
		}
		if required == 1 {
			// The only required route: no goroutine to wait for.
			if err := r.deliverRequired(ctx, rt, batch); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// Routes deliver in parallel, so one slow sink does not add to another's latency.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.deliverRequired(ctx, rt, batch); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TooLargeError is a message bigger than a required route that takes it
// can deliver: its sink's destination would refuse it for good, after its
// sender was told it is safe. It wraps bus.ErrTooLarge.
type TooLargeError struct {
	Route, Sink string
	// Topic is the message's topic on the bus.
	Topic string
	// Size is the message as the sink would send it (sinks.Sink.MessageSize).
	Size  int
	Limit sinks.Limit
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message on %s is %d bytes as sink %s sends it, over the limit of required route %s: %d bytes (%s)",
		e.Topic, e.Size, e.Sink, e.Route, e.Limit.Bytes, e.Limit.From)
}

// Reason is the error in few words, for an MQTT 5 reason string.
func (e *TooLargeError) Reason() string {
	return fmt.Sprintf("message of %d bytes over route %s's limit of %d bytes", e.Size, e.Route, e.Limit.Bytes)
}

// Unwrap returns bus.ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return bus.ErrTooLarge }

// fitSlack bounds what a sink sends beside a payload: the NATS headers or
// the MQTT packet header, less the topic and the headers' own bytes, which
// Fit counts. A message this far under every limit needs no routing to be
// known to fit.
const fitSlack = 64

// Fit checks m against the limit of every required route that takes it,
// before anything is delivered, so that a sender is never told a message is
// safe that a required route's sink will refuse for its size. It returns a
// *TooLargeError for the first route m is too large for, and counts m as
// too_large on that route. Optional routes are not checked: a message too
// large for one is dropped there, and counted, as they promise nothing.
// Most messages are far below every limit, and cost Fit a few additions.
// A message whose topic is invalid fits: Route drops it.
func (r *Router) Fit(m *bus.Message) error {
	return r.fit(m, false)
}

// fit is Fit; checked says m's topic has passed topics.ValidName. An
// unchecked topic is checked only when a sink must address it, which most
// messages, far below every limit, never need.
func (r *Router) fit(m *bus.Message, checked bool) error {
	smallest := 0
	for _, rt := range r.routes {
		if rt.outbox != nil {
			if lim := rt.sink.Limit().Bytes; lim > 0 && (smallest == 0 || lim < smallest) {
				smallest = lim
			}
		}
	}
	if smallest == 0 || weight(m)+r.topicGrowth <= smallest {
		return nil
	}
	var fields payloadFields
	for _, rt := range r.routes {
		if rt.outbox == nil || !rt.matchesTopic(m.Topic) || len(rt.conds) > 0 && !matches(rt.conds, m.Payload, &fields) {
			continue
		}
		lim := rt.sink.Limit()
		if lim.Bytes == 0 {
			continue
		}
		if !checked {
			if topics.ValidName(m.Topic) != nil {
				return nil
			}
			checked = true
		}
		out, err := rt.address(*m)
		if err != nil {
			continue // match drops it for this route, and says why
		}
		if size := rt.sink.MessageSize(&out); size > lim.Bytes {
			rt.metrics.tooLarge.Inc()
			return &TooLargeError{Route: rt.cfg.Name, Sink: rt.sink.Name(), Topic: m.Topic, Size: size, Limit: lim}
		}
	}
	return nil
}

// weight bounds what any sink makes of m: its payload, topic and headers,
// and fitSlack for the framing.
func weight(m *bus.Message) int {
	n := len(m.Payload) + len(m.Topic) + fitSlack
	for k, v := range m.Headers {
		n += len(k) + len(v) + 4
	}
	return n
}

// match maps msgs onto each route: the messages it takes, addressed for its
// sink. A message with a problem in bad (see route) is rejected by each
// route that would take it.
func (r *Router) match(msgs []bus.Message, bad []error) [][]bus.Message {
	batches := make([][]bus.Message, len(r.routes))
	var fields []payloadFields
	if r.where {
		fields = make([]payloadFields, len(msgs))
	}
	for i, rt := range r.routes {
		for j := range msgs {
			m := &msgs[j]
			if !rt.matchesTopic(m.Topic) {
				continue
			}
			if len(rt.conds) > 0 && !matches(rt.conds, m.Payload, &fields[j]) {
				continue
			}
			var (
				out bus.Message
				err error
			)
			if bad != nil && bad[j] != nil {
				err = bad[j]
			} else {
				out, err = rt.address(*m)
			}
			if err != nil {
				rt.metrics.rejected.Inc()
				rt.log.Error().Err(err).Str("topic", m.Topic).Msg("message cannot be addressed for this sink; dropped for this route")
				continue
			}
			if batches[i] == nil {
				batches[i] = make([]bus.Message, 0, len(msgs)-j)
			}
			batches[i] = append(batches[i], out)
		}
	}
	return batches
}

// Matches reports whether any route takes m: a filter matches its topic
// and the route's `where` holds for its payload. It neither addresses nor
// delivers m, and is cheap enough to ask of every message a broker
// receives, so that an input skips what no route wants.
func (r *Router) Matches(m *bus.Message) bool {
	var fields payloadFields
	for _, rt := range r.routes {
		if rt.matchesTopic(m.Topic) && (len(rt.conds) == 0 || matches(rt.conds, m.Payload, &fields)) {
			return true
		}
	}
	return false
}

// Filters returns the MQTT topic filters of every route, in configuration
// order, as configured (duplicates and overlaps included). An input that
// subscribes to a broker for the routes subscribes to these.
func (r *Router) Filters() []string {
	var all []string
	for _, rt := range r.routes {
		all = append(all, rt.cfg.Filters...)
	}
	return all
}

// Now is the router's clock (Options.Now), for the time an input received
// a message (bus.HeaderReceivedAt).
func (r *Router) Now() time.Time { return r.now() }

func (rt *route) matchesTopic(topic string) bool {
	for _, f := range rt.cfg.Filters {
		if topics.Match(f, topic) {
			return true
		}
	}
	return false
}

// address applies the route's rewrite, then asks the sink where the
// message goes (for NATS sinks, the subject under the route's prefix).
// m's topic is valid (Route and Publisher check it), and so is what the
// rewrite makes of it (its prefixes are checked with the config), unless
// it grows past the longest topic.
func (rt *route) address(m bus.Message) (bus.Message, error) {
	t := m.Topic
	if rw := rt.cfg.Rewrite; rw != nil && (t == rw.From || strings.HasPrefix(t, rw.From+"/")) {
		t = rw.To + t[len(rw.From):]
		if len(t) > topics.MaxTopicBytes {
			return m, fmt.Errorf("%w: %s rewritten to %d bytes, over the limit of %d", bus.ErrInvalid, m.Topic, len(t), topics.MaxTopicBytes)
		}
	}
	dest, err := rt.sink.Address(rt.cfg.SubjectPrefix, t)
	if err != nil {
		return m, err
	}
	m.Topic = dest
	return m, nil
}

// deliverRequired publishes directly while the sink is healthy and nothing
// waits in the outbox; otherwise, or when the sink does not confirm in time,
// it stores the batch in the outbox. Keeping to the outbox while it holds
// anything preserves the order of replay.
func (r *Router) deliverRequired(ctx context.Context, rt *route, batch []bus.Message) error {
	if rt.outbox.Len() == 0 && rt.sink.Ready() {
		err := rt.sink.Publish(ctx, batch...)
		if err == nil {
			rt.metrics.delivered.Add(float64(len(batch)))
			return nil
		}
		if errors.Is(err, bus.ErrInvalid) {
			// No retry can deliver these, and the sink stored the others
			// (bus.Publisher's contract); the outbox would only stall behind them.
			n := refusedCount(err, len(batch))
			rt.metrics.delivered.Add(float64(len(batch) - n))
			rt.metrics.rejected.Add(float64(n))
			rt.log.Error().Err(err).Int("messages", n).Msg("the sink refused messages for good; dropped for this route")
			return nil
		}
		rt.log.Debug().Err(err).Msg("sink did not confirm; keeping the messages in the outbox")
	}
	// The outbox is written even if ctx is done: the sender may have given
	// up, but a durable copy costs little and spares a duplicate later.
	if err := rt.outbox.Append(batch, r.now()); err != nil {
		rt.metrics.refused.Add(float64(len(batch)))
		return fmt.Errorf("route %s: %w: %w", rt.cfg.Name, bus.ErrUnavailable, err)
	}
	rt.metrics.outboxed.Add(float64(len(batch)))
	select {
	case rt.wake <- struct{}{}:
	default:
	}
	return nil
}

// MaxBatch is how many outbox messages one sink publish carries. Inputs
// that gather messages to route them together (the MQTT inputs) route at
// most this many per call of Route.
const MaxBatch = 256

// drain is one emptying of an outbox: from the first message replayed
// after an outage (or a restart) until the outbox is empty, however many
// times the sink goes away meanwhile. It is logged once, at its end.
type drain struct {
	delivered, rejected int
	started             time.Time
	oldest              time.Time // when the first replayed message was stored
}

// done logs a drain that emptied the outbox (or was cut short by
// shutdown, with what is left), and starts the next one.
func (d *drain) done(rt *route, now time.Time, left int) {
	if d.started.IsZero() {
		return
	}
	waited := now.Sub(d.oldest).Round(100 * time.Millisecond)
	ev := rt.log.Info()
	if d.rejected > 0 || left > 0 {
		ev = rt.log.Warn().Int("rejected", d.rejected).Int("left", left)
	}
	ev.Int("messages", d.delivered).
		Float64("waited_seconds", waited.Seconds()).
		Float64("drain_seconds", now.Sub(d.started).Round(time.Millisecond).Seconds()).
		Msgf("replayed %d messages to route %s after %s", d.delivered, rt.cfg.Name, waited)
	*d = drain{}
}

// replay drains a required route's outbox into its sink, oldest first,
// removing messages only once the sink confirmed them. A replayed message
// counts as delivered, as one delivered at once does, and in
// outbox_replayed_total.
func (r *Router) replay(rt *route) {
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var d drain
	defer func() { d.done(rt, r.now(), rt.outbox.Len()) }()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-rt.wake:
		case <-tick.C:
		}
		for rt.outbox.Len() > 0 && rt.sink.Ready() && r.ctx.Err() == nil {
			entries, err := rt.outbox.Peek(MaxBatch)
			if err != nil && len(entries) == 0 {
				rt.log.Error().Err(err).Msg("cannot read the outbox")
				break
			}
			if len(entries) == 0 {
				// Len counts a later append that finished before an
				// earlier one, which Peek holds back until the earlier
				// one is written: wait for its wake.
				break
			}
			if d.started.IsZero() {
				d.started, d.oldest = r.now(), entries[0].EnqueuedAt
			}
			msgs := make([]bus.Message, len(entries))
			for i, e := range entries {
				msgs[i] = e.Msg
			}
			err = rt.sink.Publish(r.ctx, msgs...)
			if err != nil && !errors.Is(err, bus.ErrInvalid) {
				rt.log.Debug().Err(err).Msg("replay failed; retrying")
				if !retry.Wait(r.ctx) {
					return
				}
				continue
			}
			n := 0
			if err != nil {
				n = refusedCount(err, len(entries))
				rt.metrics.rejected.Add(float64(n))
				rt.log.Error().Err(err).Int("messages", n).Msg("the sink refused replayed messages for good; dropped")
			}
			rt.metrics.replayed.Add(float64(len(entries) - n))
			rt.metrics.delivered.Add(float64(len(entries) - n))
			d.delivered += len(entries) - n
			d.rejected += n
			retry.Reset()
			if err := rt.outbox.Remove(entries); err != nil {
				rt.log.Error().Err(err).Msg("cannot remove replayed messages from the outbox; they will be sent again")
				break
			}
		}
		if rt.outbox.Len() == 0 {
			d.done(rt, r.now(), 0)
		}
	}
}

// refusedCount is how many of a batch of n a sink refused for good: what its
// *bus.Rejected says, or all of them when it does not say.
func refusedCount(err error, n int) int {
	var rej *bus.Rejected
	if errors.As(err, &rej) {
		return min(rej.Count, n)
	}
	return n
}

func (r *Router) enqueueOptional(rt *route, batch []bus.Message) {
	select {
	case rt.queue <- batch:
	default:
		rt.metrics.dropped.Add(float64(len(batch)))
	}
}

// sendOptional delivers an optional route's queue; what the sink cannot
// take is dropped and counted, never retried.
func (r *Router) sendOptional(rt *route) {
	for {
		select {
		case <-r.ctx.Done():
			return
		case batch := <-rt.queue:
			if !rt.sink.Ready() {
				rt.metrics.dropped.Add(float64(len(batch)))
				continue
			}
			if err := rt.sink.Publish(r.ctx, batch...); err != nil {
				rt.metrics.dropped.Add(float64(len(batch)))
				rt.log.Debug().Err(err).Msg("optional route dropped messages")
				continue
			}
			rt.metrics.delivered.Add(float64(len(batch)))
		}
	}
}

// Ready reports, per required route whose sink is down, why it is not ready.
// An empty map means every required sink is up.
func (r *Router) Ready() map[string]string {
	down := map[string]string{}
	for _, st := range r.Status() {
		if st.Required && !st.Ready {
			down["route "+st.Route] = "sink " + st.Sink + " is down: " + st.Reason + "; buffering in the outbox"
		}
	}
	return down
}

// RouteStatus is a route's state, for /readyz.
type RouteStatus struct {
	Route    string `json:"-"`
	Sink     string `json:"sink"`
	Required bool   `json:"required"`
	// Ready reports whether the sink is up (sinks.Sink.Ready).
	Ready bool `json:"ready"`
	// Reason says why it is not (sinks.Sink.NotReadyReason): a wrong
	// password, a refused connection.
	Reason string `json:"reason,omitempty"`
	// Outboxed is how many messages wait in a required route's outbox.
	Outboxed int `json:"outbox_messages"`
}

// Status reports every route's state, in configuration order. Only
// required routes make the bridge unready.
func (r *Router) Status() []RouteStatus {
	out := make([]RouteStatus, 0, len(r.routes))
	for _, rt := range r.routes {
		st := RouteStatus{Route: rt.cfg.Name, Sink: rt.sink.Name(), Required: rt.outbox != nil, Ready: rt.sink.Ready()}
		if !st.Ready {
			if st.Reason = rt.sink.NotReadyReason(); st.Reason == "" {
				st.Reason = "not ready" // it came up between the two questions
			}
		}
		if rt.outbox != nil {
			st.Outboxed = rt.outbox.Len()
		}
		out = append(out, st)
	}
	return out
}

// Close stops the replayers and closes the outboxes. Messages in the
// outboxes stay on disk for the next start.
func (r *Router) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.cancel()
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		}
		r.closeOutboxes()
	})
	return nil
}

func (r *Router) closeOutboxes() {
	for _, rt := range r.routes {
		if rt.outbox != nil {
			if err := rt.outbox.Close(); err != nil {
				rt.log.Error().Err(err).Msg("closing the outbox")
			}
		}
	}
}
