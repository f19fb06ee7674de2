package history

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// Publishers recording through stages at once, beside the bridge's own
// messages recorded directly: a replay has every message once, with an id
// of its own, and each publisher's in the order it published them, the
// ones its stage still held included.
func TestStagesKeepEachPublishersOrder(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	const pubs, each = 4, 3000
	var wg sync.WaitGroup
	for p := range pubs {
		s := h.NewStage()
		defer s.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Two first levels: a pack is handed over when it
				// changes.
				h := "pub"
				if i%500 == 499 {
					h = "other"
				}
				s.RecordFields(fmt.Sprintf("%s/%d", h, p), []byte(strconv.Itoa(i)), "", "", "")
			}
		}()
	}
	for i := range each {
		h.RecordFields("bridge/own", []byte(strconv.Itoa(i)), fmt.Sprintf("own-%d", i), "test", "")
	}
	wg.Wait()
	next := map[string]int{}
	ids := map[string]bool{}
	n := 0
	if _, err := h.Replay(t.Context(), Query{Filters: []string{"#"}}, func(r Record) error {
		n++
		if ids[r.ID] || r.ID == "" {
			return fmt.Errorf("message %d: id %q again or empty", n, r.ID)
		}
		ids[r.ID] = true
		publisher := r.Topic[strings.IndexByte(r.Topic, '/')+1:]
		if want := strconv.Itoa(next[publisher]); string(r.Payload) != want {
			return fmt.Errorf("publisher %s: message %s after %d of its own, want %s", publisher, r.Payload, next[publisher], want)
		}
		next[publisher]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != pubs*each+each {
		t.Fatalf("replayed %d messages, want %d", n, pubs*each+each)
	}
}

// A stage's messages reach the store with nothing reading the history:
// the writer comes for what stages hold.
func TestTheWriterTakesWhatStagesHold(t *testing.T) {
	h, reg := open(t, DefaultConfig())
	s := h.NewStage()
	defer s.Close()
	for i := range 10 {
		s.RecordFields(fmt.Sprintf("staged/%d", i), []byte("x"), "", "", "")
	}
	testkit.Eventually(t, func() bool { return metricValue(t, reg, "firehose_history_stored_total", "") == 10 },
		"the 10 staged messages stored, with no reader")
}

// Follow through stages has no gap and no duplicate: a publisher records
// through a stage without pause while Follow begins, and the replay then
// the live part hand fn each of its messages once, in order. Staged
// messages recorded before the follower are in the store when the replay
// reads it, and those after it come live, though nothing was handed over
// for them in between.
func TestFollowThroughStagesHasNoGapAndNoDuplicate(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var published atomic.Int64
	ahead := make(chan struct{}, 5000) // the follower's buffer stays bounded
	stopAt := atomic.Int64{}
	stopAt.Store(1 << 62)
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		s := h.NewStage()
		defer s.Close()
		for i := int64(0); i < stopAt.Load(); i++ {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			s.RecordFields("seq/x", []byte(strconv.FormatInt(i, 10)), "", "", "")
			published.Store(i + 1)
		}
	}()
	testkit.Eventually(t, func() bool { return published.Load() >= 1000 }, "1000 messages published")
	next, replayed, live := int64(0), 0, 0
	_, err := h.Follow(ctx, Query{Filters: []string{"seq/#"}}, func(r Record) error {
		<-ahead
		if string(r.Payload) != strconv.FormatInt(next, 10) {
			return fmt.Errorf("after %d replayed and %d live messages, got message %s, want %d", replayed, live, r.Payload, next)
		}
		next++
		if !r.Live {
			replayed++
			return nil
		}
		if live++; live == 1 {
			stopAt.Store(published.Load() + 1000) // on through the switch and past it
		}
		if next == stopAt.Load() {
			cancel()
		}
		return nil
	}, nil)
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	<-pubDone
	if next != stopAt.Load() {
		t.Fatalf("Follow ended after %d of %d messages (%v)", next, stopAt.Load(), err)
	}
	if replayed < 1000 || live < 1000 {
		t.Fatalf("%d replayed, %d live: the switch was not exercised", replayed, live)
	}
}

