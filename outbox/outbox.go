// Package outbox is a durable FIFO of bus messages, one per required route,
// kept on disk so that a message accepted while its sink was down is
// delivered once the sink returns, even across a crash or a kill -9.
//
// It is built on pebble (CockroachDB's LSM store), which the binary already
// carries for the broker's retained messages: its write-ahead log gives
// crash-safe appends, and concurrent synced writes share one fsync through
// its commit pipeline (group commit), so parallel senders do not pay an fsync
// each. An append-only segment log of our own would do the same with more
// code to get right.
//
// The outbox must not decide when to deliver: the router's replayer reads
// the head, publishes it, and removes what the sink confirmed.
package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/datadir"
	"github.com/opsfirehose/firehose/internal/logging"

	"github.com/opsfirehose/firehose/bus"
)

// ErrFull means an append would take the outbox over its max_bytes.
var ErrFull = errors.New("outbox full")

// ErrClosed means the outbox has been closed.
var ErrClosed = errors.New("outbox closed")

// Entry is one stored message.
type Entry struct {
	Seq        uint64
	Msg        bus.Message
	EnqueuedAt time.Time
	size       int64
}

// Outbox is safe for concurrent use.
type Outbox struct {
	db       *pebble.DB
	maxBytes int64

	mu        sync.Mutex
	closed    bool
	nextSeq   uint64          // the next sequence number to hand out
	durable   uint64          // every seq <= durable is written (or failed and skipped)
	finished  map[uint64]bool // seqs above durable that have finished writing
	count     int
	bytes     int64 // includes reservations of appends in progress
	headAt    time.Time
	headKnown bool
}

// Open opens (or creates) the outbox in dir. maxBytes bounds the stored
// message bytes; 0 means no bound.
func Open(dir string, maxBytes int64, log zerolog.Logger) (*Outbox, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: logging.Pebble{Log: log}})
	if datadir.InUse(err) {
		return nil, fmt.Errorf("outbox %s is open in another process (a bridge on the same data_dir?): %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox %s: %w", dir, err)
	}
	o := &Outbox{db: db, maxBytes: maxBytes, finished: map[uint64]bool{}, nextSeq: 1}
	iter, err := db.NewIter(nil)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("outbox %s: %w", dir, err)
	}
	for valid := iter.First(); valid; valid = iter.Next() {
		seq := binary.BigEndian.Uint64(iter.Key())
		if !o.headKnown {
			e, derr := decode(seq, iter.Value())
			if derr == nil {
				o.headAt, o.headKnown = e.EnqueuedAt, true
			}
		}
		o.count++
		o.bytes += int64(len(iter.Value()))
		o.nextSeq = seq + 1
	}
	if err := iter.Close(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("outbox %s: %w", dir, err)
	}
	o.durable = o.nextSeq - 1
	return o, nil
}

// Append stores msgs durably, all or none, in order after everything
// appended before. It returns once the messages are on disk (fsync), or
// ErrFull without storing anything.
func (o *Outbox) Append(msgs []bus.Message, now time.Time) error {
	values := make([][]byte, len(msgs))
	var size int64
	for i := range msgs {
		values[i] = encode(&msgs[i], now)
		size += int64(len(values[i]))
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	if o.maxBytes > 0 && o.bytes+size > o.maxBytes {
		stored := o.bytes // read under the lock: a replay may be removing messages
		o.mu.Unlock()
		return fmt.Errorf("%w: %d bytes stored, limit %d", ErrFull, stored, o.maxBytes)
	}
	first := o.nextSeq
	o.nextSeq += uint64(len(msgs))
	o.bytes += size
	o.mu.Unlock()

	b := o.db.NewBatch()
	key := make([]byte, 8)
	for i, v := range values {
		binary.BigEndian.PutUint64(key, first+uint64(i))
		_ = b.Set(key, v, nil)
	}
	// Writes run outside the lock so that concurrent appends reach pebble
	// together and share an fsync.
	err := o.db.Apply(b, pebble.Sync)
	_ = b.Close()

	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range msgs {
		o.finished[first+uint64(i)] = true
	}
	for o.finished[o.durable+1] {
		delete(o.finished, o.durable+1)
		o.durable++
	}
	if err != nil {
		o.bytes -= size
		return fmt.Errorf("outbox append: %w", err)
	}
	o.count += len(msgs)
	if !o.headKnown {
		o.headAt, o.headKnown = now, true
	}
	return nil
}

// Peek returns up to n of the oldest entries, in order. It never returns an
// entry whose predecessors are still being written.
func (o *Outbox) Peek(n int) ([]Entry, error) {
	o.mu.Lock()
	durable, closed := o.durable, o.closed
	o.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	iter, err := o.db.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("outbox peek: %w", err)
	}
	defer iter.Close()
	var out []Entry
	for valid := iter.First(); valid && len(out) < n; valid = iter.Next() {
		seq := binary.BigEndian.Uint64(iter.Key())
		if seq > durable {
			break
		}
		e, err := decode(seq, iter.Value())
		if err != nil {
			return out, fmt.Errorf("outbox entry %d: %w", seq, err)
		}
		out = append(out, e)
	}
	return out, iter.Error()
}

