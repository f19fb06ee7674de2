package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// topicRecorder is a Recorder that notes the topics it is handed, and
// calls then, if set, on the goroutine that handed one over.
type topicRecorder struct {
	mu     sync.Mutex
	topics []string
	then   func(topic string)
}

func (r *topicRecorder) Published(_ *mqtt.Client, topic string, _ []byte, _ []packets.UserProperty) {
	r.mu.Lock()
	r.topics = append(r.topics, topic)
	then := r.then
	r.mu.Unlock()
	if then != nil {
		then(topic)
	}
}

func (r *topicRecorder) Disconnected(*mqtt.Client) {}

// count is how many times topic was handed over.
func (r *topicRecorder) count(topic string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.topics {
		if t == topic {
			n++
		}
	}
	return n
}

// TestDelayedWillsWhoseSessionEndsFirst: mochi sends a delayed will whose
// session has ended by then without OnWillSent. The will is still kept
// when it asked to be retained, so that a late subscriber gets the node's
// will and not its last status, and handed to the recorder (the history),
// once: whether the session ended at the disconnect (session expiry 0),
// was cut short of the delay by max_session_expiry, or expired in the
// second the will was due; and when the client came back while mochi was
// delivering its will (mochi then calls OnWillSent for the new connection).
// A will whose client came back before it was due is not sent, and nothing
// is kept or recorded for it.
func TestDelayedWillsWhoseSessionEndsFirst(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSessionExpiry = 2 * time.Second
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"wills/#"}}}
	b, err := New(cfg, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	// The first will recorded waits, on mochi's event loop, until its
	// client has connected again: the client comes back while mochi
	// delivers its will, before mochi looks for the client.
	taken, back := make(chan string, 1), make(chan struct{})
	var backOnce sync.Once
	release := func() { backOnce.Do(func() { close(back) }) }
	rec := &topicRecorder{then: func(topic string) {
		select {
		case taken <- topic:
			<-back
		default:
		}
	}}
	if err := b.SetRecorder(rec); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	t.Cleanup(release) // first, should the test end while mochi's event loop waits
	live := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	live.SubscribeTo(1, packets.Subscription{Filter: "wills/#", Qos: 1, RetainAsPublished: true})

	type will struct {
		id, topic      string
		retain         bool
		delay, session uint32 // session 0: no Session Expiry property
	}
	wills := []will{
		// The first of the wills of delay 1 that mochi sends has its client
		// come back while mochi delivers it.
		{"no-session", "wills/no-session", true, 1, 0},
		{"plain-1", "wills/plain", false, 1, 0}, // two clients' wills on one topic
		{"plain-2", "wills/plain", false, 1, 0},
		{"same-second", "wills/same-second", true, 1, 1}, // mochi lowers the delay to the session's expiry
		// came-back comes back before its will is due; its delay leaves a
		// busy machine 5 s to reconnect it. cut's will, sent after it would
		// have been, ends the reading.
		{"came-back", "wills/came-back", true, 5, 0},
		{"cut", "wills/cut", true, 6, 60}, // max_session_expiry ends the session at 2 s
	}
	connect := func(id string, w *packets.Packet, props packets.Properties) {
		t.Helper()
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		if ack := c.Connect(5, testkit.ConnectOptions{ClientID: id, Username: "pub", Password: "pw", Clean: true, Will: w, Properties: props}); ack.ReasonCode != 0 {
			t.Fatalf("%s: CONNECT answered 0x%02X", id, ack.ReasonCode)
		}
		if w != nil {
			_ = c.Conn.Close() // no DISCONNECT: the will waits for its delay
		}
	}
	for _, w := range wills {
		var props packets.Properties
		if w.session > 0 {
			props.SessionExpiryInterval, props.SessionExpiryIntervalFlag = w.session, true
		}
		connect(w.id, &packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1, Retain: w.retain}, TopicName: w.topic,
			Payload: []byte("offline"), Properties: packets.Properties{WillDelayInterval: w.delay}}, props)
	}
	testkit.Eventually(t, func() bool { _, ok := b.server.Clients.Get("came-back"); return !ok }, "came-back's session ended")
	connect("came-back", nil, packets.Properties{})
	select {
	case topic := <-taken:
		for _, w := range wills {
			if w.topic == topic {
				connect(w.id, nil, packets.Properties{}) // one of plain's: either
				break
			}
		}
		release()
	case <-time.After(testkit.WaitTimeout):
		t.Fatal("no will was recorded")
	}

	var got []string
	for !slices.Contains(got, "wills/cut") {
		pk := nextPublish(t, live)
		puback(live, pk.PacketID)
		got = append(got, pk.TopicName)
	}
	slices.Sort(got)
	if fmt.Sprint(got) != "[wills/cut wills/no-session wills/plain wills/plain wills/same-second]" {
		t.Fatalf("the live subscriber got the wills %v up to the last one", got)
	}
	if w := b.retain.wills.watching(); len(w) != 0 {
		t.Errorf("wills still watched for once sent, or dropped by mochi: %v", w)
	}
	if kept := lateSubscriber(t, b, "wills"); fmt.Sprint(topicsOf(kept)) != "[wills/cut=offline wills/no-session=offline wills/same-second=offline]" {
		t.Fatalf("a late subscriber got %v", topicsOf(kept))
	}
	for topic, want := range map[string]int{"wills/no-session": 1, "wills/plain": 2, "wills/same-second": 1, "wills/came-back": 0, "wills/cut": 1} {
		if n := rec.count(topic); n != want {
			t.Errorf("the recorder was handed %d wills on %s, want %d", n, topic, want)
		}
	}
}

