package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// fleet retains n statuses under prefix, through the inline client.
func fleet(t *testing.T, b *Broker, prefix string, n int) {
	t.Helper()
	batch := make([]bus.Message, 0, 500)
	for i := range n {
		batch = append(batch, bus.Message{Topic: fmt.Sprintf("%s/n%05d/status", prefix, i), Payload: fmt.Appendf(nil, `{"node":%d}`, i), QoS: 1, Retain: true})
		if len(batch) == cap(batch) || i == n-1 {
			if err := b.Publish(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// nextPublish reads packets until a PUBLISH, failing on anything but
// PUBLISH and SUBACK.
func nextPublish(t *testing.T, c *testkit.Raw) packets.Packet {
	t.Helper()
	for {
		pk := c.Next()
		switch pk.FixedHeader.Type {
		case packets.Publish:
			return pk
		case packets.Suback:
		default:
			t.Fatalf("got packet type %d, want PUBLISH", pk.FixedHeader.Type)
		}
	}
}

func puback(c *testkit.Raw, id uint16) {
	c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: id})
}

// TestLateQoS1SubscriberGetsTheWholeFleetWithinItsReceiveMaximum: an MQTT 5
// subscriber with Receive Maximum 10 gets every one of 20,000 retained
// statuses, never more than 10 unacknowledged (mochi alone sent 8,192
// and dropped the rest as inflight_quota, or stalled).
func TestLateQoS1SubscriberGetsTheWholeFleetWithinItsReceiveMaximum(t *testing.T) {
	const n, rm = 20000, 10
	b, _ := start(t, testConfig())
	fleet(t, b, "chef/o", n)

	c := testkit.DialRaw(t, b.Addr("mqtt"))
	c.Connect(5, testkit.ConnectOptions{ClientID: "late", Clean: true, Properties: packets.Properties{ReceiveMaximum: rm}})
	c.Subscribe(1, "chef/+/+/status", 1) // fails unless the SUBACK comes before any retained message
	seen := map[string]bool{}
	var unacked []uint16
	for len(seen) < n {
		pk := nextPublish(t, c)
		if !pk.FixedHeader.Retain || pk.FixedHeader.Qos != 1 {
			t.Fatalf("%s: retain %v QoS %d, want a retained QoS 1 message", pk.TopicName, pk.FixedHeader.Retain, pk.FixedHeader.Qos)
		}
		if seen[pk.TopicName] {
			t.Fatalf("%s delivered twice", pk.TopicName)
		}
		seen[pk.TopicName] = true
		unacked = append(unacked, pk.PacketID)
		if len(unacked) > rm {
			t.Fatalf("%d messages unacknowledged, over the Receive Maximum of %d", len(unacked), rm)
		}
		if len(unacked) == rm || len(seen) == n {
			for _, id := range unacked {
				puback(c, id)
			}
			unacked = unacked[:0]
		}
	}
}

// TestLateQoS0SubscribersGetTheWholeFleet: MQTT 3.1.1 subscribers at QoS 0
// get every retained message, however many (mochi alone dropped those past
// max_queued_messages).
func TestLateQoS0SubscribersGetTheWholeFleet(t *testing.T) {
	const n = 20000
	cfg := testConfig()
	cfg.MaxQueuedMessages = 100
	b, _ := start(t, cfg)
	fleet(t, b, "chef/o", n)
	for _, filter := range []string{"chef/+/+/status", "#"} {
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		c.Connect(4, testkit.ConnectOptions{ClientID: "late0", Clean: true})
		c.Subscribe(1, filter, 0)
		for i := range n {
			pk := nextPublish(t, c)
			if want := fmt.Sprintf("chef/o/n%05d/status", i); pk.TopicName != want || !pk.FixedHeader.Retain {
				t.Fatalf("%s: message %d is %s (retain %v), want %s in topic order", filter, i, pk.TopicName, pk.FixedHeader.Retain, want)
			}
		}
	}
}

// TestLiveMessagesFollowTheRetainedStream: a message published while a
// late subscriber's retained messages stream reaches it after the retained
// message of its topic, even when that one comes last.
func TestLiveMessagesFollowTheRetainedStream(t *testing.T) {
	const n = 1000 // more than a stream's window, so the stream is under way
	b, _ := start(t, testConfig())
	fleet(t, b, "f", n)
	last := fmt.Sprintf("f/n%05d/status", n-1)

	c := testkit.DialRaw(t, b.Addr("mqtt"))
	c.Connect(4, testkit.ConnectOptions{ClientID: "order", Clean: true})
	c.Subscribe(1, "f/#", 1)
	first := nextPublish(t, c) // the stream has begun, and waits for acks
	if err := b.Publish(context.Background(), bus.Message{Topic: last, Payload: []byte("live"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	puback(c, first.PacketID)
	var gotRetained bool
	for {
		pk := nextPublish(t, c)
		if pk.FixedHeader.Qos > 0 {
			puback(c, pk.PacketID)
		}
		if pk.TopicName != last {
			continue
		}
		if string(pk.Payload) == "live" {
			if !gotRetained {
				t.Fatal("the live message came before the retained message of its topic")
			}
			if pk.FixedHeader.Retain {
				t.Fatal("the live message has Retain set")
			}
			return
		}
		if !pk.FixedHeader.Retain {
			t.Fatalf("%s: the retained message came without Retain", pk.TopicName)
		}
		gotRetained = true
	}
}

// lateSubscriber subscribes a new MQTT 5 client to prefix/# and returns
// the retained messages it gets (up to a barrier on prefix/zz-barrier).
func lateSubscriber(t *testing.T, b *Broker, prefix string) []packets.Packet {
	t.Helper()
	late := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	late.Subscribe(1, prefix+"/#", 1)
	return barrier(t, b, late, prefix+"/zz-barrier")
}

// barrier publishes a live message on topic and reads up to it, returning
// what came before: retained messages for a subscription come before any
// live one, so what a SUBSCRIBE made the broker send has arrived by then.
func barrier(t *testing.T, b *Broker, c *testkit.Raw, topic string) []packets.Packet {
	t.Helper()
	if err := b.Publish(context.Background(), bus.Message{Topic: topic, Payload: []byte("barrier")}); err != nil {
		t.Fatal(err)
	}
	return upTo(t, c, topic)
}

// upTo reads up to the barrier on topic, and returns what came before.
func upTo(t *testing.T, c *testkit.Raw, topic string) []packets.Packet {
	t.Helper()
	var before []packets.Packet
	for {
		pk := nextPublish(t, c)
		if pk.TopicName == topic && string(pk.Payload) == "barrier" {
			return before
		}
		if pk.FixedHeader.Qos > 0 {
			puback(c, pk.PacketID)
		}
		before = append(before, pk)
	}
}

func topicsOf(pks []packets.Packet) []string {
	var out []string
	for _, pk := range pks {
		out = append(out, fmt.Sprintf("%s=%s", pk.TopicName, pk.Payload))
	}
	return out
}

// TestRetainedSemantics: what MQTT says of retained messages holds with the
// store: an empty payload deletes; Retain Handling 0, 1 and 2; Retain As
// Published on live messages; the subscription identifier; message expiry
// (the interval left, and no delivery once expired); the read ACL; and
// $SYS, which stays mochi's and is hidden from "#".
func TestRetainedSemantics(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{
		{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"#"}},
		{Username: "narrow", PasswordHash: hash(t, "pw"), Subscribe: []string{"sem/a", "bar/#"}},
	}
	b, _ := start(t, cfg)
	pub := testkit.Dial5(t, b.Addr("mqtt"), "pub", "pw")
	publish := func(topic, payload string, props packets.Properties) {
		t.Helper()
		pub.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true}, PacketID: 1, TopicName: topic, Payload: []byte(payload), Properties: props})
		if ack := pub.Next(); ack.FixedHeader.Type != packets.Puback || ack.ReasonCode != 0 {
			t.Fatalf("publish %s: %+v", topic, ack)
		}
	}
	publish("sem/a", "a", packets.Properties{})
	publish("sem/b", "b", packets.Properties{User: []packets.UserProperty{{Key: "k", Val: "v"}}})
	publish("sem/gone", "x", packets.Properties{})
	publish("sem/gone", "", packets.Properties{}) // deletes
	publish("sem/expiring", "e", packets.Properties{MessageExpiryInterval: 3600})
	// mochi writes a PUBACK before it hands the message to subscribers, so
	// a subscriber that came just after the ack could also get the last
	// one live. The next PUBLISH is handled only once that hand-over is
	// done: its ack says none of the above can still reach anyone live.
	fence := func() {
		t.Helper()
		pub.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 2, TopicName: "fence", Payload: []byte("f")})
		if ack := pub.Next(); ack.FixedHeader.Type != packets.Puback || ack.PacketID != 2 {
			t.Fatalf("fence: %+v", ack)
		}
	}
	fence()

	sub := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	sub.Send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters:    packets.Subscriptions{{Filter: "sem/#", Qos: 1, RetainHandling: 1}},
		Properties: packets.Properties{SubscriptionIdentifier: []int{7}},
	})
	if ack := sub.Next(); ack.FixedHeader.Type != packets.Suback {
		t.Fatalf("got %+v, want the SUBACK first", ack)
	}
	got := barrier(t, b, sub, "sem/barrier1")
	if fmt.Sprint(topicsOf(got)) != "[sem/a=a sem/b=b sem/expiring=e]" {
		t.Fatalf("a new subscription got %v", topicsOf(got))
	}
	for _, pk := range got {
		if !pk.FixedHeader.Retain || len(pk.Properties.SubscriptionIdentifier) != 1 || pk.Properties.SubscriptionIdentifier[0] != 7 {
			t.Fatalf("%s: retain %v, subscription ids %v; want Retain and [7]", pk.TopicName, pk.FixedHeader.Retain, pk.Properties.SubscriptionIdentifier)
		}
		switch pk.TopicName {
		case "sem/b":
			if len(pk.Properties.User) != 1 || pk.Properties.User[0].Val != "v" {
				t.Fatalf("sem/b lost its user property: %+v", pk.Properties.User)
			}
		case "sem/expiring":
			if e := pk.Properties.MessageExpiryInterval; e == 0 || e > 3600 {
				t.Fatalf("sem/expiring: expiry interval %d, want what is left of 3600", e)
			}
		}
	}
	sub.SubscribeTo(2, packets.Subscription{Filter: "sem/#", Qos: 1, RetainHandling: 1})
	if got := barrier(t, b, sub, "sem/barrier2"); len(got) != 0 {
		t.Fatalf("Retain Handling 1 on an existing subscription sent %v", topicsOf(got))
	}
	sub.SubscribeTo(3, packets.Subscription{Filter: "sem/#", Qos: 1, RetainHandling: 0})
	if got := barrier(t, b, sub, "sem/barrier3"); len(got) != 3 {
		t.Fatalf("Retain Handling 0 on an existing subscription sent %v, want the 3 again", topicsOf(got))
	}
	sub.SubscribeTo(4, packets.Subscription{Filter: "sem/+", Qos: 1, RetainHandling: 2})
	if got := barrier(t, b, sub, "sem/barrier4"); len(got) != 0 {
		t.Fatalf("Retain Handling 2 sent %v", topicsOf(got))
	}

	// Retain As Published: a live retained message keeps its flag only for
	// such a subscription.
	rap := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	rap.SubscribeTo(1, packets.Subscription{Filter: "live/#", Qos: 1, RetainAsPublished: true, RetainHandling: 2})
	plain := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	plain.SubscribeTo(1, packets.Subscription{Filter: "live/#", Qos: 1, RetainHandling: 2})
	barrier(t, b, rap, "live/b1")
	upTo(t, plain, "live/b1")
	publish("live/x", "now", packets.Properties{})
	if pk := nextPublish(t, rap); !pk.FixedHeader.Retain {
		t.Fatal("Retain As Published: the live retained message came without Retain")
	}
	if pk := nextPublish(t, plain); pk.FixedHeader.Retain {
		t.Fatal("without Retain As Published, the live message came with Retain")
	}

	// Expiry: once expired, nobody gets it.
	before := b.RetainedCount()
	publish("exp/soon", "s", packets.Properties{MessageExpiryInterval: 1})
	fence()
	testkit.Eventually(t, func() bool { return b.RetainedCount() == before }, "the expired message leaves the store")
	if got := lateSubscriber(t, b, "exp"); len(got) != 0 {
		t.Fatalf("an expired retained message was delivered: %v", topicsOf(got))
	}

	// The read ACL holds per topic: narrow may subscribe to sem/# (it
	// overlaps sem/a) but read sem/a only.
	narrow := testkit.Dial5(t, b.Addr("mqtt"), "narrow", "pw")
	narrow.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: "sem/#", Qos: 1}, {Filter: "bar/#", Qos: 1}}})
	if ack := narrow.Next(); ack.FixedHeader.Type != packets.Suback || fmt.Sprint(ack.ReasonCodes) != "[1 1]" {
		t.Fatalf("narrow's SUBSCRIBE: %+v", ack)
	}
	if got := barrier(t, b, narrow, "bar/x"); fmt.Sprint(topicsOf(got)) != "[sem/a=a]" {
		t.Fatalf("narrow got %v, want sem/a only", topicsOf(got))
	}

	// $SYS: mochi's own retained topics, seen by $SYS filters, not by "#".
	sys := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	sys.Subscribe(1, "$SYS/broker/version", 0)
	// mochi's once-a-second $SYS publish may reach the new subscription
	// live, before mochi sends it the retained one.
	for i := 0; ; i++ {
		pk := nextPublish(t, sys)
		if pk.TopicName != "$SYS/broker/version" {
			t.Fatalf("$SYS subscriber got %s", pk.TopicName)
		}
		if pk.FixedHeader.Retain {
			break
		}
		if i == 2 {
			t.Fatal("$SYS subscriber got $SYS/broker/version three times, never retained")
		}
	}
	all := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	all.Subscribe(1, "#", 0)
	for _, pk := range barrier(t, b, all, "zz/barrier") {
		if pk.TopicName[0] == '$' {
			t.Fatalf("# got %s", pk.TopicName)
		}
	}
}

