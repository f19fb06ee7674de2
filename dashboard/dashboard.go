package dashboard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/metric"
	"github.com/opsfirehose/firehose/topics"
)

// Source is where the dashboard reads the bus, as an anonymous subscriber.
//
// Subscribe calls fn with what an anonymous MQTT subscriber of filter would
// get: first the retained messages (Retain set), on the caller's goroutine
// before it returns, then each message as it is published (Retain false), on
// the publisher's goroutine, so fn must not block and must copy Payload to
// keep it. id is unique per subscription. The returned function ends it.
// *broker.Broker is a Source.
type Source interface {
	Subscribe(id int, filter string, fn func(bus.Message)) (unsubscribe func(), err error)
}

// History is the bus's recent past, which the Ansible and Changes views
// fill from when the dashboard starts, so that a restart loses nothing.
//
// Follow hands fn, in the order they were published, the messages of
// filters received since since (replayed set; with last above 0, only the
// last so many of them), calls replayed once, then
// hands fn every new one as it is published (replayed false), with no gap
// and no duplicate between the two, until ctx is done. fn is called on
// one goroutine and must not block for long. A history that cannot be read
// skips to the live part (replayed says why); Follow returns an error only
// when fn fell too far behind, and then the caller follows again.
//
// Settle waits, until ctx is done, until Follow's fn has been handed every
// message published before the call that Follow's filters match (at once
// when no Follow is under way): a snapshot then holds what was published
// before it was asked for, though fn runs on a goroutine of its own.
type History interface {
	Follow(ctx context.Context, filters []string, since time.Time, last int, fn func(m bus.Message, received time.Time, replayed bool), replayed func(error)) error
	Settle(ctx context.Context)
}

// Prefixes are the sources' configured first topic levels; an empty one
// means the source's default.
type Prefixes struct {
	Chef, Ansible, ConfigDB, Gerrit, Launchpad, Subunit string
}

func (p *Prefixes) setDefaults() {
	for _, d := range []struct {
		v   *string
		def string
	}{
		{&p.Chef, topics.DefaultChefPrefix}, {&p.Ansible, topics.DefaultAnsiblePrefix},
		{&p.ConfigDB, topics.DefaultConfigDBPrefix}, {&p.Gerrit, topics.DefaultGerritPrefix},
		{&p.Launchpad, topics.DefaultLaunchpadPrefix}, {&p.Subunit, topics.DefaultSubunitPrefix},
	} {
		if *d.v == "" {
			*d.v = d.def
		}
	}
}

// Options carry what the dashboard needs besides its config section.
type Options struct {
	// Source is the bus. Nil means the dashboard may show no bus data, and
	// Unavailable says why; the page then shows only the Health view.
	Source      Source
	Unavailable string
	// History, when not nil, fills the Ansible and Changes views at Start
	// with what they would have shown (dashboard.history back), and
	// then brings their live messages instead of Source.
	History History
	// Gatherer is the registry /metrics serves, for the Health view.
	Gatherer prometheus.Gatherer
	// Registerer receives the dashboard's own metrics; nil means none.
	Registerer prometheus.Registerer
	Routes     []Route
	// SinkReasons says why route sinks are down, by route name (the
	// reasons /readyz gives: a wrong password, a refused connection), for
	// the Health view; nil means the view shows only up or down.
	SinkReasons func() map[string]string
	Prefixes    Prefixes
	Logger      zerolog.Logger
}

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("dashboard closed")

// Dashboard is the page and its API. New prepares it, Register adds its
// endpoints, Start subscribes to the bus (after the broker started, so that
// restored retained statuses are read), Close ends every stream.
type Dashboard struct {
	cfg  Config
	opts Options
	log  zerolog.Logger

	fleet   *fleet
	plays   *plays
	changes *changes
	filters map[string][]string // each view's live filters
	// aggregated are the filters the aggregator reads, each with its kind.
	aggregated []struct{ kind, filter string }

	in      chan item
	ids     atomic.Int64
	streams chan struct{} // a slot per open stream
	// readers are the open streams, which deliver hands the topics the
	// aggregator reads, after the aggregator: copied on write, so deliver
	// reads them without a lock.
	readersMu sync.Mutex
	readers   atomic.Pointer[[]*reader]

	streamsOpen prometheus.Gauge
	dropped     *prometheus.CounterVec // by who: "aggregator", "stream"

	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	unsub   []func()
	started bool
}

