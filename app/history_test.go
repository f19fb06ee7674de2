package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/credentials"

	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
	"github.com/opsfirehose/firehose/subscribe"
)

// historyLine is one line of GET /api/v1/history.
type historyLine struct {
	ID      string          `json:"id"`
	Time    string          `json:"time"`
	Topic   string          `json:"topic"`
	Source  string          `json:"source"`
	Live    bool            `json:"live"`
	Payload json.RawMessage `json:"payload"`
	Text    *string         `json:"text"`
	Error   string          `json:"error"`
}

// getHistory reads GET /api/v1/history?query to its end.
func getHistory(t *testing.T, base, query string) []historyLine {
	t.Helper()
	code, body := testkit.Get(t, base+"/api/v1/history?"+query)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/history?%s: %d %s", query, code, body)
	}
	var out []historyLine
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l historyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("history line %q: %v", sc.Text(), err)
		}
		if l.Error != "" {
			t.Fatalf("history answered an error: %s", l.Error)
		}
		out = append(out, l)
	}
	return out
}

// fixtureTopics reads the topics an adapter's golden case publishes, in order.
func fixtureTopics(t *testing.T, dir string) []string {
	t.Helper()
	out, err := os.ReadFile(filepath.Join(dir, "output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		topics = append(topics, strings.SplitN(line, "\t", 2)[0])
	}
	return topics
}

func readFixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postFleetEvents posts a failed Chef run and an Ansible play that fails,
// and returns the topics they publish, in order.
func postFleetEvents(t *testing.T, b *Bridge) []string {
	t.Helper()
	base := "http://" + b.HTTPAddr()
	chefDir := "../adapters/chef/testdata/03_run_converge_failure_chef15_policyfile_macos"
	if code, answer := postAsChef(t, base+"/data-collector/v0/", readFixture(t, chefDir+"/input.json"), ""); code != http.StatusOK {
		t.Fatalf("chef POST: %d %v", code, answer)
	}
	want := fixtureTopics(t, chefDir)
	for _, c := range []string{"start", "task-ok", "finish-failed"} {
		dir := "../adapters/ansible/testdata/" + c
		resp, err := http.Post(base+"/ansible/v1/events", "application/json", strings.NewReader(string(readFixture(t, dir+"/input.json"))))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("ansible POST %s: %d", c, resp.StatusCode)
		}
		want = append(want, fixtureTopics(t, dir)...)
	}
	return want
}

func topicsOf(lines []historyLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Topic
	}
	return out
}

// historyConfig is testConfig with its data in dir, so that a second bridge
// finds the first one's history.
func historyConfig(t *testing.T, dir string) config.Config {
	cfg := testConfig(t)
	cfg.DataDir = dir
	cfg.Chef.Rollout.Enabled = false
	return cfg
}

// TestHistoryOutlivesARestart posts Chef and Ansible events, restarts the
// bridge, and reads them back from the history API in the order they were
// published, with their payloads and de-duplication ids.
func TestHistoryOutlivesARestart(t *testing.T) {
	dir := t.TempDir()
	first := startBridge(t, historyConfig(t, dir))
	want := postFleetEvents(t, first)
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := startBridge(t, historyConfig(t, dir))
	base := "http://" + second.HTTPAddr()
	got := getHistory(t, base, "since=1h")
	if strings.Join(topicsOf(got), "\n") != strings.Join(want, "\n") {
		t.Fatalf("history after a restart:\n%s\nwant:\n%s", strings.Join(topicsOf(got), "\n"), strings.Join(want, "\n"))
	}
	ids := map[string]bool{}
	for _, l := range got {
		if l.ID == "" || ids[l.ID] || len(l.Payload) == 0 || l.Source == "" {
			t.Fatalf("history line without a unique id, a payload or a source: %+v", l)
		}
		ids[l.ID] = true
	}
	// bridge sub --since prints the same, in the same order, then goes on
	// live: the message published after it started comes last.
	var out, errOut testkit.SyncBuffer
	done := make(chan int, 1)
	args := []string{"--since", "1h", "--http-url", base, "--format", "json", "--count", strconv.Itoa(len(want) + 1), "--color", "never"}
	go func() { done <- subscribe.Run(t.Context(), args, &out, &errOut, nil) }()
	testkit.Eventually(t, func() bool { return strings.Count(out.String(), "\n") == len(want) }, "bridge sub --since to print the history")
	if err := second.Publisher().Publish(t.Context(), bus.NewMessage("test", "after", "test/after", []byte(`"live"`), time.Now())); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != subscribe.ExitOK {
		t.Fatalf("bridge sub --since: exit %d: %s", code, errOut.String())
	}
	var subTopics []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct{ Topic string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bridge sub line %q: %v", line, err)
		}
		subTopics = append(subTopics, m.Topic)
	}
	if strings.Join(subTopics, "\n") != strings.Join(append(want, "test/after"), "\n") {
		t.Fatalf("bridge sub --since printed:\n%s", out.String())
	}
	// --until ends with the history.
	var window testkit.SyncBuffer
	if code := subscribe.Run(t.Context(), []string{"--since", "1h", "--until", "0s", "--http-url", base, "chef/#"}, &window, &errOut, nil); code != subscribe.ExitOK {
		t.Fatalf("bridge sub --since --until: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(window.String(), "/run/failure") || strings.Contains(window.String(), "ansible/") {
		t.Fatalf("bridge sub --since --until chef/#:\n%s", window.String())
	}

	// A filter with MQTT's wildcards means what it means on the bus.
	failed := getHistory(t, base, "filter=chef/%2B/%2B/run/failure&filter=ansible/playbook/%2B/action/finish/%23")
	if len(failed) != 2 || !strings.HasPrefix(failed[0].Topic, "chef/") || !strings.HasSuffix(failed[1].Topic, "/FAILED") {
		t.Fatalf("the failures: %v", topicsOf(failed))
	}
}