// blockInlineSubscribe holds the inline client's first SUBSCRIBE to filter
// in mochi's OnSubscribe until release is closed.
type blockInlineSubscribe struct {
	mqtt.HookBase
	filter           string
	entered, release chan struct{}
	once             sync.Once
}

func (h *blockInlineSubscribe) ID() string           { return "test-block-inline-subscribe" }
func (h *blockInlineSubscribe) Provides(b byte) bool { return b == mqtt.OnSubscribe }
func (h *blockInlineSubscribe) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline && pk.Filters[0].Filter == h.filter {
		h.once.Do(func() { close(h.entered); <-h.release })
	}
	return pk
}

// TestWillsOnOneTopicShareASubscription: a fleet whose nodes share one
// will topic costs one inline subscription, not one per node (mochi would
// hand each will to every one of them), which ends with the last will.
func TestWillsOnOneTopicShareASubscription(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"fleet/#"}}}
	b, _ := start(t, cfg)
	dial := func(id string, will *packets.Packet) *testkit.Raw {
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		if ack := c.Connect(5, testkit.ConnectOptions{ClientID: id, Username: "pub", Password: "pw", Clean: true, Will: will}); ack.ReasonCode != 0 {
			t.Fatalf("%s: CONNECT answered 0x%02X", id, ack.ReasonCode)
		}
		return c
	}
	nodes := []string{"node-1", "node-2", "node-3"}
	for _, id := range nodes {
		c := dial(id, &packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1}, TopicName: "fleet/offline", Payload: []byte(id),
			Properties: packets.Properties{WillDelayInterval: 600}})
		_ = c.Conn.Close()
	}
	subscriptions := func() int { return len(b.server.Topics.Subscribers("fleet/offline").InlineSubscriptions) }
	testkit.Eventually(t, func() bool { return len(b.retain.wills.watching()) == len(nodes) }, "every will watched for")
	if n := subscriptions(); n != 1 {
		t.Fatalf("%d wills on one topic hold %d inline subscriptions, want 1", len(nodes), n)
	}
	for i, id := range nodes {
		dial(id, nil) // it comes back: mochi drops its will
		testkit.Eventually(t, func() bool { return !slices.Contains(b.retain.wills.watching(), id) }, "%s's will forgotten", id)
		want := 1
		if i == len(nodes)-1 {
			want = 0
		}
		if n := subscriptions(); n != want {
			t.Fatalf("with %d wills left on the topic, %d inline subscriptions, want %d", len(nodes)-1-i, n, want)
		}
	}
}