// item is one message for the aggregator, tagged with what it is.
type item struct {
	kind     string // "chef", "ansible", "configdb", "gerrit", "launchpad", "subunit"
	topic    string
	payload  []byte
	received time.Time
	// settled, when set, makes the item a marker, not a message: the
	// aggregator closes it once it has applied every item before it.
	settled chan struct{}
}

// New validates cfg and prepares the dashboard. Nothing is subscribed until Start.
func New(cfg Config, opts Options) (*Dashboard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dashboard config: %w", err)
	}
	opts.Prefixes.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dashboard{
		cfg: cfg, opts: opts, log: opts.Logger.With().Str("component", "dashboard").Logger(),
		fleet: newFleet(), plays: newPlays(), changes: &changes{},
		in:      make(chan item, 8192),
		streams: make(chan struct{}, cfg.MaxStreams),
		streamsOpen: metric.Gauge("firehose_dashboard_streams",
			"Server-Sent Event streams open (the dashboard's pages and /api/v1/stream clients)."),
		dropped: metric.CounterVec("firehose_dashboard_messages_dropped_total",
			"Messages the dashboard dropped because a stream (or its own aggregator) fell behind; publishers never wait for it.", "consumer"),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
	p := opts.Prefixes
	d.filters = map[string][]string{
		"fleet":   {p.Chef + "/+/+/status"},
		"ansible": {p.Ansible + "/playbook/#"},
		"changes": {p.ConfigDB + "/#", p.Gerrit + "/#", p.Launchpad + "/#", p.Subunit + "/#"},
	}
	d.aggregated = []struct{ kind, filter string }{
		{"chef", d.filters["fleet"][0]},
		{"ansible", d.filters["ansible"][0]},
		{"configdb", d.filters["changes"][0]},
		{"gerrit", d.filters["changes"][1]},
		{"launchpad", d.filters["changes"][2]},
		{"subunit", d.filters["changes"][3]},
	}
	d.ids.Store(1 << 20) // clear of any other inline subscriber's small ids
	if opts.Registerer != nil {
		if err := metric.Register(opts.Registerer, d.streamsOpen, d.dropped); err != nil {
			cancel()
			return nil, fmt.Errorf("dashboard metrics: %w", err)
		}
	}
	return d, nil
}

// Start subscribes the aggregator to the bus, which hands the streams what
// it reads (deliver). It returns once the retained messages (every node's
// status) are queued for the aggregator; ctx bounds the start, not the
// dashboard's life, which Close ends.
func (d *Dashboard) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dashboard: start: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return ErrClosed
	}
	if d.started {
		return nil
	}
	d.started = true
	go d.aggregate()
	if d.opts.Source == nil {
		return nil
	}
	// The broker matches each message against the aggregator's filters, so
	// a message no view aggregates costs the dashboard nothing while no
	// stream is open.
	var followed []int // the aggregator's filters the history brings
	for i, a := range d.aggregated {
		if d.opts.History != nil && d.cfg.History > 0 && a.kind != "chef" {
			followed = append(followed, i) // the fleet is the retained statuses
			continue
		}
		unsub, err := d.opts.Source.Subscribe(int(d.ids.Add(1)), a.filter, func(m bus.Message) { d.deliver(i, m) })
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		d.unsub = append(d.unsub, unsub)
	}
	if len(followed) == 0 {
		return nil
	}
	replayed := make(chan struct{})
	go d.followHistory(followed, replayed)
	select {
	case <-replayed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dashboard: start: filling the views from the history: %w", ctx.Err())
	}
}

