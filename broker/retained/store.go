package retained

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/logging"
	"github.com/opsfirehose/firehose/topics"
)

// Options configures a Store.
type Options struct {
	// Dir is the directory of the store; "" keeps it in memory only (lost at
	// exit, and never synced).
	Dir string
	// Logger receives pebble's messages and the store's own.
	Logger zerolog.Logger
}

// ErrClosed is returned by a Store used after Close.
var ErrClosed = errors.New("retained store closed")

// scanChunk is how many messages a Scan reads from pebble before it hands
// them on: the memory a late subscriber costs, whatever the fleet's size.
const scanChunk = 256

// headerSize is the deadline stored before every value.
const headerSize = 8

// Store holds one retained message per topic. It is safe for concurrent
// use. Writes are applied at once (a Scan that starts after Put returns sees
// them) and become durable at the next group sync.
type Store struct {
	db  *pebble.DB
	mem bool
	log zerolog.Logger

	// mu orders writes, so that the count, the deadlines and the sequence
	// numbers agree with what pebble holds.
	mu    sync.Mutex
	count atomic.Int64
	// present holds a hash of every topic the store has a message for, so
	// that a write knows whether it adds one (for count) without a pebble
	// lookup, which reads table blocks from disk once the fleet outgrows
	// the block cache (a sixth of a retained publish's CPU at 100,000
	// nodes). About 20 bytes a topic. Two topics whose 64-bit hashes
	// collide (odds near 1 in 10^8 at a million topics) would make count
	// one short; nothing else reads it.
	present   map[uint64]struct{}
	seed      maphash.Seed
	deadlines deadlineHeap
	timer     *time.Timer
	closed    bool

	written atomic.Uint64 // the sequence number of the last write applied
	synced  atomic.Uint64 // every write up to this one is on disk

	waitMu  sync.Mutex
	waiters []waiter
	syncErr error

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

type waiter struct {
	seq uint64
	fn  func(error)
}

// Open opens (or creates) the store in opts.Dir, or in memory.
func Open(opts Options) (*Store, error) {
	s := &Store{
		mem:     opts.Dir == "",
		log:     opts.Logger,
		present: map[uint64]struct{}{},
		seed:    maphash.MakeSeed(),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	popts := &pebble.Options{Logger: logging.Pebble{Log: opts.Logger}}
	dir := opts.Dir
	if s.mem {
		popts.FS = vfs.NewMem()
		popts.DisableWAL = true
		dir = "retained"
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		if strings.Contains(err.Error(), "resource temporarily unavailable") || strings.Contains(err.Error(), "lock") {
			return nil, fmt.Errorf("retained store %s is in use by another process (another bridge or broker on this data directory?): %w", dir, err)
		}
		return nil, fmt.Errorf("retained store %s: %w", dir, err)
	}
	s.db = db
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("retained store %s: %w", dir, err)
	}
	s.timer = time.AfterFunc(time.Hour, s.expire)
	s.timer.Stop()
	s.armLocked()
	if !s.mem {
		s.wg.Add(1)
		go s.syncLoop()
	}
	return s, nil
}

// load counts the messages and gathers their deadlines, removing those that
// expired while the store was closed.
func (s *Store) load() error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	now := time.Now().Unix()
	var expired [][]byte
	for it.First(); it.Valid(); it.Next() {
		v := it.Value()
		if len(v) < headerSize {
			expired = append(expired, bytes.Clone(it.Key())) // not ours: drop it
			continue
		}
		if d := deadlineOf(v); d > 0 {
			if d <= now {
				expired = append(expired, bytes.Clone(it.Key()))
				continue
			}
			s.deadlines = append(s.deadlines, deadline{at: d, topic: string(it.Key())})
		}
		s.present[maphash.Bytes(s.seed, it.Key())] = struct{}{}
	}
	if err := it.Close(); err != nil {
		return err
	}
	heap.Init(&s.deadlines)
	s.count.Store(int64(len(s.present)))
	for _, k := range expired {
		if err := s.db.Delete(k, pebble.NoSync); err != nil {
			return err
		}
	}
	return nil
}

// Len is the number of retained messages (expired ones count until the
// expiry timer or a Scan removes them).
func (s *Store) Len() int { return int(s.count.Load()) }

// Put retains value for topic, replacing what it held, until deadline (Unix
// seconds; 0 for never). An empty value deletes the topic's message, as an
// empty retained PUBLISH does. It returns the write's sequence number, for
// Durable and WhenDurable. value is copied.
func (s *Store) Put(topic string, deadline int64, value []byte) (uint64, error) {
	if len(value) == 0 {
		return s.Delete(topic)
	}
	key := []byte(topic)
	buf := make([]byte, headerSize+len(value))
	binary.BigEndian.PutUint64(buf, uint64(deadline))
	copy(buf[headerSize:], value)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	if err := s.db.Set(key, buf, pebble.NoSync); err != nil {
		return 0, fmt.Errorf("retain %s: %w", topic, err)
	}
	s.markLocked(topic, true)
	if deadline > 0 {
		heap.Push(&s.deadlines, deadlineEntry(deadline, topic))
		s.armLocked()
	}
	return s.wroteLocked(), nil
}

