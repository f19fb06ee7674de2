package history

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The history stores the bus's messages packed: each JetStream message is a
// pack of consecutive messages the writer took from its queue at once (one
// under a light load, up to maxBatch under a heavy one) whose topics have
// one first level (the source: chef, ansible...), on the subject
// <subject_prefix>.pack.<first level> (packSubject). JetStream's cost is per
// stored message and per subject (parsing, the ack, the file store's
// record and index, its per-subject state): per pack, the bus's messages
// share it. A replay reads the packs of its filters' first levels in order
// and matches each message's topic in process.
//
// A pack's data is a version byte, then for each message: its id, topic,
// source and received time (RFC 3339, as its header had it) as
// length-prefixed strings, the time it came as Unix nanoseconds (a varint,
// 0 when received is set) and its payload, length-prefixed. Its headers
// number its messages (packFirst, packCount) across the whole stream, so
// that the stream's state counts messages, not packs.
const (
	packVersion = 1
	// headerPackFirst is the number, counted over the stream, of the pack's
	// first message; headerPackCount how many messages the pack holds.
	headerPackFirst = "Firehose-Pack-First"
	headerPackCount = "Firehose-Pack-Count"
	// maxPackBytes bounds a pack's data (a message larger than this is
	// stored alone): a pack is read whole, and a NATS cluster's default
	// max_payload is 1 MiB (less when the server says so).
	maxPackBytes = 1 << 20
)

// packSubject is the subject of a pack of messages whose topics have the
// first level of topic: <prefix>.pack.<first level>, or .pack._ for a first
// level that is not a plain token. A replay asks JetStream for the subjects
// of its filters' first levels (packSubjects), so that "ansible/#" does not
// read Chef's packs; two first levels on one subject cost reading, never a
// wrong answer, as each message's topic is matched again in process.
func packSubject(prefix, topic string) string { return prefix + ".pack." + sourceToken(topic) }

// samePackSubject reports whether a and b go into packs of one subject.
func samePackSubject(a, b string) bool { return sourceToken(a) == sourceToken(b) }

// sourceToken is topic's first level if it is a plain subject token, "_"
// otherwise.
func sourceToken(topic string) string {
	first := topic
	if i := strings.IndexByte(topic, '/'); i >= 0 {
		first = topic[:i]
	}
	if first == "" || len(first) > 64 {
		return "_"
	}
	for i := 0; i < len(first); i++ {
		c := first[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "_"
		}
	}
	return first
}

// packSubjects are the subjects of the packs that may hold messages that
// filters match.
func packSubjects(prefix string, filters []string) []string {
	var out []string
	for _, f := range filters {
		first, _, _ := strings.Cut(f, "/")
		if first == "+" || first == "#" {
			return []string{prefix + ".pack.>"}
		}
		if s := packSubject(prefix, f); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// appendPacked appends e to the pack being built in b (which starts with
// packVersion).
func appendPacked(b []byte, e *entry) []byte {
	b = appendString(b, e.id)
	b = appendString(b, e.topic)
	b = appendString(b, e.source)
	b = appendString(b, e.received)
	var at int64
	if e.received == "" {
		at = e.at.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(e.payload)))
	return append(b, e.payload...)
}

// packedSize is about what e adds to a pack.
func packedSize(e *entry) int {
	return len(e.id) + len(e.topic) + len(e.source) + len(e.received) + len(e.payload) + 6*binary.MaxVarintLen32
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBadPack = errors.New("history: a pack that this version cannot read")

// unpack hands fn each message of the pack data, in order, as a Record
// (Payload is a slice of data) until fn returns false. Lengths are checked
// against data: nothing is allocated from a length the data claims.
func unpack(data []byte, fn func(Record) bool) error {
	if len(data) < 2 || data[0] != packVersion { // a version and at least one message
		return errBadPack
	}
	p := data[1:]
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return nil, false
		}
		f := p[k : k+int(n)]
		p = p[k+int(n):]
		return f, true
	}
	for len(p) > 0 {
		id, ok1 := field()
		topic, ok2 := field()
		source, ok3 := field()
		received, ok4 := field()
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return errBadPack
		}
		at, k := binary.Varint(p)
		if k <= 0 {
			return errBadPack
		}
		p = p[k:]
		payload, ok := field()
		if !ok {
			return errBadPack
		}
		r := Record{ID: string(id), Topic: string(topic), Source: string(source), Payload: payload}
		if len(received) > 0 {
			if t, err := time.Parse(time.RFC3339Nano, string(received)); err == nil {
				r.Time = t
			}
		} else {
			r.Time = time.Unix(0, at)
		}
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// packBounds reads a pack's headers: the number of its first message and
// how many it holds.
func packBounds(get func(string) string) (first, count uint64, ok bool) {
	first, err1 := strconv.ParseUint(get(headerPackFirst), 10, 64)
	count, err2 := strconv.ParseUint(get(headerPackCount), 10, 64)
	return first, count, err1 == nil && err2 == nil
}
