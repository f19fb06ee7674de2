package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mochi-mqtt/server/v2/packets"
)

// behaviour is one row of the table: something an MQTT server must (or,
// where the row says so, may) do, checked over the wire.
type behaviour struct {
	id       string // short, used in topics and in deviations_test.go
	versions []byte // the protocol versions it is checked in
	// paho names what of the Eclipse Paho interoperability suites
	// (interoperability/client_test.py, client_test5.py) it covers, or
	// where else it comes from.
	paho  string
	check func(t *T, v byte)
}

// behaviours is the suite, in the table's order.
var behaviours = []behaviour{
	{"basic", both, "test_basic / testBasic", checkBasic},
	{"retained", both, "test_retained_message(s)", checkRetained},
	{"will", both, "test_will_message / will_message_test", checkWill},
	{"zero-length-client-id", both, "test_zero_length_clientid", checkZeroLengthClientID},
	{"offline-queueing", both, "test_offline_message_queueing", checkOfflineQueueing},
	{"overlapping-subscriptions", both, "test_overlapping_subscriptions", checkOverlapping},
	{"keepalive", both, "test_keepalive", checkKeepalive},
	{"redelivery-on-reconnect", both, "test_redelivery_on_reconnect", checkRedelivery},
	{"subscribe-failure", both, "test_subscribe_failure", checkSubscribeFailure},
	{"dollar-topics", both, "test_dollar_topics", checkDollarTopics},
	{"unsubscribe", both, "test_unsubscribe", checkUnsubscribe},
	{"session-expiry", only5, "test_session_expiry", checkSessionExpiry},
	{"user-properties", only5, "test_user_properties", checkUserProperties},
	{"payload-format", only5, "test_payload_format", checkPayloadFormat},
	{"message-expiry", only5, "test_publication_expiry", checkMessageExpiry},
	{"no-local", only5, "test_subscribe_options (noLocal)", checkNoLocal},
	{"retain-as-published", only5, "test_subscribe_options (retainAsPublished)", checkRetainAsPublished},
	{"retain-handling", only5, "test_subscribe_options (retainHandling)", checkRetainHandling},
	{"assigned-client-id", only5, "test_assigned_clientid", checkAssignedClientID},
	{"subscription-identifiers", only5, "test_subscribe_identifiers", checkSubscriptionIdentifiers},
	{"request-response", only5, "test_request_response", checkRequestResponse},
	{"client-topic-alias", only5, "test_client_topic_alias", checkClientTopicAlias},
	{"server-topic-alias", only5, "test_server_topic_alias", checkServerTopicAlias},
	{"maximum-packet-size", only5, "test_maximum_packet_size", checkMaximumPacketSize},
	{"flow-control-qos1", only5, "test_flow_control1; issue 13: bursts of 10x Receive Maximum", func(t *T, v byte) { checkFlowControl(t, 1) }},
	{"flow-control-qos2", only5, "test_flow_control1; issue 13: bursts of 10x Receive Maximum", func(t *T, v byte) { checkFlowControl(t, 2) }},
	{"server-receive-maximum", only5, "test_flow_control2", checkServerReceiveMaximum},
	{"will-delay", only5, "test_will_delay", checkWillDelay},
	{"shared-subscriptions", only5, "test_shared_subscriptions", checkSharedSubscriptions},
	{"packet-ids-per-direction", both, "found by this suite: client and server packet ids are independent", checkPacketIDsPerDirection},
	{"denied-publish", both, "issue 13: a publish outside the ACL", checkDeniedPublish},
	{"ack-codes-and-properties", only5, "issue 13: PUBACK/PUBREC reason codes and properties", checkAckCodes},
	{"connack-limits", only5, "issue 13: Topic Alias Maximum and Maximum Packet Size in CONNACK", checkConnackLimits},
}

var (
	both  = []byte{v311, v5}
	only5 = []byte{v5}
)

// key names a behaviour in one protocol version, as the table and
// deviations_test.go do: "3.1.1 basic", "5 flow-control-qos1".
func key(id string, v byte) string { return versionName(v) + " " + id }