// followHistory brings the aggregator the messages of its filters in
// followed from the history: those of the last dashboard.history, then
// each as it is published, until Close. It closes replayed once the
// history is queued for the aggregator (or could not be read). Should it
// fall behind, it follows again from the last message it had.
func (d *Dashboard) followHistory(followed []int, replayed chan struct{}) {
	filters := make([]string, len(followed))
	for j, i := range followed {
		filters[j] = d.aggregated[i].filter
	}
	since := time.Now().Add(-d.cfg.History)
	var once sync.Once
	done := func(err error) {
		if err != nil {
			d.log.Warn().Err(err).Msg("the Ansible and Changes views start without the bus's history")
		}
		once.Do(func() { close(replayed) })
	}
	for {
		err := d.opts.History.Follow(d.ctx, filters, since, 0, func(m bus.Message, received time.Time, replay bool) {
			since = received
			for _, i := range followed {
				if topics.Match(d.aggregated[i].filter, m.Topic) {
					d.deliverAt(i, m, received, replay)
					return
				}
			}
		}, done)
		if d.ctx.Err() != nil {
			done(nil)
			return
		}
		d.log.Warn().Err(err).Msg("the dashboard fell behind the bus's history; following again")
		select {
		case <-d.ctx.Done():
			return
		case <-time.After(time.Second): // not in a tight loop while the machine is overloaded
		}
	}
}

// deliver hands a message of the aggregator's filter i to the aggregator,
// then to the open streams that match it, in that order and on the
// publisher's goroutine: a stream can see a message the aggregator reads
// only once the aggregator was handed it, so a snapshot asked for then
// (settle) holds it. A stream's own subscription would be called in the
// broker's map order, before or after the aggregator's, so a stream's own
// subscriptions pass over the topics that the aggregator reads (aggregates).
// It must not block: the aggregator and each stream have a bounded queue,
// and drop and count beyond it.
func (d *Dashboard) deliver(i int, m bus.Message) { d.deliverAt(i, m, time.Now(), m.Retain) }

// deliverAt is deliver of a message received at received; a replayed one
// (retained, or from the history) is waited for by the aggregator and
// reaches no stream.
func (d *Dashboard) deliverAt(i int, m bus.Message, received time.Time, replayed bool) {
	it := item{kind: d.aggregated[i].kind, topic: m.Topic, payload: append([]byte(nil), m.Payload...), received: received}
	if replayed { // retained messages on Start's goroutine, or the history: wait rather than lose a node or a play
		select {
		case d.in <- it:
		case <-d.ctx.Done():
		}
		return // a stream replays its own
	}
	select {
	case d.in <- it:
	default:
		d.dropped.WithLabelValues("aggregator").Inc()
	}
	for _, a := range d.aggregated[:i] {
		if topics.Match(a.filter, m.Topic) {
			return // the streams got it from that filter's delivery: once is enough
		}
	}
	if rs := d.readers.Load(); rs != nil {
		for _, r := range *rs {
			if r.matches(m.Topic) {
				r.offer(m)
			}
		}
	}
}

// aggregates reports whether the aggregator reads topic, which then reaches
// the streams through deliver.
func (d *Dashboard) aggregates(topic string) bool {
	for _, a := range d.aggregated {
		if topics.Match(a.filter, topic) {
			return true
		}
	}
	return false
}

// reader is a stream's live subscription through deliver.
type reader struct {
	filters []string
	offer   func(bus.Message) // must not block
}

// matches says whether any of the reader's filters matches topic, so that a
// message matching several comes once.
func (r *reader) matches(topic string) bool {
	for _, f := range r.filters {
		if topics.Match(f, topic) {
			return true
		}
	}
	return false
}

// addReader makes deliver hand r the messages it matches, until the
// returned function is called.
func (d *Dashboard) addReader(r *reader) (remove func()) {
	d.readersMu.Lock()
	defer d.readersMu.Unlock()
	var rs []*reader
	if old := d.readers.Load(); old != nil {
		rs = append(rs, *old...)
	}
	rs = append(rs, r)
	d.readers.Store(&rs)
	return func() {
		d.readersMu.Lock()
		defer d.readersMu.Unlock()
		old := *d.readers.Load()
		rs := make([]*reader, 0, len(old))
		for _, o := range old {
			if o != r {
				rs = append(rs, o)
			}
		}
		d.readers.Store(&rs)
	}
}

