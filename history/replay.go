package history

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opsfirehose/firehose/topics"
)

// Query says which messages to read back.
type Query struct {
	// Filters are MQTT topic filters; a message matching any is read.
	// They mean what they mean on the bus ("#" leaves out $ topics).
	Filters []string
	// Since and Until bound the messages' store time; a zero Since means
	// the oldest kept, a zero Until means now (and Follow goes on live).
	Since, Until time.Time
	// Limit, when above zero, ends the replay after so many messages.
	Limit int
	// Last, when above zero, replays only the last so many messages that
	// match (and at most 64 MiB of their payloads), for a view that shows
	// the latest rows: the window from Since is read, and its tail kept.
	Last int
	// BestEffort makes Follow go on live when the store cannot be read,
	// with Result.ReplayErr saying why the replay is missing or cut short:
	// for live views, which would rather lose the past than the present.
	BestEffort bool
	// Sync, when set, lets the caller of Follow wait for its live part to
	// catch up (Sync.Wait).
	Sync *Sync
}

// Sync lets the caller of Follow wait until fn has been handed every
// message recorded before a point: a view that Follow fills can then answer
// a request with what was published before it, though fn runs on a
// goroutine of its own. One Sync serves one Follow at a time.
type Sync struct {
	mu sync.Mutex
	f  *follower // the Follow under way, nil between them
}