// checkBasic: connect, disconnect, reconnect with a clean session (no
// session present), QoS 0, 1 and 2 round trips through a QoS 2
// subscription; a second CONNECT on a connection and a wrong protocol name
// end the connection.
func checkBasic(t *T, v byte) {
	id := t.ID("a")
	c, _ := t.Dial(Options{Version: v, ClientID: id, Clean: true})
	c.Disconnect(packets.Properties{})
	c, ack := t.Dial(Options{Version: v, ClientID: id, Clean: true})
	if ack.SessionPresent {
		t.Errorf("CONNACK says session present after a clean start")
	}
	c.Disconnect(packets.Properties{})
	// The round trips on a client id of their own: on ours, the end of a
	// connection may still be clearing a client id's session when the next
	// connection with that id has made a new one (see README.md, "A race").
	id = t.ID("b")
	c, _ = t.Dial(Options{Version: v, ClientID: id, Clean: true})
	topic := t.Topic("TopicA")
	c.MustSubscribe(Sub{Filter: topic, QoS: 2})
	for q := byte(0); q <= 2; q++ {
		c.Publish(Pub{Topic: topic, Payload: []byte(fmt.Sprintf("qos %d", q)), QoS: q})
	}
	msgs := c.WaitMessages(3)
	if !sameMessages(msgs, "qos 0", "qos 1", "qos 2") {
		t.Errorf("received %q, want the three publishes", payloads(msgs))
	}
	for _, m := range msgs {
		if fmt.Sprintf("qos %d", m.QoS) != string(m.Payload) {
			t.Errorf("%q arrived at QoS %d", m.Payload, m.QoS)
		}
	}

	// A second CONNECT is a protocol violation [MQTT-3.1.0-2].
	c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, Connect: packets.ConnectParams{
		ProtocolName: []byte("MQTT"), ClientIdentifier: id, Clean: true}})
	c.WaitClosed()

	// A protocol name other than MQTT is refused [MQTT-3.1.2-1].
	if _, _, err := t.DialErr(Options{Version: v, ClientID: t.ID("hj"), Clean: true, ProtocolName: "hj"}); err == nil {
		t.Errorf("a CONNECT with protocol name \"hj\" was accepted")
	}
}

// checkRetained: retained messages at QoS 0, 1 and 2 reach a later
// subscriber (with their user properties in MQTT 5), and empty retained
// publishes clear them.
func checkRetained(t *T, v byte) {
	pub := t.pubClient(v)
	topics := []string{t.Topic("TopicA", "B"), t.Topic("Topic", "C"), t.Topic("TopicA", "C")}
	wild := t.Topic("+", "+")
	var props packets.Properties
	if v == v5 {
		props.User = userProps
	}
	for q, topic := range topics {
		pub.Publish(Pub{Topic: topic, Payload: []byte(fmt.Sprintf("qos %d", q)), QoS: byte(q), Retain: true, Props: props})
	}
	sub := t.subClient(v, Sub{Filter: wild, QoS: 2})
	msgs := sub.WaitMessages(3)
	if got := qosSet(msgs); !slices.Equal(got, []byte{0, 1, 2}) {
		t.Errorf("retained messages arrived at QoS %v, want 0, 1 and 2", got)
	}
	for _, m := range msgs {
		if !m.Retain {
			t.Errorf("%q on %s arrived without the retain flag", m.Payload, m.Topic)
		}
		if v == v5 && !slices.Equal(m.Props.User, userProps) {
			t.Errorf("%q on %s arrived with user properties %v, want %v", m.Payload, m.Topic, m.Props.User, userProps)
		}
	}

	for q, topic := range topics {
		pub.Publish(Pub{Topic: topic, QoS: byte(q), Retain: true})
	}
	sub2 := t.subClient(v, Sub{Filter: wild, QoS: 2})
	if got := barrier(t, pub, sub2, topics[0], 0); len(got) > 0 {
		t.Errorf("after clearing, a new subscriber still got %d retained messages: %q", len(got), payloads(got))
	}
}

// checkWill: a client that vanishes without DISCONNECT has its will
// published (with its user properties in MQTT 5).
func checkWill(t *T, v byte) {
	topic := t.Topic("Topic", "C")
	sub := t.subClient(v, Sub{Filter: topic, QoS: 2})
	w := &Will{Topic: topic, Payload: []byte("will message")}
	if v == v5 {
		w.Props.User = userProps
	}
	a, _ := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true, KeepAlive: 2, Will: w})
	a.Kill()
	msgs := sub.WaitMessages(1)
	if string(msgs[0].Payload) != "will message" {
		t.Errorf("got %q, want the will", msgs[0].Payload)
	}
	if v == v5 && !slices.Equal(msgs[0].Props.User, userProps) {
		t.Errorf("the will arrived with user properties %v, want %v", msgs[0].Props.User, userProps)
	}
}

