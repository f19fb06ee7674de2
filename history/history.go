package history

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
	"github.com/opsfirehose/firehose/topics"
)

// Errors of Replay and Follow.
var (
	// ErrUnavailable means the store cannot be read now.
	ErrUnavailable = errors.New("history unavailable")
	// ErrBehind means a follower's live messages outgrew its buffer while it
	// replayed or wrote: it would have a gap, so it ends instead.
	ErrBehind = errors.New("fell behind the live messages")
)

// maxBatch is how many messages the writer packs before it waits for the
// packs' acks; after a message, it waits packLinger for others to come
// before it packs them, unless its last batch was full. A pass of the
// writer costs about the same whatever it takes (waking, handing the
// stages' packs over, a round trip to the store, and JetStream's work per
// pack), so under load it must take much at once: with 1,024, the writer
// took every pass full at the broker's 450,000 messages a second, never
// lingered, and handed the stages' packs over at 330 messages each; the
// bridge spent 0.3-0.5 µs a message more than with 4,096 (issue 27).
const (
	maxBatch   = 4096
	packLinger = 10 * time.Millisecond
)

// History keeps the bus's history: Record takes each message from the
// publish path, without waiting, into a bounded queue that one goroutine
// writes to the store; Replay and Follow read it back.
//
// Record never blocks and never fails: a message that the queue has no room
// for, or that the store refuses or cannot take (down, slow, full), is left
// out of the history, counted and logged, and Status says the history is
// degraded. Live followers get every message Record is handed, whether or
// not the store took it.
type History struct {
	cfg Config
	// keepsAll says the filters have "#", which keeps every topic but
	// those that begin with '$'.
	keepsAll bool
	log      zerolog.Logger
	st       *store
	metrics  *metrics
	// idPrefix begins the ids of messages that came without one, with a
	// boot id that makes them unique across restarts (idGen).
	idPrefix string

	mu sync.Mutex // orders the queue and the followers' buffers alike
	// queue holds what waits to be written, at most cfg.QueueSize
	// messages, packed as they come (packQueue); the writer swaps it for
	// an empty one. queued tells the writer it is not empty.
	queue    packQueue
	free     packBuffers // the buffers of written packs, for Record
	queued   chan struct{}
	accepted uint64 // messages put in queue
	nextID   uint64
	// packLimit bounds a pack's data: what the server's max_payload leaves
	// (the writer's, read by Record).
	packLimit atomic.Int64
	batches   uint64 // batches sent, the writer's: each has its reply subject
	// The writer's: the number of the next message stored (counted over the
	// stream, so that its state counts messages: pack.go), whether it was
	// read from the store yet, the message it sends a pack in and the
	// room it compresses packs in.
	nextNumber atomic.Uint64
	numbered   bool
	packMsg    *nats.Msg
	compressed []byte
	followers  map[*follower]struct{}
	// nFollowers is len(followers), read without the lock;
	// followedFilters are their filters, for stages (followed).
	nFollowers      atomic.Int32
	followedFilters atomic.Pointer[followedFilters]
	// holding are the publishers' stages (stage.go) that hold a pack, at
	// most half of queue_bytes over a pack's reservation (restage); listed
	// those that began a pack since the writer last handed theirs over,
	// and spareListed the writer's room for the next list. staged is the
	// queue bytes the stages' packs reserve.
	holding     map[*Stage]struct{}
	listed      []*Stage
	spareListed []*Stage
	staged      int
	// frameBuffers are the buffers of the frames of stages whose pack
	// was handed over, for stages that begin one.
	frameBuffers [][]byte

	// clock is the time that stamps messages without one (an MQTT
	// publisher's), while the ticker (tick) runs: 0 when it does not.
	// clockUsed says a message read it since the last tick.
	clock     atomic.Int64 // Unix nanoseconds
	ticking   atomic.Bool
	clockUsed atomic.Bool

	written  atomic.Uint64 // entries taken from queue and finished (stored or lost)
	progress atomic.Pointer[chan struct{}]

	degradedMu sync.Mutex
	degraded   string    // why, or "" when healthy
	loggedAt   time.Time // when degraded was last logged
	// degradedReason is the lost reason degraded says.
	degradedReason string

	stop    chan struct{}
	done    chan struct{}
	closeMu sync.Once
}