// Delete removes topic's retained message, if any.
func (s *Store) Delete(topic string) (uint64, error) {
	key := []byte(topic)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	if _, ok := s.present[maphash.String(s.seed, topic)]; !ok {
		return s.written.Load(), nil
	}
	if err := s.db.Delete(key, pebble.NoSync); err != nil {
		return 0, fmt.Errorf("delete retained %s: %w", topic, err)
	}
	s.markLocked(topic, false)
	return s.wroteLocked(), nil
}

// markLocked notes whether the store holds a message for topic, and keeps
// count; the caller holds mu.
func (s *Store) markLocked(topic string, held bool) {
	h := maphash.String(s.seed, topic)
	if held {
		s.present[h] = struct{}{}
	} else {
		delete(s.present, h)
	}
	s.count.Store(int64(len(s.present)))
}

// wroteLocked numbers a write that pebble has applied and asks for a sync.
func (s *Store) wroteLocked() uint64 {
	seq := s.written.Add(1)
	if s.mem {
		s.synced.Store(seq)
		return seq
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return seq
}

// Written is the sequence number of the last write applied.
func (s *Store) Written() uint64 { return s.written.Load() }

// Synced is the sequence number of the last write on disk: every write up
// to it is.
func (s *Store) Synced() uint64 { return s.synced.Load() }

// WhenDurable calls fn once every write up to seq is on disk (at once if
// it is, or if the store is in memory), with the sync's error if it failed.
// fn runs on the store's sync goroutine: it must not block, nor call back
// into the store.
func (s *Store) WhenDurable(seq uint64, fn func(error)) {
	s.waitMu.Lock()
	if s.synced.Load() >= seq || s.syncErr != nil {
		err := s.syncErr
		s.waitMu.Unlock()
		fn(err)
		return
	}
	s.waiters = append(s.waiters, waiter{seq: seq, fn: fn})
	s.waitMu.Unlock()
}

// Durable waits until every write up to seq is on disk.
func (s *Store) Durable(ctx context.Context, seq uint64) error {
	done := make(chan error, 1)
	s.WhenDurable(seq, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("retained store sync: %w", ctx.Err())
	}
}

// syncLoop is the group commit: each fsync covers every write applied
// before it started, however many publishers wrote meanwhile.
func (s *Store) syncLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.kick:
		case <-s.done:
			s.syncOnce()
			return
		}
		s.syncOnce()
	}
}

// gatherRounds bounds how often a sync lets the writers go on before it
// starts, while they keep writing.
const gatherRounds = 16