// checkZeroLengthClientID: 3.1.1 refuses an empty client id with a
// persistent session (CONNACK 0x02) and accepts it with a clean one; MQTT 5
// accepts both.
func checkZeroLengthClientID(t *T, v byte) {
	_, ack, err := t.DialErr(Options{Version: v, Clean: false})
	switch {
	case v == v311 && err == nil:
		t.Errorf("3.1.1: an empty client id with CleanSession 0 was accepted [MQTT-3.1.3-8]")
	case v == v311 && ack.ReasonCode != 0x02:
		t.Errorf("3.1.1: an empty client id with CleanSession 0 was refused with %v (CONNACK 0x%02x), want 0x02", err, ack.ReasonCode)
	case v == v5 && err != nil:
		t.Errorf("5: an empty client id with Clean Start 0 was refused: %v", err)
	}
	if _, _, err := t.DialErr(Options{Version: v, Clean: true}); err != nil {
		t.Errorf("an empty client id with a clean session was refused: %v", err)
	}
}

// checkOfflineQueueing: QoS 1 and 2 messages published while a client
// with a persistent session is away reach it when it comes back (QoS 0
// may).
func checkOfflineQueueing(t *T, v byte) {
	id := t.ID("a")
	wild := t.Topic("+", "+")
	a := freshSession(t, v, id, false)
	a.MustSubscribe(Sub{Filter: wild, QoS: 2})
	a.Disconnect(packets.Properties{})

	pub := t.pubClient(v)
	for q, topic := range []string{t.Topic("TopicA", "B"), t.Topic("Topic", "C"), t.Topic("TopicA", "C")} {
		pub.Publish(Pub{Topic: topic, Payload: []byte(fmt.Sprintf("qos %d", q)), QoS: byte(q)})
	}
	a, ack := t.Dial(Options{Version: v, ClientID: id, Clean: false, Props: sessionProps(v, 99999)})
	if !ack.SessionPresent {
		t.Errorf("CONNACK does not say session present")
	}
	a.WaitPayload("qos 1")
	a.WaitPayload("qos 2")
	got := payloads(without(barrier(t, pub, a, t.Topic("Marker", "M"), 0)))
	if len(got) > 3 {
		t.Errorf("after coming back, got %q; want \"qos 1\" and \"qos 2\" (and maybe \"qos 0\")", got)
	}
	t.Logf("QoS 0 messages queued for offline clients: %v", slices.Contains(got, "qos 0"))
}

// freshSession connects id, which must be new (t.ID), with a session that
// outlives the connection: CleanSession 0 in 3.1.1, Clean Start and a long
// Session Expiry Interval in MQTT 5.
func freshSession(t *T, v byte, id string, manualAcks bool) *Client {
	t.Helper()
	c, ack := t.Dial(Options{Version: v, ClientID: id, Clean: v == v5, Props: sessionProps(v, 99999), ManualAcks: manualAcks})
	if ack.SessionPresent {
		t.Fatalf("a new client id %q has a session", id)
	}
	return c
}

// checkOverlapping: a publish matching two subscriptions of one client
// arrives once at the higher QoS, or once per subscription with its QoS.
func checkOverlapping(t *T, v byte) {
	c, _ := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true})
	c.MustSubscribe(Sub{Filter: t.Topic("TopicA", "#"), QoS: 2}, Sub{Filter: t.Topic("TopicA", "+"), QoS: 1})
	c.Publish(Pub{Topic: t.Topic("TopicA", "C"), Payload: []byte("overlapping topic filters"), QoS: 2})
	got := barrier(t, c, c, t.Topic("TopicA", "D"), 0)
	switch qs := qosSet(got); {
	case len(got) == 1 && qs[0] == 2:
		t.Logf("one message for all matching subscriptions")
	case len(got) == 2 && slices.Equal(qs, []byte{1, 2}):
		t.Logf("one message per matching subscription")
	default:
		t.Errorf("got %d messages at QoS %v; want one at QoS 2, or one at QoS 2 and one at QoS 1", len(got), qs)
	}
}

// checkKeepalive: a client silent for more than 1.5 times its keepalive is
// disconnected by the server, and its will published.
func checkKeepalive(t *T, v byte) {
	topic := t.Topic("keepalive")
	sub := t.subClient(v, Sub{Filter: topic, QoS: 2})
	a, _ := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true, KeepAlive: 2,
		Will: &Will{Topic: topic, Payload: []byte("keepalive expiry")}})
	msgs := sub.WaitMessages(1)
	if string(msgs[0].Payload) != "keepalive expiry" {
		t.Errorf("got %q, want the will", msgs[0].Payload)
	}
	a.WaitClosed()
}