// TestRetainedSurvivesARestart: with a persistence path, what was acked
// before Close is there after it, and the inline subscribers (the
// dashboard's Fleet view) read the same state.
func TestRetainedSurvivesARestart(t *testing.T) {
	cfg := testConfig()
	cfg.Persistence.Path = t.TempDir()
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"#"}}}
	b, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pub := testkit.Dial5(t, b.Addr("mqtt"), "pub", "pw")
	for i := range 100 {
		pub.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true}, PacketID: uint16(i + 1), TopicName: fmt.Sprintf("chef/o/n%d/status", i), Payload: []byte("v")})
	}
	for range 100 {
		if ack := pub.Next(); ack.FixedHeader.Type != packets.Puback {
			t.Fatalf("got %+v", ack)
		}
	}
	fleet(t, b, "inline", 50)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	b, _ = start(t, cfg)
	if got := b.RetainedCount(); got < 150 {
		t.Fatalf("after the restart the broker holds %d retained messages, want 150 and $SYS", got)
	}
	n := 0
	unsub, err := b.Subscribe(1, "chef/+/+/status", func(m bus.Message) {
		if m.Retain {
			n++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	if n != 100 {
		t.Fatalf("an inline subscriber got %d retained statuses after the restart, want 100", n)
	}
}

// TestRetainedWills: a will its client asked to be retained is kept when it
// is sent, at once or after its delay: a live subscriber gets it as any
// publish, and a late one gets it retained, with the will's user
// properties and nothing of how the broker carries the flag (mochi's own
// retaining is off, and would refuse such a CONNECT). A will not asked to
// be retained is not kept.
func TestRetainedWills(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"wills/#"}}}
	b, _ := start(t, cfg)
	live := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	live.SubscribeTo(1, packets.Subscription{Filter: "wills/#", Qos: 1, RetainAsPublished: true})
	user := []packets.UserProperty{{Key: "k", Val: "v"}}
	for _, tc := range []struct {
		id      string
		version byte
		retain  bool
		delay   uint32
	}{
		{"v4", 4, true, 0},
		{"v5", 5, true, 0},
		{"v5-delayed", 5, true, 1},
		{"v5-plain", 5, false, 0},
	} {
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		will := &packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1, Retain: tc.retain}, TopicName: "wills/" + tc.id,
			Payload: []byte("offline"), Properties: packets.Properties{WillDelayInterval: tc.delay}}
		var props packets.Properties
		if tc.version == 5 {
			will.Properties.User = user
			props.SessionExpiryInterval, props.SessionExpiryIntervalFlag = 60, true // a delay needs a session that outlives it
		}
		if ack := c.Connect(tc.version, testkit.ConnectOptions{ClientID: tc.id, Username: "pub", Password: "pw", Clean: true, Will: will, Properties: props}); ack.ReasonCode != 0 {
			t.Fatalf("%s: CONNECT with a will (retain %v) answered 0x%02X", tc.id, tc.retain, ack.ReasonCode)
		}
		_ = c.Conn.Close() // no DISCONNECT: the will goes
		pk := nextPublish(t, live)
		puback(live, pk.PacketID)
		if pk.TopicName != will.TopicName || pk.FixedHeader.Retain != tc.retain || fmt.Sprint(pk.Properties.User) != fmt.Sprint(will.Properties.User) {
			t.Fatalf("%s: the live subscriber got %s retain %v user %v", tc.id, pk.TopicName, pk.FixedHeader.Retain, pk.Properties.User)
		}
	}
	// mochi retains a delayed will just after it delivers it.
	testkit.Eventually(t, func() bool { return retainedHas(t, b, "wills/v5-delayed") }, "the delayed will retained")
	got := lateSubscriber(t, b, "wills")
	if fmt.Sprint(topicsOf(got)) != "[wills/v4=offline wills/v5=offline wills/v5-delayed=offline]" {
		t.Fatalf("a late subscriber got %v", topicsOf(got))
	}
	for _, pk := range got {
		want := "[]"
		if pk.TopicName != "wills/v4" {
			want = fmt.Sprint(user)
		}
		if !pk.FixedHeader.Retain || fmt.Sprint(pk.Properties.User) != want {
			t.Fatalf("%s: retain %v, user properties %v; want retained, %s", pk.TopicName, pk.FixedHeader.Retain, pk.Properties.User, want)
		}
	}
}