// TestHistoryReplayThenLiveHasNoGapAndNoDuplicate follows the history while
// a publisher goes on publishing numbered messages through the switch from
// replay to live: the follower sees each number once, in order.
// The messages come from the bridge's own publisher (as adapters publish)
// or from an MQTT client over TCP, whose messages the history takes
// through a stage of that client's (history.Stage).
func TestHistoryReplayThenLiveHasNoGapAndNoDuplicate(t *testing.T) {
	t.Run("the bridge's own", func(t *testing.T) {
		b := startBridge(t, historyConfig(t, t.TempDir()))
		replayThenLive(t, b, func(ctx context.Context, i int64) error {
			return b.Publisher().Publish(ctx, bus.NewMessage("test", fmt.Sprintf("n-%d", i), "test/seq", []byte(strconv.FormatInt(i, 10)), time.Now()))
		})
	})
	t.Run("an MQTT client's", func(t *testing.T) {
		cfg := historyConfig(t, t.TempDir())
		hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
		cfg.Broker.Users = []credentials.User{{Username: "pub", PasswordHash: string(hash), Publish: []string{"#"}}}
		b := startBridge(t, cfg)
		pub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{Username: "pub", Password: "pw"})
		replayThenLive(t, b, func(_ context.Context, i int64) error {
			return pub.Publish("test/seq", 1, false, strconv.FormatInt(i, 10))
		})
	})
}

// replayThenLive follows test/# through the history API while publish
// publishes message i to test/seq, i = 0, 1, ..., without pause: the
// follower gets each once, in order, across the switch from replay to live.
func replayThenLive(t *testing.T, b *Bridge, publish func(ctx context.Context, i int64) error) {
	base := "http://" + b.HTTPAddr()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var published atomic.Int64
	// The publisher stays at most a window ahead of the reader, so that on
	// a slow machine the live messages waiting for the follower stay
	// bounded (beyond its buffer it would end, rightly, as behind).
	ahead := make(chan struct{}, 2000)
	stopAt := atomic.Int64{}
	stopAt.Store(math.MaxInt64)
	pubDone := make(chan error, 1)
	go func() {
		for i := int64(0); ; i++ {
			if i >= stopAt.Load() {
				pubDone <- nil
				return
			}
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				pubDone <- ctx.Err()
				return
			}
			if err := publish(ctx, i); err != nil {
				pubDone <- err
				return
			}
			published.Store(i + 1)
		}
	}()
	testkit.Eventually(t, func() bool { return published.Load() >= 300 }, "300 messages published")

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/history?filter=test/%23&follow=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	next, replayed, live := int64(0), 0, 0
	for sc.Scan() {
		var l historyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Error != "" {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		<-ahead
		if string(l.Payload) != strconv.FormatInt(next, 10) {
			t.Fatalf("after %d replayed and %d live messages, got message %s, want %d", replayed, live, l.Payload, next)
		}
		next++
		if !l.Live {
			replayed++
			continue
		}
		if live++; live == 1 {
			// Publishing goes on through the switch and past it.
			stopAt.Store(published.Load() + 300)
		}
		if next == stopAt.Load() {
			break
		}
	}
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	if replayed < 300 || live < 300 {
		t.Fatalf("%d replayed, %d live: the switch was not exercised", replayed, live)
	}
}

