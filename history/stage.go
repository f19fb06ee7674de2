package history

import (
	"sync"
	"time"
)

// A Stage records the messages of one publisher (an MQTT client of the
// embedded broker) into a pack of its own, under a lock no other publisher
// takes, and hands the pack to the writer's queue whole: when it is full
// or the first level changes, when the writer comes for it (packLinger to
// twice that after it began), and before anything reads the history or
// begins to follow it. At the broker's rate the one lock of Record, taken by every
// publisher for every message, cost more than the copy it guarded, as its
// cache lines crossed from core to core with each message (issue 27); a
// stage takes it once a pack.
//
// A stage compresses its pack as it builds it, a frame of frameBytes at a
// time (pack.go, version 3), on the publisher's goroutine, while the
// frame's records are in its core's cache; the writer sends the pack as it
// is. When the writer compressed each pack of 1 MiB whole, reading it back
// from memory beside the broker, the broker's CPU per message with the
// history measured 0.73 µs more than without it; with frames, 0.5 µs more
// (medians of 34 runs of bench/history each, interleaved).
//
// What changes is the order across publishers: the history holds each
// publisher's messages in the order it published them, and the packs of
// different publishers in the order they were handed over. A message that
// a live follower's filters match is not staged: it goes to the queue and
// to the followers at once, after what the stage holds, so that followers
// see it as it comes (Follow's order is Record's).
//
// A publisher's messages come in one order, but not always on one
// goroutine (mochi reads a client's packets on one, the router's pipeline
// releases those it held on another): RecordFields takes the stage's lock
// for all it does. Close ends it.
type Stage struct {
	h  *History
	mu sync.Mutex // the publisher's; the writer and readers take it to hand the pack over
	// The pack being built (msgs 0: none), and the queue bytes reserved
	// for it (History.staged).
	pack     queuedPack
	reserved int
	// The pack is built in frames (pack.go, version 3): body is the next
	// frame's, unframed is what the pack's data would be were each of its
	// frames stored as it is (Stage.takes), and raw counts the frames to
	// store as they are before trying again, after one did not shrink.
	body     []byte
	unframed int
	raw      int
	// nextID and endID bound the ids reserved for messages without one.
	nextID, endID uint64
	closed        bool
	listed        bool      // in History.listed, under History.mu
	began         time.Time // when the pack began
}

// stagePackBytes bounds a stage's pack: a pack's most (maxPackBytes), or an
// eighth of history.queue_bytes when that is less. It is reserved in the
// queue's bytes while the pack is built, so that stages and queue together
// hold no more than the queue may, and stages reserve at most half of it.
// A message that does not fit an empty stage's pack, or that finds no room
// to reserve, goes to the queue directly. (Its buffer grows as messages
// come: a quiet publisher's pack costs its messages' room, not this.)
// Packs of 256 KiB cost the bridge more per message than packs of 1 MiB at
// the broker's rate, as the writer's passes do (maxBatch).
func (h *History) stagePackBytes() int { return min(maxPackBytes, int(h.cfg.QueueBytes)/8) }

// stageMsgs bounds the messages of a stage's pack: a pack is taken into
// the queue whole, and history.queue_size must leave room for several.
func (h *History) stageMsgs() int { return min(maxBatch, max(1, h.cfg.QueueSize/8)) }

// minStageBuffer is the least room a stage's new buffer has (when no
// written pack's is kept, and while the queue's buffers hold less than
// maxFreeBytes): a publisher of a message a second, one of many, begins a
// pack with each, and must not cost a pack's room for it.
const minStageBuffer = 4 << 10

// NewStage returns a stage for one publisher's messages. It costs the
// history nothing until the publisher publishes: the history knows only
// the stages that hold a pack (History.holding), so that a fleet's
// connected publishers cost a reader nothing (handOverAll).
func (h *History) NewStage() *Stage { return &Stage{h: h} }

// Close hands over what s holds; later messages recorded through s go to
// the queue directly.
func (s *Stage) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frame()
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handOver(s)
	s.closed = true
}