// Remove deletes the given entries (a prefix returned by Peek) once their
// sink has confirmed them. It returns once the deletion is on disk (fsync):
// a delivered message must not be replayed after a crash, whatever the
// window (JetStream's duplicate window would hide some repeats, other sinks
// none). One fsync per replayed batch (up to router.MaxBatch messages).
func (o *Outbox) Remove(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	start := make([]byte, 8)
	end := make([]byte, 8)
	binary.BigEndian.PutUint64(start, entries[0].Seq)
	binary.BigEndian.PutUint64(end, entries[len(entries)-1].Seq+1)
	if err := o.db.DeleteRange(start, end, pebble.Sync); err != nil {
		return fmt.Errorf("outbox remove: %w", err)
	}
	var size int64
	for _, e := range entries {
		size += e.size
	}
	o.mu.Lock()
	o.count -= len(entries)
	o.bytes -= size
	o.headKnown = false
	o.mu.Unlock()
	// The next head's age is found lazily by Stats.
	return nil
}

// Stats describes the outbox now.
type Stats struct {
	Messages  int
	Bytes     int64
	OldestAge time.Duration // 0 when empty
}

// Stats reports depth, size and the age of the oldest message.
func (o *Outbox) Stats(now time.Time) Stats {
	o.mu.Lock()
	s := Stats{Messages: o.count, Bytes: o.bytes}
	known, at := o.headKnown, o.headAt
	o.mu.Unlock()
	if s.Messages == 0 {
		return s
	}
	if !known {
		if head, err := o.Peek(1); err == nil && len(head) == 1 {
			at = head[0].EnqueuedAt
			o.mu.Lock()
			o.headAt, o.headKnown = at, true
			o.mu.Unlock()
		}
	}
	if !at.IsZero() {
		s.OldestAge = now.Sub(at)
	}
	return s
}

// Len is the number of stored messages.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.count
}

// Close flushes and closes the store. Appends after Close fail with ErrClosed.
func (o *Outbox) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	return o.db.Close()
}

const encodingVersion = 1

// encode lays a message out as: version, enqueued-at (unix nanos), qos,
// retain, topic, headers, payload; lengths as uvarints.
func encode(m *bus.Message, now time.Time) []byte {
	size := 1 + 8 + 2 + binary.MaxVarintLen64*(2+2*len(m.Headers)) + len(m.Topic) + len(m.Payload)
	for k, v := range m.Headers {
		size += len(k) + len(v)
	}
	b := make([]byte, 0, size)
	b = append(b, encodingVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(now.UnixNano()))
	retain := byte(0)
	if m.Retain {
		retain = 1
	}
	b = append(b, m.QoS, retain)
	b = appendString(b, m.Topic)
	b = binary.AppendUvarint(b, uint64(len(m.Headers)))
	for k, v := range m.Headers {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return append(b, m.Payload...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errCorrupt = errors.New("corrupt entry")

func decode(seq uint64, v []byte) (Entry, error) {
	e := Entry{Seq: seq, size: int64(len(v))}
	if len(v) < 11 || v[0] != encodingVersion {
		return e, errCorrupt
	}
	e.EnqueuedAt = time.Unix(0, int64(binary.BigEndian.Uint64(v[1:9])))
	e.Msg.QoS, e.Msg.Retain = v[9], v[10] == 1
	rest := v[11:]
	var ok bool
	if e.Msg.Topic, rest, ok = readString(rest); !ok {
		return e, errCorrupt
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return e, errCorrupt
	}
	rest = rest[k:]
	if n > 0 {
		e.Msg.Headers = make(map[string]string, n)
	}
	for i := uint64(0); i < n; i++ {
		var key, val string
		if key, rest, ok = readString(rest); !ok {
			return e, errCorrupt
		}
		if val, rest, ok = readString(rest); !ok {
			return e, errCorrupt
		}
		e.Msg.Headers[key] = val
	}
	// The payload is copied: pebble's value buffer is only valid until the iterator moves.
	e.Msg.Payload = append([]byte(nil), rest...)
	return e, nil
}

func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}