// checkRedelivery: QoS 1 and 2 deliveries a client did not acknowledge are
// sent again, with DUP set, when it reconnects to its session.
func checkRedelivery(t *T, v byte) {
	id := t.ID("b")
	b := freshSession(t, v, id, true)
	b.MustSubscribe(Sub{Filter: t.Topic("TopicA", "#"), QoS: 2})
	b.Publish(Pub{Topic: t.Topic("TopicA", "B"), Payload: []byte("qos 1"), QoS: 1})
	b.Publish(Pub{Topic: t.Topic("TopicA", "C"), Payload: []byte("qos 2"), QoS: 2})
	b.WaitMessages(2) // delivered, never acknowledged
	b.Disconnect(packets.Properties{})

	b, ack := t.Dial(Options{Version: v, ClientID: id, Clean: false, Props: sessionProps(v, 99999)})
	if !ack.SessionPresent {
		t.Errorf("CONNACK does not say session present")
	}
	msgs := b.WaitMessages(2)
	if got := payloads(msgs[:2]); !slices.Contains(got, "qos 1") || !slices.Contains(got, "qos 2") {
		t.Fatalf("after reconnecting, got %q; want \"qos 1\" and \"qos 2\" again", got)
	}
	for _, m := range msgs[:2] {
		if !m.Dup {
			t.Errorf("the redelivered %q has DUP 0 [MQTT-3.3.1-1]", m.Payload)
		}
	}
}

// checkSubscribeFailure: a subscription the server refuses is answered
// with a failure code in the SUBACK (0x80 in 3.1.1, >= 0x80 in MQTT 5).
func checkSubscribeFailure(t *T, v byte) {
	c, _ := t.Dial(Options{Version: v, ClientID: t.ID("limited"), Clean: true, User: limitedUser, Password: limitedPass})
	codes := c.Subscribe(0, Sub{Filter: "test/nosubscribe", QoS: 2})
	if (v == v311 && codes[0] != 0x80) || codes[0] < 0x80 {
		t.Errorf("a refused subscription got SUBACK code 0x%02x", codes[0])
	}
	// The refusal is for that filter only: the client may go on.
	c.MustSubscribe(Sub{Filter: t.Topic("allowed"), QoS: 1})
}

// checkDollarTopics: a filter starting with a wildcard matches no topic
// starting with $ [MQTT-4.7.2-1]: the $SYS topics both servers publish
// (retained) reach a $SYS/# subscriber but not a # subscriber.
func checkDollarTopics(t *T, v byte) {
	sys := t.subClient(v, Sub{Filter: "$SYS/#", QoS: 0})
	if !sys.waitUntilErr(waitTimeout, func() bool { return len(sys.msgs) > 0 }) {
		t.NotApplicable("no $SYS topic arrived within %s", waitTimeout)
	}
	pub := t.pubClient(v)
	all := t.subClient(v, Sub{Filter: "#", QoS: 0})
	// A $ publish by a client: Paho's part. The server may refuse it.
	dollar, _ := t.Dial(Options{Version: v, ClientID: t.ID("dollar"), Clean: true})
	dollar.PublishAsync(Pub{Topic: "$" + t.Topic("TopicA", "B"), Payload: []byte("dollar"), QoS: 0})
	dollar.PingOrClosed()
	for _, m := range barrier(t, pub, all, t.Topic("dollar"), 0) {
		if strings.HasPrefix(m.Topic, "$") {
			t.Errorf("a # subscription received %s", m.Topic)
		}
	}
}

// checkUnsubscribe: after UNSUBSCRIBE, that filter's messages stop while
// the others' go on.
func checkUnsubscribe(t *T, v byte) {
	topics := []string{t.Topic("TopicA"), t.Topic("TopicA", "B"), t.Topic("Topic", "C")}
	b, _ := t.Dial(Options{Version: v, ClientID: t.ID("b"), Clean: true})
	for _, topic := range topics {
		b.MustSubscribe(Sub{Filter: topic, QoS: 2})
	}
	b.Unsubscribe(topics[0])
	a := t.pubClient(v)
	for i, topic := range topics {
		a.Publish(Pub{Topic: topic, Payload: []byte(fmt.Sprintf("topic %d", i)), QoS: 1})
	}
	if got := barrier(t, a, b, topics[2], 0); !sameMessages(got, "topic 1", "topic 2") {
		t.Errorf("got %q, want \"topic 1\" and \"topic 2\"", payloads(got))
	}
}