// entry is one message on its way to the store and to the live followers.
type entry struct {
	id, topic, source string
	received          string    // RFC 3339, as the message's header had it
	at                time.Time // when it came, when received is empty
	payload           []byte
}

// time is when the bridge received the message.
func (e *entry) time() time.Time {
	if e.received != "" {
		if t, err := time.Parse(time.RFC3339Nano, e.received); err == nil {
			return t
		}
	}
	return e.at
}

// Options carry what History needs besides its config section.
type Options struct {
	// DataDir holds the embedded server's store, under history/.
	DataDir string
	// Sinks are the configured sinks; history.sink names one of them.
	Sinks map[string]sinkconfig.Config
	// Registerer receives the history's metrics; nil means none.
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
}

// Open opens the store (starting the embedded nats-server, or connecting to
// history.sink's servers in the background) and starts the writer. ctx
// bounds the opening.
func Open(ctx context.Context, cfg Config, opts Options) (*History, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("history config: %w", err)
	}
	var (
		st  *store
		err error
	)
	if cfg.Sink != "" {
		sc, ok := opts.Sinks[cfg.Sink]
		if !ok || sc.Type != sinkconfig.TypeJetStream && sc.Type != sinkconfig.TypeNATS {
			return nil, fmt.Errorf("history.sink: %q is not a jetstream (or nats) entry of sinks", cfg.Sink)
		}
		st, err = openSink(cfg, sc, opts.Logger.With().Str("component", "history").Logger())
	} else {
		st, err = openEmbedded(ctx, cfg, storeDir(opts.DataDir))
	}
	if err != nil {
		return nil, err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	h := &History{
		cfg:       cfg,
		keepsAll:  slices.Contains(cfg.Filters, "#"),
		log:       opts.Logger.With().Str("component", "history").Logger(),
		st:        st,
		idPrefix:  idPrefix(hex.EncodeToString(id[:])),
		queued:    make(chan struct{}, 1),
		followers: map[*follower]struct{}{},
		holding:   map[*Stage]struct{}{},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		packMsg: &nats.Msg{Header: nats.Header{
			// Set directly: the keys are canonical already.
			headerPackFirst: {""}, headerPackCount: {""},
		}},
	}
	h.progress.Store(new(make(chan struct{})))
	h.nextNumber.Store(1)
	h.setPackLimit()
	h.metrics = newMetrics(h)
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(h.metrics); err != nil {
			st.close()
			return nil, fmt.Errorf("history metrics: %w", err)
		}
	}
	if _, _, first, err := h.bounds(ctx); err == nil && cfg.Sink == "" {
		h.metrics.firstSeq = first // what max_age and max_bytes drop is counted from here
	}
	go h.write()
	return h, nil
}

// Keeps reports whether topic is one the history keeps (history.filters).
func (h *History) Keeps(topic string) bool {
	if h.keepsAll && (topic == "" || topic[0] != '$') {
		return true // the default, asked for each message at the broker's rate
	}
	for _, f := range h.cfg.Filters {
		if topics.Match(f, topic) {
			return true
		}
	}
	return false
}

// Record hands m to the history and to the live followers, without
// waiting: it is called in the publish path. m's headers give its
// de-duplication id, source and time; a message without an id gets one.
// Payload is copied.
func (h *History) Record(m *bus.Message) {
	h.RecordFields(m.Topic, m.Payload, m.Headers[bus.HeaderMsgID], m.Headers[bus.HeaderSource], m.Headers[bus.HeaderReceivedAt])
}