// Stages reserve room in history.queue_bytes for the packs they build, and
// at most half of it: a stage that finds no room to reserve records into
// the queue directly, where queue_bytes bounds what waits. The stages'
// and the history's locks are held throughout, so that the writer takes
// nothing meanwhile.
func TestStagesStayWithinQueueBytes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueBytes = bytesize.MiB
	h, _ := open(t, cfg)
	// Each reserves an eighth of queue_bytes: four fit half of it.
	stages := []*Stage{h.NewStage(), h.NewStage(), h.NewStage(), h.NewStage(), h.NewStage()}
	for _, s := range stages {
		s.mu.Lock()
	}
	h.mu.Lock()
	var began []bool
	for _, s := range stages {
		began = append(began, h.restage(s, "big/x", "big", 100))
	}
	staged, holding := h.staged, len(h.holding)
	h.mu.Unlock()
	for _, s := range stages {
		s.mu.Unlock()
	}
	if fmt.Sprint(began) != "[true true true true false]" || staged != int(bytesize.MiB)/2 || holding != 4 {
		t.Fatalf("five stages with queue_bytes 1 MiB: began packs %v, reserving %d bytes, %d holding; want the first four, reserving half", began, staged, holding)
	}
	// The fifth records into the queue directly: its messages are
	// stored all the same.
	for _, s := range stages {
		s.RecordFields("big/x", []byte("x"), "", "", "")
	}
	for _, s := range stages {
		s.Close()
	}
	h.mu.Lock()
	staged, holding = h.staged, len(h.holding)
	h.mu.Unlock()
	if staged != 0 || holding != 0 {
		t.Fatalf("closed stages still reserve %d bytes, %d of them holding", staged, holding)
	}
	testkit.Eventually(t, func() bool { return testutil.ToFloat64(h.metrics.stored) == 5 }, "the five messages stored")
}

// A replay has what a stage holds: the stage is handed over first, not
// left to the writer's next pass.
func TestReplayHasWhatStagesHold(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	s := h.NewStage()
	defer s.Close()
	s.RecordFields("held/1", []byte("x"), "", "", "")
	testkit.Eventually(t, func() bool { return h.written.Load() == 1 }, "the first message written")
	s.RecordFields("held/2", []byte("x"), "", "", "") // the writer lingers before it comes for this one
	if got := replayTopics(t, h, Query{Filters: []string{"held/#"}}); strings.Join(got, " ") != "held/1 held/2" {
		t.Fatalf("replayed %v, want held/1 held/2", got)
	}
}

// A stage's pack holds at most an eighth of history.queue_size messages:
// the queue takes a pack whole, and a small queue_size must still take
// several.
func TestStagePacksFitASmallQueue(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueSize = 64
	h, reg := open(t, cfg)
	s := h.NewStage()
	for i := range 100 {
		s.RecordFields("small/queue", []byte(strconv.Itoa(i)), "", "", "")
		s.mu.Lock()
		n := s.pack.msgs
		s.mu.Unlock()
		if n > 8 {
			t.Fatalf("a stage's pack holds %d messages, with queue_size 64", n)
		}
	}
	s.Close()
	testkit.Eventually(t, func() bool {
		return metricValue(t, reg, "firehose_history_stored_total", "")+metricValue(t, reg, "firehose_history_lost_total", "queue_full") == 100
	}, "the 100 messages stored, or counted as lost when the small queue was full")
}

// TestStageMemoryIsBoundedByItsMessages is TestQueueMemoryIsBoundedByItsMessages
// for a stage: a publisher whose first levels alternate begins a pack with
// each message, and while the store is slow those packs wait in the queue;
// their buffers must cost about what the messages do (plus a fixed slack),
// not minStageBuffer each (256 MiB for the default queue_size). The writer
// is held in handOverListed by another stage's lock, as a slow store holds
// it in send, so that it takes nothing from the queue meanwhile.
func TestStageMemoryIsBoundedByItsMessages(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	holder, s := h.NewStage(), h.NewStage()
	for held := false; !held; {
		holder.RecordFields("hold/x", []byte("x"), "", "", "")
		holder.mu.Lock()
		if held = holder.pack.msgs > 0; !held {
			holder.mu.Unlock() // the writer took it already: again
		}
	}
	testkit.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return !holder.listed
	}, "the writer waiting for the holding stage")
	payload := make([]byte, 100)
	data := 0
	for i := range 4096 {
		e := entry{topic: []string{"chef/a", "ansible/b"}[i%2], payload: payload}
		s.RecordFields(e.topic, e.payload, "", "", "")
		data += packedSize(&e)
	}
	h.mu.Lock()
	held, packs := h.queue.held, len(h.queue.packs)
	h.mu.Unlock()
	holder.mu.Unlock()
	holder.Close()
	s.Close()
	if packs < 4000 {
		t.Fatalf("%d packs queued of 4096 messages of alternating first levels", packs)
	}
	if limit := 2*data + maxFreeBytes; held > limit {
		t.Errorf("the queue's packs hold %d bytes for %d bytes of messages: more than %d", held, data, limit)
	}
}

