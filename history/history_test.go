package history

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testkit"
)

func open(t testing.TB, cfg Config) (*History, *prometheus.Registry) {
	t.Helper()
	return openIn(t, cfg, t.TempDir())
}

// openIn opens a history stored in dataDir.
func openIn(t testing.TB, cfg Config, dataDir string) (*History, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h, err := Open(t.Context(), cfg, Options{DataDir: dataDir, Registerer: reg, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, reg
}

func replayTopics(t *testing.T, h *History, q Query) []string {
	t.Helper()
	var got []string
	if _, err := h.Replay(t.Context(), q, func(r Record) error {
		got = append(got, r.Topic)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func metricValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() == label {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}

// TestRetentionBySize keeps the newest messages within max_bytes, drops the
// oldest, and counts them as dropped for size.
func TestRetentionBySize(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxBytes = bytesize.MiB
	h, reg := open(t, cfg)
	const n = 600 // about 2.4 MB
	random := rand.NewChaCha8([32]byte{})
	for i := range n {
		// Random bytes: packs are compressed, and these stay their size.
		payload := make([]byte, 4000)
		_, _ = random.Read(payload)
		h.Record(&bus.Message{Topic: fmt.Sprintf("test/%d", i), Payload: payload})
	}
	testkit.Eventually(t, func() bool { return h.written.Load() == n }, "%d messages written", n)
	if lost := testutil.ToFloat64(h.metrics.lost.WithLabelValues("store_error")); lost != 0 {
		t.Fatalf("%v messages lost", lost)
	}
	got := replayTopics(t, h, Query{Filters: []string{"#"}})
	if len(got) == 0 || len(got) >= n || got[len(got)-1] != fmt.Sprintf("test/%d", n-1) {
		t.Fatalf("after %d messages of 4 KB within 1 MiB, %d kept, the last %v", n, len(got), got[len(got)-1:])
	}
	if want := fmt.Sprintf("test/%d", n-len(got)); got[0] != want {
		t.Fatalf("the oldest kept is %s, want %s: the oldest go first", got[0], want)
	}
	if b := metricValue(t, reg, "firehose_history_bytes", ""); b > float64(bytesize.MiB) {
		t.Fatalf("the stream holds %v bytes, over max_bytes", b)
	}
	if dropped := metricValue(t, reg, "firehose_history_removed_total", "size"); dropped != float64(n-len(got)) {
		t.Fatalf("removed for size: %v, want %d", dropped, n-len(got))
	}
}

// TestRetentionByAge drops messages older than max_age, and counts them as
// dropped for age.
func TestRetentionByAge(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxAge = time.Second
	h, reg := open(t, cfg)
	for i := range 10 {
		h.Record(&bus.Message{Topic: fmt.Sprintf("test/%d", i), Payload: []byte("{}")})
	}
	testkit.Eventually(t, func() bool { return h.written.Load() == 10 }, "10 messages written")
	if kept := metricValue(t, reg, "firehose_history_messages", ""); kept == 0 {
		t.Fatal("nothing stored")
	}
	testkit.Eventually(t, func() bool { return metricValue(t, reg, "firehose_history_messages", "") == 0 },
		"the messages to age out")
	if got := replayTopics(t, h, Query{Filters: []string{"#"}}); len(got) != 0 {
		t.Fatalf("replay after max_age: %v", got)
	}
	if dropped := metricValue(t, reg, "firehose_history_removed_total", "age"); dropped != 10 {
		t.Fatalf("removed for age: %v, want 10", dropped)
	}
}

// TestWildcardsMeanWhatTheyMeanOnTheBus replays with MQTT filters over
// topics with escaped levels, dots and the parent of a "/#" filter.
func TestWildcardsMeanWhatTheyMeanOnTheBus(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	all := []string{
		"chef/org/web%2F1/run/failure", "chef/org/db.example.org/run/failure", "chef/org/db/run/success",
		"chef", "chef/org", "ansible/playbook/u/action/finish/FAILED", "x/%2B/%23", "x/*/>", "$SYS/broker/uptime",
	}
	for _, topic := range all {
		h.Record(&bus.Message{Topic: topic, Payload: []byte("1")})
	}
	// "#" leaves out $ topics, as on the bus: they are not even queued.
	testkit.Eventually(t, func() bool { return h.written.Load() == uint64(len(all)-1) }, "written")
	for _, c := range []struct {
		filters []string
		want    string
	}{
		{[]string{"chef/+/+/run/failure"}, "chef/org/web%2F1/run/failure chef/org/db.example.org/run/failure"},
		{[]string{"chef/#"}, "chef/org/web%2F1/run/failure chef/org/db.example.org/run/failure chef/org/db/run/success chef chef/org"},
		{[]string{"chef/org/db.example.org/#"}, "chef/org/db.example.org/run/failure"},
		{[]string{"x/%2B/#", "x/+/>"}, "x/%2B/%23 x/*/>"},
		{[]string{"#"}, strings.Join(all[:len(all)-1], " ")}, // not $ topics
		{[]string{"chef/#", "chef/+/+/run/failure"}, "chef/org/web%2F1/run/failure chef/org/db.example.org/run/failure chef/org/db/run/success chef chef/org"},
	} {
		if got := strings.Join(replayTopics(t, h, Query{Filters: c.filters}), " "); got != c.want {
			t.Errorf("%v: %s\nwant %s", c.filters, got, c.want)
		}
	}
}

// TestRecordNeverWaits fills the queue with the writer stuck: Record
// returns at once, and what does not fit is counted as lost.
func TestRecordNeverWaits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueSize = 4
	h, _ := open(t, cfg)
	h.st.server.Shutdown() // the store is gone; the writer waits on it no more than storeTimeout per batch
	for i := range 100 {
		h.Record(&bus.Message{Topic: fmt.Sprintf("test/%d", i), Payload: []byte("1")})
	}
	if lost := testutil.ToFloat64(h.metrics.lost.WithLabelValues("queue_full")) + testutil.ToFloat64(h.metrics.lost.WithLabelValues("store_error")); lost == 0 {
		t.Fatal("nothing counted as lost")
	}
	testkit.Eventually(t, func() bool { return strings.HasPrefix(h.Status(), "degraded: ") }, "status degraded")
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2h":                   now.Add(-2 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"3d":                   now.Add(-72 * time.Hour),
		"2026-11-27T22:00:00Z": time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-2h", "yesterday", "2026-11-27"} {
		if _, err := ParseTime(bad, now); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2h", "3d", "2026-11-27T22:00:00Z", "-1d", "99999999999d"} {
		f.Add(s)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, now)
		if err == nil && got.After(now) && !strings.Contains(s, "T") {
			t.Fatalf("%q: a duration back from now gave a later time %v", s, got)
		}
	})
}

// TestTimeOfMessagesWithoutOne: a message that comes without a time (an
// MQTT publisher's) is stamped with when it came: the first after a quiet
// spell with the clock itself, those that follow with the ticker's reading,
// never later than they came; the ticker stops once messages stop.
func TestTimeOfMessagesWithoutOne(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	var sent [][2]time.Time // the time around each Record
	for round := range 2 {
		testkit.Eventually(t, func() bool { return !h.ticking.Load() }, "the ticker stops when nothing comes")
		for i := range 50 {
			before := time.Now()
			h.Record(&bus.Message{Topic: fmt.Sprintf("t/%d/%d", round, i), Payload: []byte("x")})
			sent = append(sent, [2]time.Time{before, time.Now()})
		}
	}
	var got []time.Time
	if _, err := h.Replay(t.Context(), Query{Filters: []string{"t/#"}}, func(r Record) error {
		got = append(got, r.Time)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sent) {
		t.Fatalf("%d replayed of %d", len(got), len(sent))
	}
	for i, at := range got {
		if at.After(sent[i][1]) {
			t.Errorf("message %d stamped %v, after it was recorded (%v)", i, at, sent[i][1])
		}
		if i%50 == 0 && at.Before(sent[i][0]) {
			t.Errorf("message %d, the first after a quiet spell, stamped %v, before it came (%v)", i, at, sent[i][0])
		}
	}
	testkit.Eventually(t, func() bool { return !h.ticking.Load() }, "the ticker stops when nothing comes")
}

// TestQueueBytesBoundsWhatWaits: large messages wait up to
// history.queue_bytes, not queue_size of them: the rest are left out and
// counted, never waited for. The queue is filled under its lock, as
// Record fills it, with the writer kept from taking any meanwhile.
func TestQueueBytesBoundsWhatWaits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueBytes = bytesize.MiB
	h, _ := open(t, cfg)
	payload := make([]byte, 100<<10)
	h.mu.Lock()
	for i := range 40 { // 4 MB
		h.enqueue(&entry{id: fmt.Sprint(i), topic: fmt.Sprintf("big/%d", i), at: time.Now(), payload: payload}, idGen{})
		if h.queue.bytes > int(bytesize.MiB) {
			h.mu.Unlock()
			t.Fatalf("%d bytes wait to be written, over queue_bytes (1 MiB)", h.queue.bytes)
		}
	}
	queued := h.queue.msgs
	h.mu.Unlock()
	if queued < 9 || queued > 10 {
		t.Fatalf("%d messages of 100 KB queued within 1 MiB", queued)
	}
	if lost := testutil.ToFloat64(h.metrics.lost.WithLabelValues("queue_full")); int(lost) != 40-queued {
		t.Fatalf("%v counted as lost for a full queue, want %d", lost, 40-queued)
	}
	testkit.Eventually(t, func() bool { return h.written.Load() == uint64(queued) }, "the queued ones written")
}

// Sync.Wait returns once Follow's fn has been handed every message recorded
// before it, and not sooner: fn is held on the first live message, so a
// Wait that did not wait would return while fn cannot go on.
func TestSyncWaitsForWhatWasRecordedBeforeIt(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	var sync Sync
	if err := sync.Wait(t.Context()); err != nil {
		t.Fatalf("no Follow under way: Wait = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	release := make(chan struct{})
	var handed atomic.Int32
	replayed := make(chan struct{})
	followed := make(chan error, 1)
	go func() {
		_, err := h.Follow(ctx, Query{Filters: []string{"sync/#"}, Sync: &sync}, func(Record) error {
			<-release
			handed.Add(1)
			return nil
		}, func(Result) error {
			close(replayed)
			return nil
		})
		followed <- err
	}()
	select {
	case <-replayed:
	case <-time.After(time.Minute):
		t.Fatal("Follow never went live")
	}
	for i := range 3 {
		h.RecordFields(fmt.Sprintf("sync/%d", i), []byte("x"), "", "", "")
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err := sync.Wait(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while fn holds the first message = %v, want the deadline", err)
	}
	close(release)
	if err := sync.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := handed.Load(); n != 3 {
		t.Fatalf("Wait returned with %d of the 3 messages handed to fn", n)
	}
	cancel()
	<-followed
	if err := sync.Wait(t.Context()); err != nil {
		t.Fatalf("after Follow ended: Wait = %v", err)
	}
}

// A message left out of a full queue costs a count, not an error formatted
// for each: at the broker's rate, while a slow store holds the writer,
// the live path must not pay for the history's trouble.
func TestLeavingOutOfAFullQueueAllocatesNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueSize = 4
	h, _ := open(t, cfg)
	e := entry{id: "x", topic: "full/x", at: time.Now(), payload: []byte("x")}
	h.mu.Lock() // the writer takes nothing meanwhile
	defer h.mu.Unlock()
	for range cfg.QueueSize {
		h.enqueue(&e, idGen{})
	}
	if allocs := testing.AllocsPerRun(1000, func() { h.enqueue(&e, idGen{}) }); allocs != 0 {
		t.Fatalf("leaving a message out of the full queue allocated %v times", allocs)
	}
	if lost := testutil.ToFloat64(h.metrics.lost.WithLabelValues("queue_full")); lost != 1001 {
		t.Fatalf("%v counted as lost, want 1001", lost)
	}
	if !strings.HasPrefix(h.Status(), "degraded: queue_full: ") {
		t.Fatalf("status %q", h.Status())
	}
}

// TestRecordingBehindASlowStoreCopiesLittle: once the queue's buffers hold
// maxFreeBytes (the writer is behind), a pack begins at its first message's
// size; growing it as messages come must copy what it holds about twice,
// not the five times of append's growth by a quarter: recording must not
// cost more the further the writer falls behind.
func TestRecordingBehindASlowStoreCopiesLittle(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	h.mu.Lock() // the writer takes nothing meanwhile
	defer h.mu.Unlock()
	big := entry{id: "big", topic: "big/x", at: time.Now(), payload: make([]byte, 512<<10)}
	for h.queue.held < maxFreeBytes {
		h.enqueue(&big, idGen{})
	}
	e := entry{id: "x", topic: "chef/x", at: time.Now(), payload: make([]byte, 900)}
	n, recorded := 0, 0
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for most := int(h.packLimit.Load())/packedSize(&e) - 1; n < most; { // about what a pack holds, 1 MB
		h.enqueue(&e, idGen{})
		n++
		recorded += packedSize(&e)
	}
	runtime.ReadMemStats(&after)
	if got := h.queue.packs[len(h.queue.packs)-1].msgs; got != n {
		t.Fatalf("the last pack holds %d messages of the %d recorded", got, n)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	if allocated > uint64(3*recorded) {
		t.Fatalf("recording %d bytes into one pack allocated %d bytes (%.1fx)", recorded, allocated, float64(allocated)/float64(recorded))
	}
	t.Logf("recording %d bytes into one pack allocated %.1fx that", recorded, float64(allocated)/float64(recorded))
}

// TestKeepsMatchesAsMQTTDoes: history.filters keep what they match as an
// MQTT subscription would, "#" (the default) included: it does not match
// topics that begin with '$', which only a filter of their own keeps.
func TestKeepsMatchesAsMQTTDoes(t *testing.T) {
	for _, c := range []struct {
		filters []string
		kept    string // of chef/o/n/status, $SYS/broker/uptime, ansible/x
	}{
		{[]string{"#"}, "yes no yes"},
		{[]string{"$SYS/#", "#"}, "yes yes yes"},
		{[]string{"chef/#"}, "yes no no"},
		{[]string{"+/+/+/status", "$SYS/broker/+"}, "yes yes no"},
	} {
		cfg := DefaultConfig()
		cfg.Filters = c.filters
		h, _ := open(t, cfg)
		var kept []string
		for _, topic := range []string{"chef/o/n/status", "$SYS/broker/uptime", "ansible/x"} {
			kept = append(kept, map[bool]string{true: "yes", false: "no"}[h.Keeps(topic)])
		}
		if got := strings.Join(kept, " "); got != c.kept {
			t.Errorf("filters %q keep %s, want %s", c.filters, got, c.kept)
		}
	}
}

// A follower's replay leaves to the live part the stored messages it also
// holds live, told by id and topic, not by id alone: a publisher chooses
// its messages' ids (an MQTT client's Nats-Msg-Id), and one that took
// another's id, on its own topic, must not make the replay skip the
// other's message.
func TestAFollowersReplaySkipsOnlyTheSameMessage(t *testing.T) {
	h, _ := open(t, DefaultConfig())
	h.RecordFields("chef/org/node/run/failure", []byte(`{"a":1}`), "run-1:run_converge", "chef", "")
	h.RecordFields("chef/org/node/status", []byte(`{"a":2}`), "run-1:status", "chef", "")
	h.mu.Lock()
	n := h.accepted
	h.mu.Unlock()
	if err := h.caughtUp(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	f := newFollower([]string{"#"})
	f.offer(entry{id: "run-1:run_converge", topic: "demo/mine", payload: []byte("same id, another topic")})
	f.offer(entry{id: "run-1:status", topic: "chef/org/node/status", payload: []byte(`{"a":2}`)}) // the same message, live too
	var got []string
	if _, err := h.replay(t.Context(), Query{Filters: []string{"#"}}, f, func(r Record) error {
		got = append(got, r.Topic)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "chef/org/node/run/failure" {
		t.Fatalf("the replay handed %v; want chef/org/node/run/failure, and the status left to the live part", got)
	}
}