// TestStoredFormatRoundTrip: what put stores decodes to the QoS, properties
// and payload published, whether kept compact (user properties only) or as
// a whole PUBLISH (other properties); connection-bound properties and the
// expiry interval are not kept.
func TestStoredFormatRoundTrip(t *testing.T) {
	user := []packets.UserProperty{{Key: "k", Val: "v"}, {Key: "", Val: ""}, {Key: "k", Val: strings.Repeat("x", 300)}}
	for _, tc := range []struct {
		name    string
		pk      packets.Packet
		compact bool
	}{
		{"bare", packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1}, Payload: []byte("p")}, true},
		{"user properties", packets.Packet{FixedHeader: packets.FixedHeader{Qos: 2}, Payload: []byte("p"), Properties: packets.Properties{User: user}}, true},
		{"connection-bound ones", packets.Packet{Payload: []byte("p"), Properties: packets.Properties{TopicAlias: 3, TopicAliasFlag: true, SubscriptionIdentifier: []int{4}, MessageExpiryInterval: 60}}, true},
		{"content type", packets.Packet{Payload: []byte("p"), Properties: packets.Properties{ContentType: "application/json", User: user}}, false},
		{"response topic", packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1}, Payload: []byte("p"), Properties: packets.Properties{ResponseTopic: "r/t", CorrelationData: []byte{1, 2}}}, false},
		{"payload format", packets.Packet{Payload: []byte("p"), Properties: packets.Properties{PayloadFormat: 1, PayloadFormatFlag: true}}, false},
	} {
		tc.pk.TopicName = "chef/o/n/status"
		b, err := encodeStored(tc.pk)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := b[0] == storedCompact; got != tc.compact {
			t.Fatalf("%s: compact %v, want %v", tc.name, got, tc.compact)
		}
		var got packets.Packet
		if err := decodeStored(b, &got); err != nil {
			t.Fatalf("%s: decode: %v", tc.name, err)
		}
		want := tc.pk.Properties
		want.TopicAlias, want.TopicAliasFlag, want.SubscriptionIdentifier, want.MessageExpiryInterval = 0, false, nil, 0
		if got.FixedHeader.Qos != tc.pk.FixedHeader.Qos || string(got.Payload) != "p" || fmt.Sprintf("%+v", got.Properties) != fmt.Sprintf("%+v", want) {
			t.Fatalf("%s: decoded QoS %d payload %q properties %+v; want %d, p, %+v", tc.name, got.FixedHeader.Qos, got.Payload, got.Properties, tc.pk.FixedHeader.Qos, want)
		}
		for n := range b { // every truncation is an error, never a panic or a wrong message
			if err := decodeStored(b[:n], new(packets.Packet)); err == nil && n < len(b)-1 {
				t.Fatalf("%s: %d of %d bytes decoded", tc.name, n, len(b))
			}
		}
	}
}

// FuzzDecodeStored: a corrupt stored message is an error, never a panic,
// and allocates nothing from a count it claims.
func FuzzDecodeStored(f *testing.F) {
	for _, pk := range []packets.Packet{
		{Payload: []byte("p"), Properties: packets.Properties{User: []packets.UserProperty{{Key: "k", Val: "v"}}}},
		{Payload: []byte("p"), Properties: packets.Properties{ContentType: "c"}},
	} {
		b, err := encodeStored(pk)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{storedCompact, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var pk packets.Packet
		if err := decodeStored(b, &pk); err == nil && len(pk.Properties.User) > len(b) {
			t.Fatalf("%d user properties from %d bytes", len(pk.Properties.User), len(b))
		}
	})
}
