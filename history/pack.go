package history

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
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
// A pack's data is a version byte, then its records: for each message, its
// id, topic, source and received time (RFC 3339, as its header had it) as
// length-prefixed strings, the time it came as Unix nanoseconds (a varint,
// 0 when received is set) and its payload, length-prefixed. Version 1 has
// the records as they are; version 2 has them compressed as one S2 block
// (github.com/klauspost/compress/s2), which the writer uses whenever it is
// smaller (for a large pack, when its start is: compressPack). The bus's
// JSON takes a fifth of the room or less, and each byte not stored is one
// that nats-server need not copy, hash and write: compressing costs less
// CPU than it saves (issue 27). Its headers number its messages
// (packFirst, packCount) across the whole stream, so that the stream's
// state counts messages, not packs.
//
// Version 3 is a stage's pack (stage.go), built in frames: a stage
// gathers frameBytes of records, then compresses them into its pack while
// they are still in its core's cache. The writer compressing whole packs
// of 1 MiB read them back from memory, beside the broker, and cost mochi
// more than S2's own time (issue 27). Each frame is a header of 4 bytes
// (little endian: the body's length << 1, | 1 when the body is one S2
// block) and its body: the prefix of the ids made for its messages
// (idGen, length-prefixed) and the number of the first (a uvarint), then
// its records, in which a made id is left out (empty): the ith such id is
// the prefix and first+i. A frame of records that would not shrink by an
// eighth is stored as it is.
const (
	packVersion       = 1
	packVersionS2     = 2
	packVersionFrames = 3
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
func packSubject(prefix, topic string) string { return tokenSubject(prefix, sourceToken(topic)) }

// tokenSubject is the subject of the packs of a first level's token
// (sourceToken).
func tokenSubject(prefix, token string) string { return prefix + ".pack." + token }

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
// packVersion). An entry without an id is written with the id gen makes
// (idGen.append), so that no string is made for it.
func appendPacked(b []byte, e *entry, gen idGen) []byte {
	if e.id == "" && gen.n > 0 {
		// Made in place, after its length: it is shorter than 128 bytes
		// (maxGenIDLen), a uvarint of one byte.
		b = append(b, 0)
		at := len(b)
		b = gen.append(b)
		b[at-1] = byte(len(b) - at)
	} else {
		b = appendField(b, e.id)
	}
	return appendRecord(b, e)
}

// appendRecord appends the fields of e's record that follow its id.
func appendRecord(b []byte, e *entry) []byte {
	b = appendField(b, e.topic)
	b = appendField(b, e.source)
	b = appendField(b, e.received)
	var at int64
	if e.received == "" {
		at = e.at.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	return appendField(b, e.payload)
}

// packedSize is about what e adds to a pack.
func packedSize(e *entry) int {
	return len(e.id) + len(e.topic) + len(e.source) + len(e.received) + len(e.payload) + 6*binary.MaxVarintLen32 + maxGenIDLen
}

func appendField[S ~string | ~[]byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// idGen makes the id of a message that came without one: h-<boot>-<n>,
// unique across restarts by boot. prefix is "h-<boot>-" (idPrefix).
type idGen struct {
	prefix string
	n      uint64 // 0: none to make
}

// idPrefix is the prefix of the ids made for a boot id.
func idPrefix(boot string) string { return "h-" + boot + "-" }

// maxGenIDLen bounds what idGen.append adds for a boot id of 12
// characters: its prefix (idPrefixLen) and a number.
const (
	idPrefixLen = 2 + 12 + 1
	maxGenIDLen = idPrefixLen + 20
)

func (g idGen) append(b []byte) []byte {
	return strconv.AppendUint(append(b, g.prefix...), g.n, 10)
}

func (g idGen) String() string { return string(g.append(nil)) }

// packQueue holds the messages waiting for the writer packed already, as
// they came, so that recording one costs a copy into a buffer that the
// writer hands back (packBuffers), not an allocation of its own that the
// writer then copies into a pack.
type packQueue struct {
	packs []queuedPack
	msgs  int
	held  int // the packs' buffers' capacity
	bytes int // the messages' bytes, as packed
}

// queuedPack is one pack of a packQueue.
type queuedPack struct {
	data    []byte // a version byte, then its records
	msgs    int    // messages in it
	payload int    // their payload bytes
	token   string // their topics' first level (sourceToken)
}

// add packs e on to the last pack, or starts a pack (newPack) when the
// last one cannot take it (takes): a message larger than limit is a pack
// alone.
func (q *packQueue) add(e *entry, gen idGen, limit int, free *packBuffers) {
	token, size := sourceToken(e.topic), packedSize(e)
	if n := len(q.packs); n == 0 || !q.packs[n-1].takes(token, size, maxBatch, limit) {
		q.packs = append(q.packs, newPack(free, token, size, q.held, minPackBuffer))
		q.held += cap(q.packs[len(q.packs)-1].data)
	}
	p := &q.packs[len(q.packs)-1]
	was, wasLen := cap(p.data), len(p.data)
	p.append(e, gen, limit)
	q.held += cap(p.data) - was
	q.bytes += len(p.data) - wasLen
	q.msgs++
}

// takes reports whether p can take one more message of size bytes (as
// packed) on first level token: a pack holds one first level (packSubject),
// at most maxMsgs messages and limit bytes, and records of version 1 only.
// A stage's pack (version 3) that was handed over to the queue is whole:
// a record appended to it would be read as a frame, and the pack lost.
func (p *queuedPack) takes(token string, size, maxMsgs, limit int) bool {
	return p.msgs > 0 && p.data[0] == packVersion && p.token == token && p.msgs < maxMsgs && len(p.data)+size <= limit
}

// append packs e on to p, a pack of at most limit bytes. A buffer that
// must grow doubles, up to limit: a pack begun at its first message's size
// (newPack, once the queue's buffers hold maxFreeBytes: a slow store) then
// copies what it holds about twice as it grows, not the five times of
// append's growth by a quarter, which made recording cost more the further
// the writer fell behind.
func (p *queuedPack) append(e *entry, gen idGen, limit int) {
	if need := packedSize(e); len(p.data)+need > cap(p.data) {
		grown := make([]byte, len(p.data), max(len(p.data)+need, min(2*cap(p.data), limit)))
		copy(grown, p.data)
		p.data = grown
	}
	p.data = appendPacked(p.data, e, gen)
	p.msgs++
	p.payload += len(e.payload)
}

// newPack starts a pack on first level token for a message of size bytes,
// in a buffer of free. The buffer has room for least bytes only while the
// queue's buffers hold less than maxFreeBytes (held): when first levels
// alternate, each message is a pack, and queue_size of them must not cost
// least each.
func newPack(free *packBuffers, token string, size, held, least int) queuedPack {
	room := 1 + size
	if held < maxFreeBytes {
		room = max(room, least)
	}
	return queuedPack{data: append(free.get(room), packVersion), token: token}
}

// addPack puts p, a stage's pack, at the end of q.
func (q *packQueue) addPack(p queuedPack) {
	q.packs = append(q.packs, p)
	q.held += cap(p.data)
	q.bytes += len(p.data)
	q.msgs += p.msgs
}

// emptied is q emptied for reuse (its packs' buffers given to free
// first), or let go when a burst made it large.
func (q packQueue) emptied(free *packBuffers) packQueue {
	for i := range q.packs {
		free.put(q.packs[i].data)
	}
	clear(q.packs) // their tokens keep topics alive
	if cap(q.packs) > maxSparePacks {
		q.packs = nil
	}
	return packQueue{packs: q.packs[:0]}
}

// packBuffers are the buffers of written packs, for packs to come: a pack's
// buffer grows to what it holds once, not each time, so that recording a
// message allocates nothing, even a large one (a Chef run of 260 KB), and
// the garbage collector is not paced by the history.
type packBuffers struct {
	bufs  [][]byte
	bytes int // their capacity
}

// Bounds of the buffers kept.
const (
	minPackBuffer = 64 << 10
	maxFreeBytes  = 8 * maxPackBytes
	maxSparePacks = 4096
)

// get returns an empty buffer, one of those kept if there is one, or a
// new one of size bytes.
func (f *packBuffers) get(size int) []byte {
	if n := len(f.bufs); n > 0 {
		b := f.bufs[n-1]
		f.bufs[n-1], f.bufs = nil, f.bufs[:n-1]
		f.bytes -= cap(b)
		return b[:0]
	}
	return make([]byte, 0, size)
}

// put keeps b for a pack to come, unless it is larger than a pack or the
// buffers kept would be more than maxFreeBytes: an idle history keeps
// little memory.
func (f *packBuffers) put(b []byte) {
	if cap(b) > maxPackBytes+maxPackBytes/4 || f.bytes+cap(b) > maxFreeBytes {
		return
	}
	f.bufs = append(f.bufs, b)
	f.bytes += cap(b)
}

// compressProbe is how much of a large pack compressPack tries first: a
// pack of bytes that do not compress (random, encrypted, already
// compressed) costs S2 more to try, about 0.8 ns a byte, than the bus's
// JSON costs it to compress; the probe costs an eighth of a 128 KiB pack.
const compressProbe = 16 << 10

// compressPack returns pack (version 1) compressed (version 2) in buf's
// room, or pack itself when it is not version 1 (a stage's, compressed as
// it was built), when that is not smaller, when pack is larger than
// a pack holds (one message alone: unpack decompresses no more than
// maxPackBytes, whatever a pack claims), or when pack is large and its
// first compressProbe bytes shrink by less than an eighth (what is stored
// costs nats-server about 1.5 ns a byte; that would not pay for
// compressing the rest). A stage's or the queue's pack holds one first
// level's messages, usually alike, so that its start tells.
func compressPack(buf *[]byte, pack []byte) []byte {
	if len(pack) < 2 || len(pack) > maxPackBytes || pack[0] != packVersion {
		return pack
	}
	*buf = slices.Grow((*buf)[:0], 1+s2.MaxEncodedLen(len(pack)-1))
	if len(pack) > 8*compressProbe {
		if z := s2.Encode((*buf)[1:cap(*buf)], pack[1:1+compressProbe]); len(z) > compressProbe-compressProbe/8 {
			return pack
		}
	}
	z := s2.Encode((*buf)[1:cap(*buf)], pack[1:])
	if 1+len(z) >= len(pack) {
		return pack
	}
	*buf = (*buf)[:1+len(z)]
	(*buf)[0] = packVersionS2
	return *buf
}

// frameBytes is how many bytes of records a stage gathers into a frame
// (its body) before it compresses them into its pack: a frame's records
// stay in the cache of the core that wrote them. S2 compresses the bus's
// JSON about as fast in frames of 32 KiB as in packs of 1 MiB, at about
// nine tenths of the ratio.
const frameBytes = 32 << 10

const (
	// frameHeader is the length of a frame's header.
	frameHeader = 4
	// frameOverhead bounds what a frame adds to its records: its header
	// and its body's prologue (the made ids' prefix, as unpack takes it,
	// and their first number).
	frameOverhead = frameHeader + 1 + idPrefixLen + binary.MaxVarintLen64
)

// beginFrame begins a frame's body in b (empty): its prologue, for the ids
// made from gen on.
func beginFrame(b []byte, gen idGen) []byte {
	return binary.AppendUvarint(appendField(b, gen.prefix), gen.n)
}

// appendFramed appends e's record to a frame's body: an entry without an
// id has one made (beginFrame).
func appendFramed(b []byte, e *entry) []byte {
	return appendRecord(appendField(b, e.id), e)
}

// appendFrame appends body to pack (a version 3 pack's data) as a frame,
// compressed when compress is true and that makes it smaller by an eighth
// at least; it reports whether it did. A buffer that must grow doubles,
// up to a pack's most.
func appendFrame(pack, body []byte, compress bool) ([]byte, bool) {
	at, need := len(pack), frameHeader+s2.MaxEncodedLen(len(body))
	if at+need > cap(pack) {
		grown := make([]byte, at, max(at+need, min(2*cap(pack), maxPackBytes)))
		copy(grown, pack)
		pack = grown
	}
	if compress {
		z := s2.Encode(pack[at+frameHeader:cap(pack)], body)
		if len(z) <= len(body)-len(body)/8 {
			pack = binary.LittleEndian.AppendUint32(pack, uint32(len(z))<<1|1)
			return pack[:at+frameHeader+len(z)], true
		}
	}
	pack = binary.LittleEndian.AppendUint32(pack, uint32(len(body))<<1)
	return append(pack, body...), false
}

var errBadPack = errors.New("history: a pack that this version cannot read")

// unpack hands fn each message of the pack data, in order, as a Record
// (Payload is a slice of data, or of what it decompressed to) until fn
// returns false. Lengths are checked against data, and a compressed pack
// decompresses to maxPackBytes at most: what its claim can make a replay
// allocate is one pack's room, never more.
func unpack(data []byte, fn func(Record) bool) error {
	if len(data) < 2 { // a version and at least one message
		return errBadPack
	}
	switch data[0] {
	case packVersion:
	case packVersionS2:
		n, err := s2.DecodedLen(data[1:])
		if err != nil || n < 1 || n > maxPackBytes {
			return errBadPack
		}
		records, err := s2.Decode(make([]byte, n), data[1:])
		if err != nil {
			return errBadPack
		}
		_, err = unpackRecords(records, nil, fn)
		return err
	case packVersionFrames:
		return unpackFrames(data[1:], fn)
	default:
		return errBadPack
	}
	_, err := unpackRecords(data[1:], nil, fn)
	return err
}

// unpackFrames is unpack for a version 3 pack's frames. Their bodies
// decompress to maxPackBytes at most in all, as a stage's pack holds no
// more (Stage.takes).
func unpackFrames(p []byte, fn func(Record) bool) error {
	total := 0
	for len(p) > 0 {
		if len(p) < frameHeader {
			return errBadPack
		}
		header := binary.LittleEndian.Uint32(p)
		n := int(header >> 1)
		if n > len(p)-frameHeader {
			return errBadPack
		}
		body := p[frameHeader : frameHeader+n]
		p = p[frameHeader+n:]
		if header&1 == 0 {
			total += n
		} else {
			m, err := s2.DecodedLen(body)
			if total += m; err != nil || total > maxPackBytes {
				return errBadPack
			}
			if body, err = s2.Decode(make([]byte, m), body); err != nil {
				return errBadPack
			}
		}
		prefix, k := binary.Uvarint(body)
		if k <= 0 || prefix > idPrefixLen || prefix > uint64(len(body)-k) {
			return errBadPack
		}
		gen := idGen{prefix: string(body[k : k+int(prefix)])}
		body = body[k+int(prefix):]
		if gen.n, k = binary.Uvarint(body); k <= 0 {
			return errBadPack
		}
		if more, err := unpackRecords(body[k:], &gen, fn); !more || err != nil {
			return err
		}
	}
	return nil
}

// unpackRecords is unpack for records, uncompressed; false when fn
// returned false. An empty id is made by made, when it is not nil (a
// frame's: beginFrame).
func unpackRecords(p []byte, made *idGen, fn func(Record) bool) (bool, error) {
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
			return false, errBadPack
		}
		at, k := binary.Varint(p)
		if k <= 0 {
			return false, errBadPack
		}
		p = p[k:]
		payload, ok := field()
		if !ok {
			return false, errBadPack
		}
		r := Record{ID: string(id), Topic: string(topic), Source: string(source), Payload: payload}
		if len(received) > 0 {
			if t, err := time.Parse(time.RFC3339Nano, string(received)); err == nil {
				r.Time = t
			}
		} else {
			r.Time = time.Unix(0, at)
		}
		if len(id) == 0 && made != nil {
			r.ID = made.String()
			made.n++
		}
		if !fn(r) {
			return false, nil
		}
	}
	return true, nil
}

// packBounds reads a pack's headers: the number of its first message and
// how many it holds.
func packBounds(get func(string) string) (first, count uint64, ok bool) {
	first, err1 := strconv.ParseUint(get(headerPackFirst), 10, 64)
	count, err2 := strconv.ParseUint(get(headerPackCount), 10, 64)
	return first, count, err1 == nil && err2 == nil
}