// sinkHistoryConfig keeps the history on the JetStream server at url,
// through a jetstream sink no route uses.
func sinkHistoryConfig(t *testing.T, dir, url string) config.Config {
	t.Helper()
	cfg := historyConfig(t, dir)
	sc := *natssink.NewConfig(natssink.TypeNATS)
	sc.Type, sc.URLs = sinkconfig.TypeJetStream, []string{url}
	sc.Stream = &natssink.StreamConfig{}
	sc.Stream.SetDefaults()
	sc.Stream.Name, sc.Stream.Create, sc.Stream.Subjects = "FIREHOSE", true, []string{"firehose.>"}
	cfg.Sinks = map[string]sinkconfig.Config{"cluster": sinkconfig.NATSConfig(&sc)}
	cfg.History.Sink = "cluster"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// historyStreamMsgs counts the messages of the history's stream on the
// NATS server at url; -1 while there is no stream. The stream holds packs
// of messages, numbered in their headers (history/pack.go): the count is
// from the oldest pack's first number to the newest's last.
func historyStreamMsgs(t *testing.T, url string) int64 {
	t.Helper()
	if n := streamMsgsOf(t, url, "FIREHOSE_HISTORY"); n <= 0 {
		return n
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(t.Context(), "FIREHOSE_HISTORY")
	if err != nil {
		t.Fatal(err)
	}
	oldest, err1 := st.GetMsg(t.Context(), st.CachedInfo().State.FirstSeq)
	newest, err2 := st.GetMsg(t.Context(), st.CachedInfo().State.LastSeq)
	if err1 != nil || err2 != nil {
		t.Fatalf("read the history's packs: %v %v", err1, err2)
	}
	number := func(m *jetstream.RawStreamMsg, h string) int64 {
		n, err := strconv.ParseInt(m.Header.Get(h), 10, 64)
		if err != nil {
			t.Fatalf("pack %d: %s: %v", m.Sequence, h, err)
		}
		return n
	}
	return number(newest, "Firehose-Pack-First") + number(newest, "Firehose-Pack-Count") - number(oldest, "Firehose-Pack-First")
}

func readyzHistory(t *testing.T, base string) string {
	t.Helper()
	code, body := testkit.Get(t, base+"/readyz")
	var r struct {
		History string `json:"history"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	return r.History
}

// TestHistoryOnASinksCluster keeps the history on an external nats-server
// (history.sink): the messages are in its stream, and outlive a restart
// of the bridge.
func TestHistoryOnASinksCluster(t *testing.T) {
	ns := testnats.Start(t)
	dir := t.TempDir()
	first := startBridge(t, sinkHistoryConfig(t, dir, ns.URL()))
	testkit.Eventually(t, func() bool { return historyStreamMsgs(t, ns.URL()) == 0 }, "the history's stream on the sink's server")
	want := postFleetEvents(t, first)
	testkit.Eventually(t, func() bool { return historyStreamMsgs(t, ns.URL()) == int64(len(want)) }, "%d messages in the sink's history stream", len(want))
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "history")); !os.IsNotExist(err) {
		t.Fatalf("with history.sink, the embedded store was made too: %v", err)
	}

	second := startBridge(t, sinkHistoryConfig(t, dir, ns.URL()))
	base := "http://" + second.HTTPAddr()
	testkit.Eventually(t, func() bool { return readyzHistory(t, base) == "ok" }, "the history connected")
	got := getHistory(t, base, "since=1h")
	if strings.Join(topicsOf(got), "\n") != strings.Join(want, "\n") {
		t.Fatalf("history from the sink:\n%s\nwant:\n%s", strings.Join(topicsOf(got), "\n"), strings.Join(want, "\n"))
	}
}

// TestHistoryDownNeverFailsAPublish keeps the history on a nats-server that
// is down: publishes succeed and reach subscribers, /readyz stays ready and
// says the history is degraded, and the losses are counted; once the
// server is back, the history records again.
func TestHistoryDownNeverFailsAPublish(t *testing.T) {
	ns := testnats.Start(t)
	ns.Stop()
	b := startBridge(t, sinkHistoryConfig(t, t.TempDir(), ns.URL()))
	base := "http://" + b.HTTPAddr()
	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	live := sub.Subscribe("#", 1)

	want := postFleetEvents(t, b)
	for _, topic := range want {
		if m := testkit.Next(t, live); m.Topic != topic {
			t.Fatalf("live subscriber got %s, want %s", m.Topic, topic)
		}
	}
	if h := readyzHistory(t, base); !strings.HasPrefix(h, "degraded: ") {
		t.Fatalf("/readyz history with its store down: %q", h)
	}
	testkit.EventuallyContains(t, base+"/metrics", fmt.Sprintf(`firehose_history_lost_total{reason="store_error"} %d`, len(want)))
	if code, body := testkit.Get(t, base+"/api/v1/history"); code != http.StatusServiceUnavailable {
		t.Fatalf("history API with its store down: %d %s", code, body)
	}

	ns.Restart()
	testkit.Eventually(t, func() bool { return historyStreamMsgs(t, ns.URL()) == 0 }, "the history's stream made again")
	again := postFleetEvents(t, b)
	testkit.Eventually(t, func() bool { return historyStreamMsgs(t, ns.URL()) == int64(len(again)) }, "the history records again")
	testkit.Eventually(t, func() bool { return readyzHistory(t, base) == "ok" }, "the history recovered")
}

// TestHistoryFollowsTheReadPolicy reads the history as MQTT subscribers
// read the bus: no anonymous reader when anonymous clients may not connect,
// HTTP Basic credentials of a broker user, and only what the user may read.
func TestHistoryFollowsTheReadPolicy(t *testing.T) {
	cfg := historyConfig(t, t.TempDir())
	cfg.Broker.AllowAnonymous = false
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	cfg.Broker.Users = []credentials.User{{Username: "ops", PasswordHash: string(hash), Subscribe: []string{"chef/#"}}}
	b := startBridge(t, cfg)
	base := "http://" + b.HTTPAddr()
	postFleetEvents(t, b)

	get := func(user, password, query string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/history?"+query, nil)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, body := testkit.Do(t, http.DefaultClient, req)
		return resp.StatusCode, string(body)
	}
	for _, c := range []struct {
		user, password, query string
		code                  int
		has                   string
	}{
		{"", "", "filter=chef/%23", http.StatusUnauthorized, "anonymous clients are not allowed"},
		{"ops", "wrong", "filter=chef/%23", http.StatusUnauthorized, "wrong password"},
		{"ops", "pw", "filter=ansible/%23", http.StatusForbidden, `"field":"filter"`},
		{"ops", "pw", "filter=chef/%23", http.StatusOK, `"topic":"chef/`},
	} {
		code, body := get(c.user, c.password, c.query)
		if code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("%s:%s %s: %d %s, want %d with %s", c.user, c.password, c.query, code, body, c.code, c.has)
		}
	}
	// bridge sub --since logs in the same way, and says what was refused.
	var out, errOut testkit.SyncBuffer
	code := subscribe.Run(t.Context(), []string{"--since", "1h", "--http-url", base, "--username", "ops", "--password", "pw", "ansible/#"}, &out, &errOut, nil)
	if code != subscribe.ExitError || !strings.Contains(errOut.String(), `403 Forbidden: filter "ansible/#": these credentials may not read it`) {
		t.Fatalf("bridge sub --since outside the ACL: exit %d, stderr %q", code, errOut.String())
	}
	// "#" overlaps what the user may read: allowed, and each message is
	// checked, as mochi checks each delivery.
	code, body := get("ops", "pw", "filter=%23")
	if code != http.StatusOK || strings.Contains(body, `"topic":"ansible/`) || !strings.Contains(body, `"topic":"chef/`) {
		t.Fatalf("# as ops: %d %s", code, body)
	}
}

// TestHistoryAsServerSentEvents reads the history as SSE: the replayed
// messages with their de-duplication ids as event ids, a "live" event at
// the switch, then what is published; limit cuts a replay, saying so; and
// a parameter that cannot be read is a 400 naming it.
func TestHistoryAsServerSentEvents(t *testing.T) {
	b := startBridge(t, historyConfig(t, t.TempDir()))
	base := "http://" + b.HTTPAddr()
	for i := range 3 {
		if err := b.Publisher().Publish(t.Context(), bus.NewMessage("test", fmt.Sprintf("id-%d", i), "test/sse", []byte(strconv.Itoa(i)), time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	if lines := getHistory(t, base, "filter=test/%23&limit=2"); len(lines) != 3 || lines[2].Topic != "" {
		t.Fatalf("limit=2 of 3: %+v", lines)
	}
	if _, body := testkit.Get(t, base+"/api/v1/history?filter=test/%23&limit=2"); !strings.HasSuffix(body, "{\"truncated\":true,\"replayed\":2}\n") {
		t.Fatalf("limit=2 of 3 does not say it was cut: %q", body)
	}

	for query, field := range map[string]string{"since=yesterday": "since", "filter=a/%23/b": "filter", "limit=0": "limit", "since=1h&until=2h": "until", "follow=yes": "follow"} {
		if code, body := testkit.Get(t, base+"/api/v1/history?"+query); code != http.StatusBadRequest || !strings.Contains(body, `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s", query, code, body)
		}
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/history?filter=test/%23", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("SSE: %d %s", resp.StatusCode, ct)
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var ev strings.Builder
		for sc.Scan() {
			if sc.Text() == "" {
				if ev.Len() > 0 {
					events <- ev.String()
				}
				ev.Reset()
				continue
			}
			ev.WriteString(sc.Text() + "\n")
		}
	}()
	next := func() string {
		t.Helper()
		ev, ok := <-events
		if !ok {
			t.Fatal("the SSE stream ended")
		}
		return ev
	}
	if ev := next(); ev != "retry: 2000\n" {
		t.Fatalf("first: %q", ev)
	}
	for i := range 3 {
		if ev := next(); !strings.HasPrefix(ev, fmt.Sprintf("event: message\nid: id-%d\ndata: {\"id\":\"id-%d\",", i, i)) || !strings.HasSuffix(ev, fmt.Sprintf(`"payload":%d}`+"\n", i)) {
			t.Fatalf("replayed %d: %q", i, ev)
		}
	}
	if ev := next(); ev != "event: live\ndata: {\"replayed\":3}\n" {
		t.Fatalf("the switch: %q", ev)
	}
	if err := b.Publisher().Publish(t.Context(), bus.NewMessage("test", "id-3", "test/sse", []byte("3"), time.Now())); err != nil {
		t.Fatal(err)
	}
	if ev := next(); !strings.HasPrefix(ev, "event: message\nid: id-3\n") || !strings.Contains(ev, `"live":true`) {
		t.Fatalf("live: %q", ev)
	}
}

// TestHistoryKeepsWills: a client's last will, published by the broker
// when the client goes without a DISCONNECT, is in the history as any
// publish is (mochi sends wills without its OnPublished event), and so is
// a delayed will whose session ended before it was due (mochi sends that
// one without any event: broker/wills.go).
func TestHistoryKeepsWills(t *testing.T) {
	cfg := historyConfig(t, t.TempDir())
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	cfg.Broker.Users = []credentials.User{{Username: "pub", PasswordHash: string(hash), Publish: []string{"#"}}}
	b := startBridge(t, cfg)
	for _, c := range []struct {
		id      string
		version byte
		delay   uint32
	}{
		{"node-1", 4, 0},
		{"node-2", 5, 1}, // no Session Expiry: the session ends at once, the will after a second
	} {
		conn := testkit.DialRaw(t, b.Broker().Addr("mqtt"))
		will := &packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1}, TopicName: "wills/" + c.id, Payload: []byte(`"offline"`),
			Properties: packets.Properties{WillDelayInterval: c.delay}}
		if ack := conn.Connect(c.version, testkit.ConnectOptions{ClientID: c.id, Username: "pub", Password: "pw", Clean: true, Will: will}); ack.ReasonCode != 0 {
			t.Fatalf("%s: CONNECT with a will answered 0x%02X", c.id, ack.ReasonCode)
		}
		_ = conn.Conn.Close() // no DISCONNECT: the will goes
	}
	base := "http://" + b.HTTPAddr()
	wills := func() string {
		var topics []string
		for _, r := range getHistory(t, base, "filter=wills/%23") {
			topics = append(topics, r.Topic+"="+string(r.Payload))
		}
		slices.Sort(topics)
		return fmt.Sprint(topics)
	}
	const want = `[wills/node-1="offline" wills/node-2="offline"]`
	testkit.Eventually(t, func() bool { return wills() == want }, "both wills in the history")
	// A will handed over twice would be recorded at once after the first:
	// anything published after the wills were found comes after it.
	if err := b.Publisher().Publish(t.Context(), bus.NewMessage("test", "marker", "wills/zz-marker", []byte(`"marker"`), time.Now())); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() bool { return strings.Contains(wills(), "wills/zz-marker") }, "the marker in the history")
	if got := strings.Replace(wills(), ` wills/zz-marker="marker"`, "", 1); got != want {
		t.Fatalf("the history holds %s, want each will once", got)
	}
}
