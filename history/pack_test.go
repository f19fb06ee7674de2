package history

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestPackRoundTrip packs messages with escaped levels, dots, wildcard
// characters, empty and binary payloads, and both kinds of time, and reads
// back each field as it went in, in order.
func TestPackRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 28, 5, 0, 0, 123456789, time.UTC)
	in := []entry{
		{id: "a-1", topic: "chef/org/web%2F1/run/failure", source: "chef", received: "2026-11-28T04:59:59.5Z", payload: []byte(`{"ok":false}`)},
		{id: "a-2", topic: "x/%2B/%23", at: at, payload: nil},
		{id: "", topic: "chef/org/db.example.org/status", source: "", at: at, payload: []byte{0, 0xff, '\n'}},
		{id: "a-4", topic: "$SYS/broker/uptime", payload: bytes.Repeat([]byte("y"), 300), at: at},
	}
	b := []byte{packVersion}
	for i := range in {
		b = appendPacked(b, &in[i], idGen{})
	}
	var got []Record
	if err := unpack(b, func(r Record) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d records back from %d", len(got), len(in))
	}
	for i, e := range in {
		r := got[i]
		if r.ID != e.id || r.Topic != e.topic || r.Source != e.source || !bytes.Equal(r.Payload, e.payload) || !r.Time.Equal(e.time()) {
			t.Errorf("%d: %+v\nwant %+v (time %v)", i, r, e, e.time())
		}
	}
	// fn's false ends the reading.
	n := 0
	_ = unpack(b, func(Record) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("read %d after the second said stop", n)
	}
}

// TestPackMakesTheIdsOfMessagesWithout: a message that came without an id
// is stored with the id its idGen makes (written in place, after its
// length), the one live followers get; one with an id keeps it.
func TestPackMakesTheIdsOfMessagesWithout(t *testing.T) {
	gens := []idGen{{prefix: idPrefix("0123456789ab"), n: 1}, {prefix: idPrefix("0123456789ab"), n: 1<<64 - 1}, {prefix: idPrefix("ff"), n: 7}}
	b := []byte{packVersion}
	for _, gen := range gens {
		b = appendPacked(b, &entry{topic: "a/b", payload: []byte("p")}, gen)
	}
	b = appendPacked(b, &entry{id: "mine", topic: "a/b", payload: []byte("p")}, gens[0])
	var got []string
	if err := unpack(b, func(r Record) bool { got = append(got, r.ID); return true }); err != nil {
		t.Fatal(err)
	}
	want := []string{"h-0123456789ab-1", "h-0123456789ab-18446744073709551615", "h-ff-7", "mine"}
	if strings.Join(got, " ") != strings.Join(want, " ") || gens[1].String() != want[1] {
		t.Fatalf("ids %q, want %q (String: %q)", got, want, gens[1].String())
	}
}

// framedPack is a version 3 pack of frames of entries, as a stage builds
// one, its frames compressed when compress says so and they shrink, and
// the offsets where each frame ends.
func framedPack(t *testing.T, gen idGen, compress bool, frames ...[]entry) ([]byte, []int) {
	t.Helper()
	pack, ends := []byte{packVersionFrames}, []int(nil)
	for _, entries := range frames {
		body := beginFrame(nil, gen)
		for i := range entries {
			if entries[i].id == "" {
				gen.n++
			}
			body = appendFramed(body, &entries[i])
		}
		pack, _ = appendFrame(pack, body, compress)
		ends = append(ends, len(pack))
	}
	return pack, ends
}