// checkDeniedPublish: a publish outside the client's ACL (an anonymous
// client may publish nothing) reaches no one. MQTT 3.1.1 has no way to say
// so; issue 13 asks for mosquitto's answer, a positive ack with the
// connection kept, which 3.1.1 allows [MQTT-3.3.5-2], and never a
// DISCONNECT packet, which 3.1.1 defines only from client to server (the
// suite checks that for every 3.1.1 client). MQTT 5 answers QoS 1 and 2
// with a failure reason code in the ack, or disconnects with one; it may
// drop QoS 0 silently.
func checkDeniedPublish(t *T, v byte) {
	topic := t.Topic("denied")
	pub := t.pubClient(v)
	sub := t.subClient(v, Sub{Filter: topic, QoS: 2})
	for q := byte(0); q <= 2; q++ {
		anon, _ := t.Dial(Options{Version: v, ClientID: t.ID("anon"), Clean: true, Anonymous: true})
		pid := anon.PublishAsync(Pub{Topic: topic, Payload: []byte(fmt.Sprintf("forged qos %d", q)), QoS: q})
		ack, what := anon.Answer(pid, q)
		t.Logf("QoS %d: %s", q, what)
		switch {
		case v == v311:
			want := map[byte]string{0: "no answer, the connection kept", 1: "PUBACK 0x00", 2: "PUBCOMP 0x00"}[q]
			if what != want {
				t.Errorf("3.1.1 QoS %d: %s; want %s, as mosquitto answers", q, what, want)
			}
		case strings.HasPrefix(what, "DISCONNECT"):
			if anon.disconnect.ReasonCode < 0x80 {
				t.Errorf("5 QoS %d: %s; want a failure reason code", q, what)
			}
		case q == 0:
			if what != "no answer, the connection kept" {
				t.Errorf("5 QoS 0: %s; want it dropped or a DISCONNECT with a reason code", what)
			}
		default:
			if ack.ReasonCode < 0x80 {
				t.Errorf("5 QoS %d: %s; want a failure reason code (0x87 not authorized)", q, what)
			}
			checkAck(t, fmt.Sprintf("QoS %d refusal", q), ack, nil)
		}
	}
	if got := barrier(t, pub, sub, topic, 0); len(got) > 0 {
		t.Errorf("denied publishes reached a subscriber: %q", payloads(got))
	}
}

// checkPacketIDsPerDirection: "The Client and Server assign Packet
// Identifiers independently of each other" (MQTT 5 2.2.1; 3.1.1 2.3.1
// alike). While the server waits for the client's PUBACK of a delivery
// with packet id P, the client may use P for a SUBSCRIBE and a QoS 1
// PUBLISH of its own; and the delivery is still the server's to resend
// when the client comes back without having acknowledged it.
func checkPacketIDsPerDirection(t *T, v byte) {
	topic, own := t.Topic("TopicA"), t.Topic("own")
	id := t.ID("c")
	c := freshSession(t, v, id, true)
	c.MustSubscribe(Sub{Filter: topic, QoS: 1})
	pub := t.pubClient(v)
	pub.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("first")})
	_, first := c.WaitPayload("first") // not acknowledged
	p := first.PacketID

	c.UsePacketID(p)
	if codes := c.Subscribe(0, Sub{Filter: own, QoS: 1}); codes[0] >= 0x80 {
		t.Errorf("a SUBSCRIBE with packet id %d, which the server uses for an unacknowledged delivery, was refused: 0x%02x", p, codes[0])
	}
	c.UsePacketID(p)
	r := c.Publish(Pub{Topic: own, QoS: 1, Payload: []byte("second")})
	if r.Ack.ReasonCode >= 0x80 {
		t.Errorf("a PUBLISH with packet id %d, which the server uses for an unacknowledged delivery, was refused: 0x%02x", p, r.Ack.ReasonCode)
	}
	c.Kill()

	c, _ = t.Dial(Options{Version: v, ClientID: id, Clean: false, Props: sessionProps(v, 99999)})
	if !c.waitUntilErr(waitTimeout, func() bool {
		return slices.ContainsFunc(c.msgs, func(m Message) bool { return string(m.Payload) == "first" })
	}) {
		t.Errorf("the unacknowledged delivery (packet id %d) was not resent on reconnect: the client's PUBLISH with that id dropped it", p)
	}
}