// RecordFields is Record for a message given by its parts, as a broker hook
// has them: id, source and receivedAt (RFC 3339) may be empty. It copies
// the message into the queue's buffer, and allocates nothing for it (but
// for the live followers, when there are any): it runs on every publisher's
// goroutine, at the broker's rate.
func (h *History) RecordFields(topic string, payload []byte, id, source, receivedAt string) {
	keep := h.Keeps(topic)
	if !keep && h.nFollowers.Load() == 0 {
		return // live followers get every message, kept or not
	}
	e := entry{id: id, topic: topic, source: source, received: receivedAt, payload: payload}
	if receivedAt == "" && keep {
		e.at = h.now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recordLocked(&e, keep)
}

// recordLocked queues e when keep, and offers it to the live followers
// whose filters match it. Called under h.mu.
func (h *History) recordLocked(e *entry, keep bool) {
	gen := idGen{prefix: h.idPrefix}
	if e.id == "" {
		h.nextID++ // under the lock: an atomic shared by every publisher costs more
		gen.n = h.nextID
	}
	if keep {
		h.enqueue(e, gen)
	}
	if len(h.followers) == 0 {
		return // a range over the empty map still costs its iterator's set-up, at the broker's rate
	}
	copied := false
	shared := *e
	for f := range h.followers {
		if !matchAny(f.filters, e.topic) {
			continue
		}
		if !copied {
			// Followers keep their entries: they share a copy, made
			// only for a message one of them wants (the dashboard
			// follows Ansible and ConfigDB, not Chef's large runs).
			if shared.id == "" {
				shared.id = gen.String()
			}
			if shared.received == "" && !keep {
				// Not stamped by the caller: a message the history
				// does not keep ($SYS, every second) starts no ticker.
				shared.at = time.Now()
			}
			shared.payload, copied = bytes.Clone(e.payload), true
		}
		f.offer(shared)
	}
}

// followed reports whether a live follower's filters match topic.
func (h *History) followed(topic string) bool {
	f := h.followedFilters.Load()
	if f == nil {
		return false
	}
	if len(f.anyFirst) > 0 && matchAny(f.anyFirst, topic) {
		return true
	}
	first, _, _ := strings.Cut(topic, "/")
	return matchAny(f.byFirst[first], topic)
}

// followedFilters are the live followers' filters by their first level,
// so that a stage asks the few that can match a topic (the dashboard
// follows five first levels, none of an MQTT publisher's).
type followedFilters struct {
	byFirst  map[string][]string
	anyFirst []string // filters whose first level is + or #
}

// setFollowedLocked publishes the live followers' filters for followed.
// Called under h.mu.
func (h *History) setFollowedLocked() {
	if len(h.followers) == 0 {
		h.followedFilters.Store(nil)
		return
	}
	all := &followedFilters{byFirst: map[string][]string{}}
	for f := range h.followers {
		for _, flt := range f.filters {
			switch first, _, _ := strings.Cut(flt, "/"); first {
			case "+", "#":
				all.anyFirst = append(all.anyFirst, flt)
			default:
				all.byFirst[first] = append(all.byFirst[first], flt)
			}
		}
	}
	h.followedFilters.Store(all)
}

// now is when a message without a time of its own came: never later, and
// earlier by at most a tick (a millisecond), or by the scheduler's delay on
// a starved machine. time.Now costs about 100 ns in the publish path (a
// third of Record's cost at the broker's rate), so while messages come a
// ticker reads it every millisecond for them all, and stops after 10 ms
// without one. Nothing runs while nothing happens.
func (h *History) now() time.Time {
	if at := h.clock.Load(); at != 0 {
		if !h.clockUsed.Load() { // a load, not a store, per message: every publisher's core shares the line
			h.clockUsed.Store(true)
		}
		return time.Unix(0, at)
	}
	now := time.Now()
	if h.ticking.CompareAndSwap(false, true) {
		h.clock.Store(now.UnixNano())
		h.clockUsed.Store(true)
		go h.tick()
	}
	return now
}

// tick keeps clock while now uses it.
func (h *History) tick() {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for idle := 0; idle < 10; {
		select {
		case <-h.stop:
			idle = 10
			continue
		case now := <-t.C:
			h.clock.Store(now.UnixNano())
		}
		if h.clockUsed.Swap(false) {
			idle = 0
		} else {
			idle++
		}
	}
	h.clock.Store(0)
	h.ticking.Store(false)
}

// enqueue packs e into the queue for the writer, or counts it as lost when
// the queue is full. Called under h.mu.
func (h *History) enqueue(e *entry, gen idGen) {
	if !h.queueHasRoom(1, packedSize(e)) {
		return
	}
	h.queue.add(e, gen, int(h.packLimit.Load()), &h.free)
	h.accepted++
	if h.queue.msgs == 1 {
		h.tellWriter()
	}
}

// queueHasRoom reports whether msgs messages of bytes bytes (as packed)
// fit the queue, or counts them as lost; an empty queue takes a stage's
// pack whole. Called under h.mu.
func (h *History) queueHasRoom(msgs, bytes int) bool {
	if h.queue.msgs+msgs > h.cfg.QueueSize && h.queue.msgs > 0 {
		h.lost("queue_full", msgs, func() error {
			return fmt.Errorf("%d messages wait to be written, the most history.queue_size allows", h.cfg.QueueSize)
		})
		return false
	}
	if h.queue.bytes+h.staged+bytes > int(h.cfg.QueueBytes) && h.queue.msgs > 0 {
		h.lost("queue_full", msgs, func() error {
			return fmt.Errorf("%d bytes of messages wait to be written; these would take them past history.queue_bytes (%v)", h.queue.bytes+h.staged, h.cfg.QueueBytes)
		})
		return false
	}
	return true
}

// tellWriter wakes the writer, unless it is told already. Called under
// h.mu.
func (h *History) tellWriter() {
	select {
	case h.queued <- struct{}{}:
	default:
	}
}

// setPackLimit bounds packs by what the server takes (its max_payload, the
// headers' room left), once the connection knows it.
func (h *History) setPackLimit() {
	limit := maxPackBytes - packHeaderRoom
	if mp := int(h.st.nc.MaxPayload()); mp > 0 {
		limit = min(maxPackBytes, mp-packHeaderRoom)
	}
	h.packLimit.Store(int64(limit))
}

// packHeaderRoom is what a pack leaves of the server's max_payload for its
// headers.
const packHeaderRoom = 1024

// write is the writer: it takes what the queue holds, sends it to the
// store in batches, and waits for each batch's acks.
func (h *History) write() {
	defer close(h.done)
	var spare packQueue
	stopping, full := false, false
	linger := time.NewTimer(0)
	for {
		if !stopping {
			select {
			case <-h.stop:
				stopping = true
			case <-h.queued:
			}
		}
		if !stopping && !full {
			// Let a light load gather into one pack: a pack costs
			// JetStream about what a message did (pack.go).
			linger.Reset(packLinger)
			select {
			case <-h.stop:
				stopping = true
			case <-linger.C:
			}
		}
		h.handOverListed(stopping)
		h.mu.Lock()
		taken := h.queue
		h.queue = spare
		h.mu.Unlock()
		if taken.msgs == 0 {
			spare = taken
			if stopping {
				return // what was queued at Close is written
			}
			full = false // a stage's young pack waits for the next pass: linger first
			continue
		}
		for start := 0; start < len(taken.packs); {
			end, n := start+1, taken.packs[start].msgs
			for end < len(taken.packs) && n+taken.packs[end].msgs <= maxBatch {
				n += taken.packs[end].msgs
				end++
			}
			h.send(taken.packs[start:end])
			h.written.Add(uint64(n))
			close(*h.progress.Swap(new(make(chan struct{}))))
			start = end
		}
		full = taken.msgs >= maxBatch // more wait: no lingering
		h.mu.Lock()
		spare = taken.emptied(&h.free)
		h.mu.Unlock()
	}
}

// send publishes the packs of batch and waits for their
// acks, counting what was stored and what was lost. The acks come to a
// reply subject of the batch's own (acks), which costs a pack a fraction
// of nats.go's futures.
func (h *History) send(batch []queuedPack) {
	if !h.numbered {
		// Number the messages on from the stream's last pack, once the
		// store answers (a sink's cluster may be down at Open).
		if end, err := h.st.storedEnd(context.Background()); err == nil {
			h.nextNumber.Store(end)
			h.numbered = true
		}
	}
	h.setPackLimit()
	h.batches++
	reply, done := h.st.acks.expect(h.batches)
	var (
		lastErr error
		sent    []*queuedPack // the packs sent, in order
		failed  int           // messages not stored
		number  = h.nextNumber.Load()
	)
	for i := range batch {
		p := &batch[i]
		h.packMsg.Subject = tokenSubject(h.cfg.SubjectPrefix, p.token)
		h.packMsg.Data, h.packMsg.Reply = compressPack(&h.compressed, p.data), reply
		h.packMsg.Header[headerPackFirst][0] = strconv.FormatUint(number, 10)
		h.packMsg.Header[headerPackCount][0] = strconv.Itoa(p.msgs)
		if err := h.st.nc.PublishMsg(h.packMsg); err != nil {
			failed, lastErr = failed+p.msgs, err
		} else {
			sent = append(sent, p)
			number += uint64(p.msgs)
		}
	}
	h.packMsg.Data = nil // the queue's buffer is reused
	stored, refused, why := h.st.acks.wait(len(sent), done, storeTimeout)
	storedMsgs, storedBytes := 0, 0
	for i, p := range sent {
		if i < stored {
			// The acked packs are taken to be the first ones: JetStream
			// stores a connection's packs in order, and a failure ends
			// with the rest failing too (the stream is gone, the store
			// full or down).
			storedMsgs, storedBytes = storedMsgs+p.msgs, storedBytes+p.payload
		} else {
			failed += p.msgs
		}
	}
	h.nextNumber.Add(uint64(storedMsgs))
	if refused > 0 {
		lastErr = why
	}
	if storedMsgs > 0 {
		h.metrics.stored.Add(float64(storedMsgs))
		h.metrics.storedBytes.Add(float64(storedBytes))
	}
	if failed > 0 {
		if isStreamMissing(lastErr) && h.st.up() {
			if err := h.st.ensure(context.Background()); err == nil {
				h.log.Info().Str("stream", h.cfg.Stream).Msg("history stream made again")
			}
		}
		h.lost("store_error", failed, func() error { return lastErr })
	} else if h.waiting() < h.cfg.QueueSize/2 {
		h.recovered()
	}
}

// waiting is how many messages wait in the queue.
func (h *History) waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queue.msgs
}