func (s *Store) syncOnce() {
	// A publisher's window of messages arrives in one read and is applied
	// one by one: let the writers that are at it finish, so that one fsync
	// covers the window rather than its first message. This yields the
	// processor, and never waits on a clock.
	target := s.written.Load()
	for range gatherRounds {
		runtime.Gosched()
		now := s.written.Load()
		if now == target {
			break
		}
		target = now
	}
	if target <= s.synced.Load() {
		return
	}
	err := s.db.LogData(nil, pebble.Sync)
	if err != nil {
		err = fmt.Errorf("retained store sync: %w", err)
		s.log.Error().Err(err).Msg("retained messages are not on disk; publishers of retained messages are not acknowledged")
	}
	s.waitMu.Lock()
	if err != nil {
		s.syncErr = err
	} else {
		s.synced.Store(target)
	}
	var due []waiter
	keep := s.waiters[:0]
	for _, w := range s.waiters {
		if err != nil || w.seq <= target {
			due = append(due, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(s.waiters[len(keep):])
	s.waiters = keep
	s.waitMu.Unlock()
	for _, w := range due {
		w.fn(err)
	}
}

// Message is one retained message handed to a Scan's function. Value is
// valid only during the call.
type Message struct {
	Topic    string
	Deadline int64 // Unix seconds; 0 for never
	Value    []byte
}

// Scan calls fn with every retained message whose topic matches the MQTT
// filter, in topic order, skipping expired ones. It reads scanChunk messages
// at a time from the literal prefix of the filter and holds no pebble
// iterator while fn runs, so fn may block (a subscriber's flow control)
// without pinning the store; a message written after Scan passed its topic
// is not seen, one written before it got there is. It stops at fn's first
// error, or when ctx is done.
func (s *Store) Scan(ctx context.Context, filter string, fn func(Message) error) error {
	prefix := literalPrefix(filter)
	opts := &pebble.IterOptions{LowerBound: []byte(prefix)}
	if prefix != "" {
		opts.UpperBound = prefixEnd([]byte(prefix))
	}
	var after []byte
	chunk := make([]Message, 0, scanChunk)
	var arena []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, arena = chunk[:0], arena[:0]
		now := time.Now().Unix()
		// A chunk is read while Close waits: Close may come while fn
		// blocks (the server shutting down), and pebble panics on an
		// iterator of a closed DB.
		if !s.enterRead() {
			return ErrClosed
		}
		more, err := func() (bool, error) {
			defer s.wg.Done()
			it, err := s.db.NewIter(opts)
			if err != nil {
				return false, fmt.Errorf("scan retained %s: %w", filter, err)
			}
			ok := it.First()
			if after != nil {
				ok = it.SeekGE(after)
				if ok && bytes.Equal(it.Key(), after) {
					ok = it.Next()
				}
			}
			for ; ok && len(chunk) < scanChunk; ok = it.Next() {
				topic := it.Key()
				if !topics.Match(filter, string(topic)) {
					continue
				}
				v := it.Value()
				if len(v) < headerSize {
					continue
				}
				d := deadlineOf(v)
				if d > 0 && d <= now {
					continue // the expiry timer removes it
				}
				start := len(arena)
				arena = append(arena, topic...)
				arena = append(arena, v[headerSize:]...)
				chunk = append(chunk, Message{Deadline: d, Value: arena[start+len(topic) : len(arena) : len(arena)]})
				chunk[len(chunk)-1].Topic = string(arena[start : start+len(topic)])
			}
			if err := it.Close(); err != nil {
				return false, fmt.Errorf("scan retained %s: %w", filter, err)
			}
			return ok, nil
		}()
		if err != nil {
			return err
		}
		for i := range chunk {
			if err := fn(chunk[i]); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		after = append(after[:0], chunk[len(chunk)-1].Topic...)
	}
}

// enterRead reports whether the store is open, and if so counts a read
// that Close waits for (s.wg; Done when it ends).
func (s *Store) enterRead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// literalPrefix is the part of filter before its first wildcard level.
func literalPrefix(filter string) string {
	if filter == "#" || filter == "+" || strings.HasPrefix(filter, "+/") || strings.HasPrefix(filter, "#/") {
		return ""
	}
	if i := strings.Index(filter, "/+/"); i >= 0 {
		filter = filter[:i+1]
	}
	filter = strings.TrimSuffix(filter, "+") // "a/+": the "a/" before it
	return strings.TrimSuffix(filter, "/#")  // "a/#" matches "a" too
}

// prefixEnd is the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // all 0xff: no upper bound
}

func deadlineOf(v []byte) int64 { return int64(binary.BigEndian.Uint64(v[:headerSize])) }

// expire removes the messages whose deadline has passed, and arms the timer
// for the next one. A deadline whose message was replaced since (by one
// with another deadline, or none) is passed over.
func (s *Store) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := time.Now().Unix()
	removed := false
	for len(s.deadlines) > 0 && s.deadlines[0].at <= now {
		d := heap.Pop(&s.deadlines).(deadline)
		v, closer, err := s.db.Get([]byte(d.topic))
		if err != nil {
			continue
		}
		current := len(v) >= headerSize && deadlineOf(v) == d.at
		_ = closer.Close()
		if !current {
			continue
		}
		if err := s.db.Delete([]byte(d.topic), pebble.NoSync); err != nil {
			s.log.Error().Err(err).Str("topic", d.topic).Msg("could not remove an expired retained message")
			continue
		}
		s.markLocked(d.topic, false)
		removed = true
	}
	if removed {
		s.wroteLocked()
	}
	s.armLocked()
}

// armLocked sets the timer for the earliest deadline.
func (s *Store) armLocked() {
	if len(s.deadlines) == 0 {
		return
	}
	wait := time.Until(time.Unix(s.deadlines[0].at, 0))
	s.timer.Reset(max(wait, 0) + 10*time.Millisecond)
}

// Close syncs what was written and closes the store. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.timer.Stop()
	s.mu.Unlock()
	close(s.done)
	s.wg.Wait()
	s.waitMu.Lock()
	waiters := s.waiters
	s.waiters = nil
	s.waitMu.Unlock()
	for _, w := range waiters {
		w.fn(ErrClosed)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close retained store: %w", err)
	}
	return nil
}

// deadline is a message's expiry, in the heap of those that have one.
type deadline struct {
	at    int64
	topic string
}

func deadlineEntry(at int64, topic string) deadline { return deadline{at: at, topic: topic} }

type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