// RecordFields is History.RecordFields for the stage's publisher.
func (s *Stage) RecordFields(topic string, payload []byte, id, source, receivedAt string) {
	h := s.h
	if !h.Keeps(topic) {
		h.RecordFields(topic, payload, id, source, receivedAt) // for the live followers, if any
		return
	}
	e := entry{id: id, topic: topic, source: source, received: receivedAt, payload: payload}
	if receivedAt == "" {
		e.at = h.now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || h.followed(topic) {
		s.frame()
		h.mu.Lock()
		h.handOver(s) // first: the publisher's order
		h.recordLocked(&e, true)
		h.mu.Unlock()
		return
	}
	token, size, limit := sourceToken(topic), packedSize(&e), min(h.stagePackBytes(), int(h.packLimit.Load()))
	if !s.takes(token, size, h.stageMsgs(), limit) {
		s.frame()
		h.mu.Lock()
		if !h.restage(s, topic, token, size) {
			h.recordLocked(&e, true)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
	if len(s.body) == 0 {
		s.body = beginFrame(s.body, idGen{prefix: h.idPrefix, n: s.nextID + 1})
	}
	if id == "" {
		s.nextID++ // made from the frame's prologue
	}
	s.body = appendFramed(s.body, &e)
	s.pack.msgs++
	s.pack.payload += len(payload)
	if len(s.body) >= frameBytes {
		s.frame()
	}
}

// takes reports whether s's pack can take one more message of size bytes
// (as packed) on first level token: a pack holds one first level
// (packSubject), at most maxMsgs messages, and records that take limit
// bytes at most with their frames stored as they are: what is sent is
// no more, and unpack decompresses no more.
func (s *Stage) takes(token string, size, maxMsgs, limit int) bool {
	body := frameHeader + len(s.body) // a frame's header and what it holds
	if len(s.body) == 0 {
		body = frameOverhead
	}
	return s.pack.msgs > 0 && s.pack.token == token && s.pack.msgs < maxMsgs && s.unframed+body+size <= limit
}

// frame compresses the records s gathered into its pack, as a frame (or
// stores them as they are, when they do not shrink). Under s.mu: not
// under h.mu, which every other publisher may want meanwhile.
func (s *Stage) frame() {
	if len(s.body) == 0 {
		return
	}
	compress := s.raw == 0
	if !compress {
		s.raw--
	}
	var compressed bool
	s.unframed += frameHeader + len(s.body)
	s.pack.data, compressed = appendFrame(s.pack.data, s.body, compress)
	if compress && !compressed && len(s.body) >= frameBytes {
		// Random or encrypted payloads: S2 costs about 0.8 ns a byte
		// to find that they do not shrink (compressPack). Try again
		// after a few frames, as what a publisher sends may change.
		// A frame cut short (a hand-over, a quiet publisher's few
		// messages) tells too little: it is judged alone.
		s.raw = 16
	}
	s.body = s.body[:0]
}

// handOver moves what s holds to the queue (or counts it as lost when the
// queue has no room), under s.mu and h.mu.
func (h *History) handOver(s *Stage) {
	s.frame()
	if s.body != nil {
		if cap(s.body) <= maxFrameBuffer && len(h.frameBuffers) < h.mostStaging() {
			h.frameBuffers = append(h.frameBuffers, s.body)
		}
		s.body = nil
	}
	delete(h.holding, s)
	h.staged -= s.reserved
	s.reserved = 0
	p := s.pack
	s.pack = queuedPack{}
	if p.msgs == 0 {
		if p.data != nil {
			h.free.put(p.data)
		}
		return
	}
	if !h.queueHasRoom(p.msgs, len(p.data)) {
		h.free.put(p.data)
		return
	}
	h.queue.addPack(p)
	h.accepted += uint64(p.msgs)
	if h.queue.msgs == p.msgs {
		h.tellWriter()
	}
}

// restage hands over what s holds and begins a pack for a message of size
// bytes on topic, whose first level is token, with the ids its messages
// may need; false when the message does not fit a stage's pack, the queue's
// bytes leave no room to reserve one, or a live follower's filters match
// topic: it goes to the queue directly. Under s.mu and h.mu.
//
// The stage is then one of History.holding, which handOverAll hands over.
// A follower is added under h.mu, and its filters asked here again: a
// RecordFields that asked them before the follower came, and began a pack
// after handOverAll looked at holding, must not stage a message the
// follower wants (Follow).
func (h *History) restage(s *Stage, topic, token string, size int) bool {
	h.handOver(s)
	reserve := h.stagePackBytes()
	if len(h.followers) > 0 && h.followed(topic) {
		return false
	}
	if 1+frameOverhead+size > min(reserve, int(h.packLimit.Load())) ||
		h.staged+reserve > int(h.cfg.QueueBytes)/2 || h.queue.bytes+h.staged+reserve > int(h.cfg.QueueBytes) {
		return false
	}
	h.staged += reserve
	s.reserved = reserve
	h.holding[s] = struct{}{}
	s.pack = newPack(&h.free, token, size, h.queue.held, minStageBuffer)
	s.pack.data[0] = packVersionFrames
	s.unframed = len(s.pack.data)
	if n := len(h.frameBuffers); n > 0 {
		s.body, h.frameBuffers = h.frameBuffers[n-1], h.frameBuffers[:n-1]
	} else {
		s.body = make([]byte, 0, frameBuffer)
	}
	s.began = time.Now()
	if s.endID-s.nextID < maxBatch {
		s.nextID = h.nextID
		h.nextID += maxBatch
		s.endID = h.nextID
	}
	if !s.listed {
		s.listed = true
		h.listed = append(h.listed, s)
	}
	h.tellWriter() // it hands the pack over after twice packLinger at most
	return true
}

// handOverListed hands over the packs of the stages that began one since
// the last call: the writer's, before it takes the queue. A pack begun
// less than packLinger ago is left to fill, unless all is true (Close),
// and the writer comes for it on its next pass: under load the writer
// passes more often than that, and cutting every stage's pack at each pass
// made packs of a few hundred messages, each with JetStream's cost per
// pack (issue 27). So a pack waits for the writer twice packLinger at most.
func (h *History) handOverListed(all bool) {
	h.mu.Lock()
	listed := h.listed
	h.listed = h.spareListed
	for _, s := range listed {
		s.listed = false
	}
	h.mu.Unlock()
	now, young := time.Now(), false
	for _, s := range listed {
		if s.handOverBegunBy(now, all) {
			continue
		}
		young = true
		h.mu.Lock()
		if !s.listed { // it may have begun a pack since, and listed itself
			s.listed = true
			h.listed = append(h.listed, s)
		}
		h.mu.Unlock()
	}
	if young {
		h.mu.Lock()
		h.tellWriter()
		h.mu.Unlock()
	}
	clear(listed)
	h.spareListed = listed[:0]
}

// young reports whether s holds a pack begun less than packLinger before
// now. Under s.mu.
func (s *Stage) young(now time.Time) bool {
	return s.pack.msgs > 0 && now.Sub(s.began) < packLinger
}

// handOverBegunBy hands over what s holds, unless its pack began less than
// packLinger before now and all is false; it reports whether it did.
func (s *Stage) handOverBegunBy(now time.Time, all bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !all && s.young(now) {
		return false
	}
	s.frame()
	s.h.mu.Lock()
	s.h.handOver(s)
	s.h.mu.Unlock()
	return true
}

// handOverAll hands over what every stage holds: after it, each message a
// stage was handed before the call is in the queue (or counted as lost),
// so that a reader that waits for the writer finds it. It takes the lock
// of each stage that holds a pack, not of every publisher's: a stage
// begins a pack under h.mu (restage), and handOverAll waits for one that
// held a pack when it looked to finish the message it was recording.
func (h *History) handOverAll() {
	h.mu.Lock()
	if len(h.holding) == 0 {
		h.mu.Unlock()
		return
	}
	stages := make([]*Stage, 0, len(h.holding))
	for s := range h.holding {
		stages = append(stages, s)
	}
	h.mu.Unlock()
	for _, s := range stages {
		s.handOver()
	}
}

// handOver moves what s holds to the queue.
func (s *Stage) handOver() {
	s.mu.Lock()
	s.frame()
	s.h.mu.Lock()
	s.h.handOver(s)
	s.h.mu.Unlock()
	s.mu.Unlock()
}

// frameBuffer is the room of a stage's frame buffer: a frame and the
// message that ends it. One that a large message grew to more than
// maxFrameBuffer is not kept.
const (
	frameBuffer    = frameBytes + frameBytes/8
	maxFrameBuffer = 2 * frameBytes
)

// mostStaging is how many stages may hold a pack at once: as many as half
// of history.queue_bytes has room for (restage), 128 by default. So many
// frame buffers are kept, so that a fleet whose nodes each publish now and
// then, each beginning a pack of its own, allocates none: 4.6 MB by
// default, 8 MiB if large messages grew them to maxFrameBuffer.
func (h *History) mostStaging() int { return max(1, int(h.cfg.QueueBytes)/2/h.stagePackBytes()) }