// lost counts n messages left out of the history and marks it degraded,
// logging at most every 10 seconds. cause says why: it is called only to
// log, or when the reason changes, so that while the queue is full each
// message left out costs a count, not an error formatted at the broker's
// rate.
func (h *History) lost(reason string, n int, cause func() error) {
	h.metrics.lost.WithLabelValues(reason).Add(float64(n))
	h.degradedMu.Lock()
	defer h.degradedMu.Unlock()
	now := time.Now()
	logIt := h.degraded == "" || now.Sub(h.loggedAt) >= 10*time.Second
	if !logIt && reason == h.degradedReason {
		return
	}
	err := cause()
	if logIt {
		h.log.Warn().Err(err).Str("reason", reason).Msg("history degraded: messages left out of the history; live traffic is unaffected")
		h.loggedAt = now
	}
	h.degraded, h.degradedReason = reason+": "+err.Error(), reason
}

func (h *History) recovered() {
	h.degradedMu.Lock()
	defer h.degradedMu.Unlock()
	if h.degraded != "" {
		h.log.Info().Msg("history recovered: messages are stored again")
		h.degraded = ""
	}
}

// Status is "ok", or "degraded: " and why messages are being left out of
// the history (for /readyz, which stays ready: live traffic is unaffected).
func (h *History) Status() string {
	h.degradedMu.Lock()
	why := h.degraded
	h.degradedMu.Unlock()
	switch {
	case !h.st.up():
		return "degraded: the history store is not connected"
	case why != "":
		return "degraded: " + why
	}
	return "ok"
}

// caughtUp waits until the writer has finished every message accepted
// before n was read, or ctx is done. The writer gives up on a batch after
// storeTimeout, so this is bounded too.
func (h *History) caughtUp(ctx context.Context, n uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 2*storeTimeout+time.Second)
	defer cancel()
	for {
		p := *h.progress.Load()
		if h.written.Load() >= n {
			return nil
		}
		select {
		case <-p:
		case <-ctx.Done():
			return fmt.Errorf("%w: the writer is behind: %w", ErrUnavailable, ctx.Err())
		case <-h.done:
			return fmt.Errorf("%w: closed", ErrUnavailable)
		}
	}
}

// Close lets the writer write what is queued, until ctx is done, and closes
// the store. Call it after the broker has closed, so that nothing is
// recorded any more.
func (h *History) Close(ctx context.Context) error {
	h.closeMu.Do(func() {
		close(h.stop)
		select {
		case <-h.done:
		case <-ctx.Done():
		}
		h.st.close()
	})
	return nil
}

// Start does nothing: Open started the writer. It is there for the one
// lifecycle shape.
func (h *History) Start(context.Context) error { return nil }