// A writer's pass leaves a stage's pack begun less than packLinger ago to
// fill (under load it passes more often than that, and cutting each pack
// at each pass made small packs), takes it once it is older, and takes it
// at once when it is closing.
func TestAYoungStagePackIsLeftToFill(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	s := h.NewStage()
	defer s.Close()
	began := func() (time.Time, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.began, s.pack.msgs > 0
	}
	for {
		s.RecordFields("young/x", []byte("x"), "", "", "")
		at, held := began()
		if !held {
			continue // the writer took it already (a stalled machine): again
		}
		if !s.handOverBegunBy(at.Add(packLinger/2), false) {
			break // left to fill
		}
		if time.Since(at) >= packLinger {
			continue // the writer may have taken it meanwhile: again
		}
		t.Fatal("a pack begun half packLinger ago was handed over")
	}
	if !s.handOverBegunBy(time.Now(), true) {
		t.Fatal("a closing writer left a young pack")
	}
	testkit.Eventually(t, func() bool { return testutil.ToFloat64(h.metrics.stored) >= 1 }, "the message stored")
	for {
		s.RecordFields("young/y", []byte("y"), "", "", "")
		if at, held := began(); held {
			if !s.handOverBegunBy(at.Add(packLinger), false) {
				t.Fatal("a pack begun packLinger ago was left")
			}
			break
		}
	}
}

// A reader takes the locks of the stages that hold a pack only, not of
// every connected publisher's: a fleet's publishers, which each published
// a message a while ago, cost a history request nothing. Here every
// stage's lock is held by someone else (as a publisher busy recording
// holds its own), and the replay must not wait for any of them.
func TestAReaderLeavesStagesThatHoldNothing(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	stages := make([]*Stage, 1000)
	for i := range stages {
		stages[i] = h.NewStage()
		stages[i].RecordFields("fleet/"+strconv.Itoa(i), []byte("up"), "", "", "")
	}
	testkit.Eventually(t, func() bool { return h.written.Load() == uint64(len(stages)) }, "the writer took every stage's message")
	for _, s := range stages {
		s.mu.Lock()
	}
	replayed := make(chan []string, 1)
	go func() { replayed <- replayTopics(t, h, Query{Filters: []string{"fleet/7"}}) }()
	var got []string
	testkit.Eventually(t, func() bool {
		select {
		case got = <-replayed:
			return true
		default:
			return false
		}
	}, "the replay, while every stage's lock is held")
	for _, s := range stages {
		s.mu.Unlock()
		s.Close()
	}
	if strings.Join(got, " ") != "fleet/7" {
		t.Fatalf("replayed %v, want fleet/7", got)
	}
}

// A stage that asked the followers' filters before a follower came, and
// begins a pack after the follower's handOverAll looked for stages that
// hold one, must not stage a message the follower wants: the follower
// would have it neither from the store (it is not in the queue when the
// follower's replay ends) nor live. restage asks the filters again, under
// the lock the follower is added under, and sends it to the queue.
func TestAStageBeginsNoPackForAFollowedTopic(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	h.mu.Lock()
	h.followers[&follower{filters: []string{"watched/#"}}] = struct{}{}
	h.setFollowedLocked()
	h.mu.Unlock()
	s := h.NewStage()
	defer s.Close()
	s.mu.Lock()
	h.mu.Lock()
	watched, other := h.restage(s, "watched/x", "watched", 10), h.restage(s, "other/x", "other", 10)
	h.mu.Unlock()
	s.mu.Unlock()
	if watched || !other {
		t.Fatalf("restage began a pack for a followed topic: %v, for another: %v; want false, true", watched, other)
	}
}