// Close ends the subscriptions and every open stream, and waits, until ctx
// is done, for the aggregator to stop; it is idempotent.
func (d *Dashboard) Close(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return nil
	}
	for _, u := range d.unsub {
		u()
	}
	d.cancel()
	if d.started {
		select {
		case <-d.done:
		case <-ctx.Done():
			return fmt.Errorf("dashboard: close: %w", ctx.Err())
		}
	}
	return nil
}

// aggregate applies messages to the views' state, one at a time.
func (d *Dashboard) aggregate() {
	defer close(d.done)
	for {
		select {
		case <-d.ctx.Done():
			return
		case it := <-d.in:
			if it.settled != nil {
				close(it.settled)
				continue
			}
			d.apply(it)
		}
	}
}

// settleHistoryWait bounds how long settle waits for the history's
// follower to hand the aggregator what was published before it.
const settleHistoryWait = 5 * time.Second

// settle waits, until ctx is done, for the aggregator to apply every
// message it was handed before the call. A view refreshes its snapshot when
// its stream shows a message, and deliver hands each message to the
// aggregator before any stream, so with this wait the snapshot holds that
// message (without it, on a busy machine, a Gerrit comment never appeared).
func (d *Dashboard) settle(ctx context.Context) {
	d.mu.Lock()
	started := d.started
	d.mu.Unlock()
	if !started {
		return
	}
	if d.opts.History != nil {
		// The messages the history brings reach the aggregator from its
		// follower's goroutine: they are handed over first. A follow that
		// is replaying again (after falling behind) is waited for a while,
		// not for as long as a slow store would make a request hang.
		hctx, cancel := context.WithTimeout(ctx, settleHistoryWait)
		d.opts.History.Settle(hctx)
		cancel()
	}
	settled := make(chan struct{})
	select {
	case d.in <- item{settled: settled}:
	case <-ctx.Done():
		return
	case <-d.ctx.Done():
		return
	}
	select {
	case <-settled:
	case <-ctx.Done():
	case <-d.ctx.Done():
	}
}

func (d *Dashboard) apply(it item) {
	p := d.opts.Prefixes
	now := it.received.UnixMilli()
	switch it.kind {
	case "chef":
		rest := levels(it.topic, p.Chef) // <org>/<node>/status
		if len(rest) != 3 {
			return
		}
		if len(it.payload) == 0 {
			d.fleet.set(it.topic, nil)
			return
		}
		if n, ok := parseNode(it.topic, rest[0], rest[1], it.payload, it.received); ok {
			d.fleet.set(it.topic, n)
		}
	case "ansible":
		rest := levels(it.topic, p.Ansible) // playbook/<uuid>/...
		if len(rest) < 4 || rest[0] != "playbook" {
			return
		}
		id, kind, host, status := rest[1], rest[2], "", ""
		switch {
		case kind == "action" && rest[3] == "start":
			kind = "start"
		case kind == "action" && rest[3] == "finish":
			kind = "finish"
			if len(rest) > 4 {
				status = rest[4]
			}
		case kind == "stats":
			host = rest[3]
		case kind == "task":
			host = rest[3]
			if len(rest) > 4 {
				status = rest[4]
			}
		default:
			return
		}
		d.plays.apply(it.topic, id, kind, host, status, it.payload, now)
	default:
		prefix := map[string]string{"configdb": p.ConfigDB, "gerrit": p.Gerrit, "launchpad": p.Launchpad, "subunit": p.Subunit}[it.kind]
		d.changes.add(summarise(it.kind, it.topic, levels(it.topic, prefix), it.payload, now))
	}
}

// levels is what follows prefix in topic, unescaped (topics.Parse); a level
// a third party escaped badly is shown as it came.
func levels(topic, prefix string) []string {
	out, err := topics.Parse(topic, prefix)
	if errors.Is(err, topics.ErrOtherPrefix) {
		return nil
	}
	return out
}