// TestAWillForgottenWhileSubscribingLeavesNoSubscription: a client whose
// will is being watched for comes back (a takeover: its old connection's
// OnWill runs beside the new one's OnSessionEstablished) before the
// inline subscription exists. The subscription must not outlive the watch.
func TestAWillForgottenWhileSubscribingLeavesNoSubscription(t *testing.T) {
	b, _ := start(t, testConfig())
	block := &blockInlineSubscribe{filter: "wills/racer", entered: make(chan struct{}), release: make(chan struct{})}
	if err := b.server.AddHook(block, nil); err != nil {
		t.Fatal(err)
	}
	watched := make(chan struct{})
	go func() {
		b.retain.wills.watch("racer", "wills/racer", time.Hour)
		close(watched)
	}()
	<-block.entered
	b.retain.wills.cameBack("racer")
	close(block.release)
	<-watched
	if w := b.retain.wills.watching(); len(w) != 0 {
		t.Fatalf("still watching %v", w)
	}
	if n := len(b.server.Topics.Subscribers("wills/racer").InlineSubscriptions); n != 0 {
		t.Fatalf("%d inline subscriptions to the will's topic left behind", n)
	}
}

// TestSessionStoreKeepsNoInlineSubscriptions: with persistence.sessions,
// the watch for a delayed will (an inline subscription) is not written to
// the session store: a restart would bring it back as a plain subscription
// of the client "inline", and each would cost a synced write. Those that
// earlier versions stored (the dashboard's) are dropped when loaded.
func TestSessionStoreKeepsNoInlineSubscriptions(t *testing.T) {
	cfg := testConfig()
	cfg.Persistence.Path = t.TempDir()
	cfg.Persistence.Sessions = true
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"wills/#"}}}
	b, _ := start(t, cfg)
	c := testkit.DialRaw(t, b.Addr("mqtt"))
	will := &packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1}, TopicName: "wills/p", Payload: []byte("offline"),
		Properties: packets.Properties{WillDelayInterval: 600}}
	if ack := c.Connect(5, testkit.ConnectOptions{ClientID: "p", Username: "pub", Password: "pw", Clean: true, Will: will}); ack.ReasonCode != 0 {
		t.Fatalf("CONNECT answered 0x%02X", ack.ReasonCode)
	}
	_ = c.Conn.Close()
	testkit.Eventually(t, func() bool { return slices.Contains(b.retain.wills.watching(), "p") }, "the will watched for")
	inlineSubscriptions := func(subs []storage.Subscription, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var filters []string
		for _, s := range subs {
			if s.Client == mqtt.InlineClientId {
				filters = append(filters, s.Filter)
			}
		}
		return filters
	}
	if f := inlineSubscriptions(b.store.Hook.StoredSubscriptions()); len(f) != 0 { // pebble's own, unfiltered
		t.Fatalf("the session store holds the inline client's subscriptions to %v", f)
	}
	// What an earlier version stored is neither loaded nor kept.
	b.store.Hook.OnSubscribed(b.inline, packets.Packet{Filters: packets.Subscriptions{{Filter: "dashboard/#"}}}, []byte{0})
	if f := inlineSubscriptions(b.store.StoredSubscriptions()); len(f) != 0 {
		t.Fatalf("the inline client's stored subscriptions to %v are loaded", f)
	}
	if f := inlineSubscriptions(b.store.Hook.StoredSubscriptions()); len(f) != 0 {
		t.Fatalf("the inline client's stored subscriptions to %v are kept", f)
	}
}