// Wait waits, until ctx is done, until the Follow under way has handed fn
// every message that its filters match and that was recorded before the
// call (its live part comes after the replay: Wait waits for that too), or
// has ended. It returns at once when no Follow is under way, and ctx's
// error when ctx ends first.
func (s *Sync) Wait(ctx context.Context) error {
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f == nil {
		return nil
	}
	f.mu.Lock()
	target := f.offered // Record offers under History.mu, before it returns
	f.mu.Unlock()
	for {
		f.mu.Lock()
		done, progress := f.handed >= target || f.ended, f.progress
		f.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// follow makes f the Follow that Wait waits for.
func (s *Sync) follow(f *follower) {
	if s != nil {
		s.mu.Lock()
		s.f = f
		s.mu.Unlock()
	}
}

// unfollow ends what follow began, unless another Follow has begun since.
func (s *Sync) unfollow(f *follower) {
	if s != nil {
		s.mu.Lock()
		if s.f == f {
			s.f = nil
		}
		s.mu.Unlock()
	}
}

// Record is one message read back.
type Record struct {
	// ID is the message's de-duplication id (its header's Nats-Msg-Id, or
	// one the history gave it): the same for a resent message, unique
	// otherwise.
	ID     string
	Topic  string
	Source string
	// Time is when the bridge received the message.
	Time time.Time
	// Payload is read only: the live followers of a message share one.
	Payload []byte
	// Live is set for messages Follow hands on after the replay.
	Live bool
}

// Result says how a replay ended.
type Result struct {
	// Replayed counts the messages read from the store.
	Replayed int
	// Truncated is set when Limit ended the replay before the last match.
	Truncated bool
	// ReplayErr is why a BestEffort replay is missing or cut short.
	ReplayErr error
}

// Bounds of the live messages waiting for one follower.
const (
	maxFollowerBuffer = 1 << 16
	maxFollowerBytes  = 32 << 20
)

// follower is a live reader of Record's messages: they wait in pending,
// under mu, until it takes them.
type follower struct {
	filters []string
	mu      sync.Mutex
	pending []entry
	bytes   int
	ids     map[liveKey]int // the messages in pending, while the replay needs them; nil after
	behind  bool            // pending overflowed: the follower ends
	wake    chan struct{}
	// For Sync: the messages put in pending and those handed to fn since
	// the follower began, whether it ended, and a channel closed when
	// either changes.
	offered, handed uint64
	ended           bool
	progress        chan struct{}
}

// newFollower returns a follower of filters, in its replay: it notes the
// messages it holds live, for the replay to leave to them (live).
func newFollower(filters []string) *follower {
	return &follower{filters: filters, ids: map[liveKey]int{}, wake: make(chan struct{}, 1), progress: make(chan struct{})}
}

// advance counts n more messages handed to fn, or the follower's end.
func (f *follower) advance(n int, end bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handed += uint64(n)
	f.ended = f.ended || end
	close(f.progress)
	f.progress = make(chan struct{})
}

// offer queues e, which f's filters match; called under History.mu, it
// never blocks.
func (f *follower) offer(e entry) {
	f.mu.Lock()
	switch {
	case f.behind:
	case len(f.pending) >= maxFollowerBuffer || f.bytes+len(e.payload) > maxFollowerBytes:
		f.behind, f.pending, f.ids = true, nil, nil
	default:
		f.pending = append(f.pending, e)
		f.offered++
		f.bytes += len(e.payload)
		if f.ids != nil {
			f.ids[liveKey{e.id, e.topic}]++
		}
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// liveKey is what tells a stored message that is also live: its id and
// its topic. An id alone is the publisher's to choose (an MQTT client's
// Nats-Msg-Id), and a publisher could make a follower's replay skip
// another's message of the same id, on a topic it may not publish on.
type liveKey struct{ id, topic string }

// live reports whether the replay should leave the message of id on topic
// to the live messages.
func (f *follower) live(id, topic string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[liveKey{id, topic}] > 0
}

// take returns what is pending.
func (f *follower) take() ([]entry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pending
	f.pending, f.ids, f.bytes = nil, nil, 0
	return p, f.behind
}

func matchAny(filters []string, topic string) bool {
	for _, flt := range filters {
		if topics.Match(flt, topic) {
			return true
		}
	}
	return false
}

// Replay hands fn, in the order they were stored, the stored messages that
// q matches, up to the last one recorded when it was called. Messages are
// stored in the order they were recorded, except that an MQTT client's
// messages wait in its Stage (a few milliseconds) and are stored together:
// each client's keep the order it published them in. It ends early with fn's
// error.
func (h *History) Replay(ctx context.Context, q Query, fn func(Record) error) (Result, error) {
	h.handOverAll()
	h.mu.Lock()
	n := h.accepted
	h.mu.Unlock()
	if err := h.caughtUp(ctx, n); err != nil {
		return Result{}, err
	}
	return h.replay(ctx, q, nil, fn)
}

// Follow replays as Replay does, then, unless q has an Until, hands fn
// every matching message as it is recorded, until ctx is done: with no gap
// and no duplicate between the two, and in the order Record was handed
// them. The live part does not depend on the store: a message left out of
// the history still comes. It returns ctx's error, fn's, or an error
// wrapping ErrBehind when fn is too slow for the bus. A replay that Limit
// cut does not go on live, as that would leave a gap: Result says so.
// replayed, when not nil, is called between the replay and the live part
// (and is the place to flush what the replay wrote).
func (h *History) Follow(ctx context.Context, q Query, fn func(Record) error, replayed func(Result) error) (Result, error) {
	if !q.Until.IsZero() {
		res, err := h.Replay(ctx, q, fn)
		if err == nil && replayed != nil {
			err = replayed(res)
		}
		return res, err
	}
	// Live first, into a buffer; then the store up to where live began:
	// every message accepted before the follower is in the store (or lost)
	// once the writer has caught up, and those after it, which the store
	// may hold too, are left to the live part by their id and topic.
	f := newFollower(q.Filters)
	h.mu.Lock()
	h.followers[f] = struct{}{}
	h.nFollowers.Add(1)
	h.setFollowedLocked()
	h.mu.Unlock()
	// The stages record what f's filters match through the queue from
	// here on, and what they staged before is in the queue once
	// handOverAll returns: n counts it. A stage that held a pack when
	// handOverAll looked finishes the message it was recording before
	// handOverAll takes its lock, and one that begins a pack later asks
	// the filters again as it does (restage). A message recorded between
	// the two is both live and in the store, and its id and topic leave
	// it to the live part.
	h.handOverAll()
	h.mu.Lock()
	n := h.accepted
	h.mu.Unlock()
	q.Sync.follow(f)
	defer func() {
		h.mu.Lock()
		delete(h.followers, f)
		h.nFollowers.Add(-1)
		h.setFollowedLocked()
		h.mu.Unlock()
		f.advance(0, true)
		q.Sync.unfollow(f)
	}()
	var res Result
	err := h.caughtUp(ctx, n)
	if err == nil {
		res, err = h.replay(ctx, q, f, fn)
	}
	if q.BestEffort && errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
		res.ReplayErr, err = err, nil
	}
	if err == nil && replayed != nil {
		err = replayed(res)
	}
	if err != nil || res.Truncated {
		return res, err
	}
	for {
		pending, behind := f.take()
		if behind {
			return res, fmt.Errorf("history: live messages: %w", ErrBehind)
		}
		for i := range pending {
			e := &pending[i]
			if err := fn(Record{ID: e.id, Topic: e.topic, Source: e.source, Time: e.time(), Payload: e.payload, Live: true}); err != nil {
				return res, err
			}
		}
		if len(pending) > 0 {
			f.advance(len(pending), false)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-f.wake:
		}
	}
}

// replay reads the store up to its last message now, skipping what f (when
// not nil) holds as live.
func (h *History) replay(ctx context.Context, q Query, f *follower, fn func(Record) error) (Result, error) {
	var res Result
	st, err := h.st.state(ctx)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	last := st.LastSeq
	if st.Msgs == 0 {
		return res, nil
	}
	cc := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubjects:    packSubjects(h.cfg.SubjectPrefix, q.Filters),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if !q.Since.IsZero() {
		since := q.Since
		cc.DeliverPolicy, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	cons, err := h.st.js.CreateConsumer(cctx, h.cfg.Stream, cc)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer cancel()
		_ = h.st.js.DeleteConsumer(dctx, h.cfg.Stream, cons.CachedInfo().Name)
	}()
	if cons.CachedInfo().NumPending == 0 {
		return res, nil
	}
	var tail *ring
	if q.Last > 0 {
		tail = &ring{max: q.Last}
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		seq := meta.Sequence.Stream
		if seq > last || !q.Until.IsZero() && meta.Timestamp.After(q.Until) {
			return res, tail.emit(&res, fn)
		}
		var ferr error
		done := false
		// A message that is not a pack of this version's is skipped, as
		// one that no filter matches would be.
		_ = unpack(m.Data(), func(r Record) bool {
			if !matchAny(q.Filters, r.Topic) || f != nil && f.live(r.ID, r.Topic) {
				return true
			}
			switch {
			case tail != nil:
				tail.add(r)
			case q.Limit > 0 && res.Replayed >= q.Limit:
				res.Truncated, done = true, true
				return false
			default:
				if ferr = fn(r); ferr != nil {
					return false
				}
				res.Replayed++
			}
			return true
		})
		if ferr != nil {
			return res, ferr
		}
		if done {
			return res, nil
		}
		if seq == last || meta.NumPending == 0 {
			return res, tail.emit(&res, fn)
		}
	}
}

// maxTailBytes bounds the payloads a Query.Last replay holds.
const maxTailBytes = 64 << 20

// ring keeps the last max records added, and at most maxTailBytes of
// their payloads.
type ring struct {
	max     int
	records []Record
	bytes   int
}

func (t *ring) add(r Record) {
	r.Payload = append([]byte(nil), r.Payload...) // the consumer reuses nothing, but the message goes
	t.records = append(t.records, r)
	t.bytes += len(r.Payload)
	drop := 0
	for len(t.records)-drop > t.max || t.bytes > maxTailBytes && drop < len(t.records)-1 {
		t.bytes -= len(t.records[drop].Payload)
		drop++
	}
	if drop > 0 {
		t.records = append(t.records[:0], t.records[drop:]...)
	}
}

// emit hands fn what the ring kept; a nil ring has nothing.
func (t *ring) emit(res *Result, fn func(Record) error) error {
	if t == nil {
		return nil
	}
	for _, r := range t.records {
		if err := fn(r); err != nil {
			return err
		}
		res.Replayed++
	}
	return nil
}