// A publisher's JSON is stored compressed, a frame at a time; random
// payloads, which do not shrink, as they are; and once its payloads shrink
// again, so are they stored: a stage tries again after a few frames. A
// replay has each message as it was published.
func TestStagesStoreWhatShrinksCompressed(t *testing.T) {
	h, reg := open(t, DefaultConfig())
	s := h.NewStage()
	random := make([]byte, 128<<10)
	_, _ = rand.NewChaCha8([32]byte{4}).Read(random)
	var sent [][]byte
	for at := 0; at < len(random); at += 1000 {
		sent = append(sent, random[at:min(at+1000, len(random))])
	}
	jsonBytes := 0
	for i := 0; jsonBytes < 2<<20; i++ {
		p := fmt.Appendf(nil, `{"node":"web-%d.example.org","org":"chef","run_id":"%08x-%04x","status":"success",`+
			`"start_time":"2026-11-28T05:%02d:%02d.%03dZ","updated_resources":%d,"total_resources":340,"environment":"production",`+
			`"cookbooks":["base","nginx","ssh","users","ntp","monitoring","logrotate","sysctl"],"tags":[]}`,
			i, i*2654435761, i%65536, i/60%60, i%60, i%1000, i%17)
		sent = append(sent, p)
		jsonBytes += len(p)
	}
	for _, p := range sent {
		s.RecordFields("pub/x", p, "", "", "")
	}
	s.Close()
	testkit.Eventually(t, func() bool { return metricValue(t, reg, "firehose_history_stored_total", "") == float64(len(sent)) },
		"every message stored")
	if stored, most := metricValue(t, reg, "firehose_history_bytes", ""), float64(len(random)+jsonBytes/2); stored > most {
		t.Errorf("%.0f bytes stored for %d of random bytes and %d of JSON: more than %.0f", stored, len(random), jsonBytes, most)
	}
	i := 0
	if _, err := h.Replay(t.Context(), Query{Filters: []string{"pub/#"}}, func(r Record) error {
		if i >= len(sent) || !bytes.Equal(r.Payload, sent[i]) {
			return fmt.Errorf("message %d: %.40q", i, r.Payload)
		}
		i++
		return nil
	}); err != nil || i != len(sent) {
		t.Fatalf("replayed %d of %d: %v", i, len(sent), err)
	}
}

// A fleet's nodes each publish now and then, each message beginning a
// pack of its stage's: the stages' frame buffers are kept for the next
// round, not allocated again for each message (36 KB each).
func TestQuietPublishersReuseFrameBuffers(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	const nodes, rounds = 100, 5
	stages := make([]*Stage, nodes)
	for i := range stages {
		stages[i] = h.NewStage()
		defer stages[i].Close()
	}
	round := func() {
		want := h.written.Load() + nodes
		for i, s := range stages {
			s.RecordFields(fmt.Sprintf("fleet/node-%d/status", i), []byte(`{"status":"ok"}`), "", "", "")
		}
		testkit.Eventually(t, func() bool { return h.written.Load() >= want }, "a round written")
	}
	round()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		round()
	}
	runtime.ReadMemStats(&after)
	if perMsg := (after.TotalAlloc - before.TotalAlloc) / (nodes * rounds); perMsg > frameBuffer/4 {
		t.Errorf("%d bytes allocated a message (the writer's and nats-server's included)", perMsg)
	}
}

// A message on a topic a live follower watches goes to the queue straight
// after the stage hands its pack over, on the same first level: both are
// in the history, as the metrics say.
func TestAFollowedMessageAfterAStagedPackIsKept(t *testing.T) {
	h, reg := open(t, DefaultConfig())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	following := make(chan struct{})
	go func() {
		_, _ = h.Follow(ctx, Query{Filters: []string{"pub/watched"}}, func(Record) error { return nil }, func(Result) error { close(following); return nil })
	}()
	<-following
	s := h.NewStage()
	s.RecordFields("pub/a", []byte("staged"), "", "", "")
	s.RecordFields("pub/watched", []byte("followed"), "", "", "")
	s.Close()
	testkit.Eventually(t, func() bool { return metricValue(t, reg, "firehose_history_stored_total", "") == 2 }, "both stored")
	if got := replayTopics(t, h, Query{Filters: []string{"pub/#"}}); strings.Join(got, " ") != "pub/a pub/watched" {
		t.Fatalf("replayed %v, want pub/a pub/watched", got)
	}
}

// A frame cut short that does not shrink (a ping handed over alone) does
// not keep the publisher's next frames from being compressed: only a full
// frame tells that its payloads do not shrink.
func TestAShortFrameThatDoesNotShrinkLeavesTheNextCompressed(t *testing.T) {
	h, reg := open(t, DefaultConfig())
	s := h.NewStage()
	s.RecordFields("pub/x", []byte(`{"status":"ok"}`), "", "", "")
	s.handOver() // as the writer or a reader does
	n, jsonBytes := 1, 0
	for i := 0; jsonBytes < 512<<10; i++ {
		p := fmt.Appendf(nil, `{"node":"web-%d.example.org","status":"success","total_resources":340,"environment":"production"}`, i)
		s.RecordFields("pub/x", p, "", "", "")
		n, jsonBytes = n+1, jsonBytes+len(p)
	}
	s.Close()
	testkit.Eventually(t, func() bool { return metricValue(t, reg, "firehose_history_stored_total", "") == float64(n) }, "every message stored")
	if stored := metricValue(t, reg, "firehose_history_bytes", ""); stored > float64(jsonBytes/2) {
		t.Errorf("%.0f bytes stored for %d bytes of JSON after a ping", stored, jsonBytes)
	}
}