// TestFramedPacks: a stage's pack (version 3) reads back each message as
// it went in, across frames compressed and stored as they are, with the
// ids made for those that came without one (the ones live followers get),
// and fn's false ends it within a frame or at one's start.
func TestFramedPacks(t *testing.T) {
	at := time.Date(2026, 11, 28, 5, 0, 0, 1, time.UTC)
	random := make([]byte, 3000)
	_, _ = rand.NewChaCha8([32]byte{3}).Read(random)
	var json []entry
	for i := range 40 {
		json = append(json, entry{topic: "chef/org/web-1/run/success", at: at, payload: fmt.Appendf(nil, `{"node":"web-%d","status":"success"}`, i)})
	}
	json[3].id, json[3].source, json[3].received, json[3].at = "given", "chef", "2026-11-28T04:59:59.5Z", time.Time{}
	frames := [][]entry{json, {{topic: "x/%2B", at: at, payload: random}, {id: "r", topic: "x/y", at: at}}, json[:1]}
	gen := idGen{prefix: idPrefix("0123456789ab"), n: 41}
	pack, ends := framedPack(t, gen, true, frames...)
	_, rawEnds := framedPack(t, gen, false, frames...)
	if binary.LittleEndian.Uint32(pack[1:])&1 != 1 || ends[0] > rawEnds[0]/2 {
		t.Errorf("a frame of JSON was stored in %d bytes (%d as it is)", ends[0], rawEnds[0])
	}
	if binary.LittleEndian.Uint32(pack[ends[0]:])&1 != 0 || ends[1]-ends[0] != rawEnds[1]-rawEnds[0] {
		t.Error("a frame of random bytes was stored compressed")
	}
	var want []string
	n := gen.n
	for _, entries := range frames {
		for _, e := range entries {
			if e.id == "" {
				e.id = idGen{prefix: gen.prefix, n: n}.String()
				n++
			}
			want = append(want, fmt.Sprintf("%s %s %s %v %q", e.id, e.topic, e.source, e.time(), e.payload))
		}
	}
	for _, compress := range []bool{true, false} {
		pack, _ := framedPack(t, gen, compress, frames...)
		var got []string
		if err := unpack(pack, func(r Record) bool {
			got = append(got, fmt.Sprintf("%s %s %s %v %q", r.ID, r.Topic, r.Source, r.Time, r.Payload))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("compress %v: read back\n%s\nwant\n%s", compress, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	for _, stop := range []int{2, len(json), len(json) + 1} {
		n := 0
		if err := unpack(pack, func(Record) bool { n++; return n < stop }); err != nil || n != stop {
			t.Errorf("read %d after the %dth said stop (%v)", n, stop, err)
		}
	}
}

// TestAQueuedStagePackTakesNoRecord: a stage's pack (version 3) in the
// queue is whole; a message queued after it on the same first level
// begins a pack of its own, and both read back. (Appended to the stage's
// pack, its record was read as a frame, and the whole pack was lost.)
func TestAQueuedStagePackTakesNoRecord(t *testing.T) {
	framed, _ := framedPack(t, idGen{prefix: "h-b-", n: 1}, true, []entry{{topic: "pub/a", payload: []byte("staged")}})
	var q packQueue
	var free packBuffers
	q.addPack(queuedPack{data: framed, msgs: 1, token: "pub"})
	q.add(&entry{id: "direct", topic: "pub/b", payload: []byte("queued")}, idGen{}, maxPackBytes, &free)
	if len(q.packs) != 2 {
		t.Fatalf("%d packs in the queue, want the stage's and one of its own", len(q.packs))
	}
	var got []string
	for _, p := range q.packs {
		if err := unpack(p.data, func(r Record) bool { got = append(got, r.Topic); return true }); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, " ") != "pub/a pub/b" {
		t.Fatalf("read back %v", got)
	}
}

// TestUnpackRefusesWhatItCannotRead: a truncated or foreign pack is an
// error, never a panic or a length taken on trust.
func TestUnpackRefusesWhatItCannotRead(t *testing.T) {
	e := entry{id: "i", topic: "a/b", payload: []byte("payload")}
	good := appendPacked([]byte{packVersion}, &e, idGen{})
	for i := range len(good) - 1 {
		if err := unpack(good[:i], func(Record) bool { return true }); err == nil {
			t.Errorf("%d of %d bytes read without error", i, len(good))
		}
	}
	huge := append([]byte{packVersion}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	if err := unpack(huge, func(Record) bool { return true }); err == nil {
		t.Error("a length past the data was taken")
	}
	if err := unpack([]byte(`{"json":"from before packs"}`), func(Record) bool { return true }); err == nil {
		t.Error("a message that is not a pack was read")
	}

	// A stage's pack cut anywhere but at a frame's end.
	framed, ends := framedPack(t, idGen{prefix: "h-b-", n: 1}, true, []entry{e, e}, []entry{e})
	for i := 2; i < len(framed); i++ {
		if err := unpack(framed[:i], func(Record) bool { return true }); (err == nil) != slices.Contains(ends, i) {
			t.Errorf("%d of %d bytes of a framed pack (frames end at %v): %v", i, len(framed), ends, err)
		}
	}
	// A made id's prefix longer than the ids the history makes.
	long, _ := framedPack(t, idGen{prefix: strings.Repeat("p", idPrefixLen+1), n: 1}, false, []entry{{topic: "a"}})
	if err := unpack(long, func(Record) bool { return true }); err == nil {
		t.Error("a frame whose ids' prefix is longer than the history's was read")
	}
	// Frames that each decompress to less than a pack holds, but more
	// together, are refused: what unpack decompresses is a pack's room.
	zeros := []entry{{id: "z", topic: "a", payload: make([]byte, maxPackBytes*2/3)}}
	one, _ := framedPack(t, idGen{}, true, zeros)
	if err := unpack(one, func(Record) bool { return true }); err != nil || len(one) > maxPackBytes/100 {
		t.Fatalf("a frame of zeros, compressed to %d bytes: %v", len(one), err)
	}
	two, _ := framedPack(t, idGen{}, true, zeros, zeros)
	if err := unpack(two, func(Record) bool { return true }); err == nil {
		t.Error("frames decompressing to more than a pack holds in all were read")
	}
}

// TestPacksSplitAtTheirBound: messages whose payloads add up to more than
// a pack holds are stored in several packs, and read back whole and in
// order, a message larger than a pack alone in its own.
func TestPacksSplitAtTheirBound(t *testing.T) {
	h, reg := open(t, DefaultConfig())
	sizes := []int{maxPackBytes / 3, maxPackBytes / 3, maxPackBytes / 3, maxPackBytes + 10, 10, maxPackBytes / 2}
	h.mu.Lock() // the writer takes them all in one batch
	for i, n := range sizes {
		h.enqueue(&entry{id: fmt.Sprint(i), topic: fmt.Sprintf("big/%d", i), at: time.Now(), payload: bytes.Repeat([]byte{byte('a' + i)}, n)}, idGen{})
	}
	h.mu.Unlock()
	testkit.Eventually(t, func() bool { return h.written.Load() == uint64(len(sizes)) }, "written")
	var got []string
	if _, err := h.Replay(t.Context(), Query{Filters: []string{"big/#"}}, func(r Record) error {
		if len(r.Payload) != sizes[len(got)] || strings.Trim(string(r.Payload), string(rune('a'+len(got)))) != "" {
			t.Errorf("%s: %d bytes, want %d", r.Topic, len(r.Payload), sizes[len(got)])
		}
		got = append(got, r.Topic)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := "big/0 big/1 big/2 big/3 big/4 big/5"; strings.Join(got, " ") != want {
		t.Fatalf("replayed %v, want %s", got, want)
	}
	if m := metricValue(t, reg, "firehose_history_messages", ""); m != float64(len(sizes)) {
		t.Fatalf("firehose_history_messages %v, want %d (messages, not packs)", m, len(sizes))
	}
	st, _ := h.st.state(t.Context())
	if st.Msgs < 3 || st.Msgs >= uint64(len(sizes)) {
		t.Fatalf("%d packs for %d messages, some too big to share one", st.Msgs, len(sizes))
	}
}

// TestNumbersGoOnAcrossARestart: a reopened history numbers its messages
// on from the stream's last pack, so that the messages it holds are
// counted right.
func TestNumbersGoOnAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	for round := 1; round <= 2; round++ {
		h, reg := openIn(t, DefaultConfig(), dir)
		for i := range 5 {
			h.Record(&bus.Message{Topic: fmt.Sprintf("r%d/%d", round, i), Payload: []byte("1")})
		}
		testkit.Eventually(t, func() bool { return h.written.Load() == 5 }, "written")
		if m := metricValue(t, reg, "firehose_history_messages", ""); m != float64(5*round) {
			t.Fatalf("round %d: firehose_history_messages %v, want %d", round, m, 5*round)
		}
		if err := h.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackSubjects: a pack's subject is its topics' first level when that
// is a plain token; a replay asks for its filters' first levels, or every
// pack for a wildcard first level.
func TestPackSubjects(t *testing.T) {
	for topic, want := range map[string]string{
		"chef/org/n/status": "p.pack.chef", "ansible": "p.pack.ansible", "/a": "p.pack._",
		"$SYS/broker/uptime": "p.pack._", "a.b/c": "p.pack._", "x%2F/y": "p.pack._",
	} {
		if got := packSubject("p", topic); got != want {
			t.Errorf("%s: %s, want %s", topic, got, want)
		}
	}
	for filters, want := range map[string]string{
		"chef/+/+/status ansible/# chef/#": "p.pack.chef p.pack.ansible",
		"chef/# +/x":                       "p.pack.>",
		"#":                                "p.pack.>",
		"$SYS/# a.b/#":                     "p.pack._",
	} {
		if got := strings.Join(packSubjects("p", strings.Fields(filters)), " "); got != want {
			t.Errorf("%s: %s, want %s", filters, got, want)
		}
	}
}

// TestReplayKeepsTheOrderAcrossSources records messages of several sources
// interleaved, in one batch: a replay of all of them has them in the order
// recorded, and one of a source only its own.
func TestReplayKeepsTheOrderAcrossSources(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	var all, chef []string
	h.mu.Lock() // the writer takes them all in one batch
	for i := range 30 {
		topic := fmt.Sprintf("%s/%d", []string{"chef", "ansible", "chef", "gerrit", "a.b"}[i%5], i)
		all = append(all, topic)
		if strings.HasPrefix(topic, "chef/") {
			chef = append(chef, topic)
		}
		h.enqueue(&entry{id: fmt.Sprint(i), topic: topic, at: time.Now(), payload: []byte("1")}, idGen{})
	}
	h.mu.Unlock()
	if got := replayTopics(t, h, Query{Filters: []string{"#"}}); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Fatalf("replayed %v\nwant %v", got, all)
	}
	if got := replayTopics(t, h, Query{Filters: []string{"chef/#", "a.b/#"}}); len(got) != len(chef)+6 || got[0] != "chef/0" || got[len(got)-1] != "a.b/29" {
		t.Fatalf("replayed %v", got)
	}
}

// TestCompressedPacks: a pack of JSON is stored compressed and read back as
// it went in; one that would not shrink, or that is larger than a pack
// holds, is stored as it is; a compressed pack that claims more than a pack
// holds, or is cut short, is refused without decompressing it.
func TestCompressedPacks(t *testing.T) {
	var in []entry
	pack := []byte{packVersion}
	for i := range 50 {
		in = append(in, entry{id: fmt.Sprint(i), topic: "ansible/playbook/x/task/h/ok", source: "ansible",
			received: "2026-11-28T05:00:00Z", payload: fmt.Appendf(nil, `{"task":"install %d","host":"web-%d","status":"ok"}`, i, i%7)})
		pack = appendPacked(pack, &in[i], idGen{})
	}
	var buf []byte
	z := compressPack(&buf, pack)
	if z[0] != packVersionS2 || len(z) > len(pack)/2 {
		t.Fatalf("version %d, %d bytes from %d: JSON is not compressed", z[0], len(z), len(pack))
	}
	var got []Record
	if err := unpack(z, func(r Record) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d records back from %d", len(got), len(in))
	}
	for i, e := range in {
		if got[i].ID != e.id || got[i].Topic != e.topic || !bytes.Equal(got[i].Payload, e.payload) || !got[i].Time.Equal(e.time()) {
			t.Errorf("%d: %+v, want %+v", i, got[i], e)
		}
	}

	random := make([]byte, 2000)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(random)
	raw := appendPacked([]byte{packVersion}, &entry{id: "r", topic: "a", payload: random}, idGen{})
	if z := compressPack(&buf, raw); !bytes.Equal(z, raw) {
		t.Error("random bytes were stored compressed, larger")
	}
	// A large pack is compressed only if its start shrinks: one that
	// begins with random bytes is stored as it is, zeros after them or not.
	mixed := make([]byte, 8*compressProbe)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(mixed[:2*compressProbe])
	startsRandom := appendPacked([]byte{packVersion}, &entry{id: "m", topic: "a", payload: mixed}, idGen{})
	if z := compressPack(&buf, startsRandom); !bytes.Equal(z, startsRandom) {
		t.Errorf("a large pack whose start does not compress was compressed (%d bytes from %d)", len(z), len(startsRandom))
	}
	clear(mixed[:2*compressProbe])
	_, _ = rand.NewChaCha8([32]byte{2}).Read(mixed[6*compressProbe:])
	if z := compressPack(&buf, appendPacked([]byte{packVersion}, &entry{id: "m", topic: "a", payload: mixed}, idGen{})); z[0] != packVersionS2 {
		t.Error("a large pack whose start compresses was stored as it is")
	}
	big := appendPacked([]byte{packVersion}, &entry{id: "b", topic: "a", payload: make([]byte, maxPackBytes)}, idGen{})
	if z := compressPack(&buf, big); !bytes.Equal(z, big) {
		t.Error("a pack larger than a pack holds was compressed: it could not be read back")
	}

	// A small block that decompresses to more than a pack holds (a pack
	// of one message of maxPackBytes zeros, which the writer stores
	// uncompressed) is refused before it is decompressed.
	bomb := append([]byte{packVersionS2}, s2.Encode(nil, big[1:])...)
	if len(bomb) > maxPackBytes/100 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	if err := unpack(bomb, func(Record) bool { return true }); err == nil {
		t.Error("a pack decompressing to more than a pack holds was read")
	}
	for i := 1; i < len(z); i += 7 {
		if err := unpack(z[:i], func(Record) bool { return true }); err == nil {
			t.Errorf("%d of %d compressed bytes read without error", i, len(z))
		}
	}
}

// FuzzUnpack feeds unpack crafted packs of both versions: it must refuse or
// read them, never panic, and never hand back more than a pack holds.
func FuzzUnpack(f *testing.F) {
	pack := []byte{packVersion}
	for i := range 20 {
		pack = appendPacked(pack, &entry{id: fmt.Sprint(i), topic: "chef/org/n/status", payload: []byte(`{"status":"ok"}`)}, idGen{})
	}
	f.Add(pack)
	var buf []byte
	f.Add(bytes.Clone(compressPack(&buf, pack)))
	f.Add([]byte{packVersionS2, 0xff, 0xff, 0x3f})
	body := beginFrame(nil, idGen{prefix: "h-b-", n: 9})
	for i := range 20 {
		body = appendFramed(body, &entry{id: []string{"", "i"}[i%2], topic: "chef/org/n/status", payload: []byte(`{"status":"ok"}`)})
	}
	framed, _ := appendFrame([]byte{packVersionFrames}, body, true)
	f.Add(framed)
	raw, _ := appendFrame([]byte{packVersionFrames}, body, false)
	f.Add(raw)
	f.Fuzz(func(t *testing.T, data []byte) {
		total, n := 0, 0
		_ = unpack(data, func(r Record) bool {
			total += len(r.ID) + len(r.Topic) + len(r.Source) + len(r.Payload)
			n++
			return true
		})
		// A frame makes the ids it leaves out: a prefix of
		// idPrefixLen at most and a number.
		if total > max(len(data), maxPackBytes)+n*maxGenIDLen {
			t.Fatalf("%d bytes of %d records from a pack of %d", total, n, len(data))
		}
	})
}

// TestQueueMemoryIsBoundedByItsMessages queues small messages whose first
// levels alternate, so that each is a pack of its own: the packs' buffers
// must cost about what the messages do (plus a fixed slack), not a
// minimum buffer each (64 KiB a message, 4 GiB for the default
// queue_size).
func TestQueueMemoryIsBoundedByItsMessages(t *testing.T) {
	var (
		q    packQueue
		free packBuffers
		data int
	)
	for i := range 1000 {
		e := entry{id: "x", topic: []string{"chef/a", "ansible/b"}[i%2], payload: []byte("{}")}
		q.add(&e, idGen{}, maxPackBytes-packHeaderRoom, &free)
		data += packedSize(&e)
	}
	if len(q.packs) != 1000 {
		t.Fatalf("%d packs of 1000 messages of alternating first levels", len(q.packs))
	}
	held := 0
	for _, p := range q.packs {
		held += cap(p.data)
	}
	if limit := 2*data + maxFreeBytes; held > limit {
		t.Errorf("the queue's packs hold %d bytes for %d bytes of messages: more than %d", held, data, limit)
	}
}
