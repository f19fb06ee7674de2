package conformance

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// The checks of MQTT 5 features; v is always v5.

// checkSessionExpiry: Session Expiry Interval 0 ends the session with the
// connection; a longer one keeps it, until it has passed; DISCONNECT may
// change it, except from 0.
func checkSessionExpiry(t *T, v byte) {
	// Each step has a client id of its own: on ours, the end of a
	// connection with interval 0 may still be clearing the id's session
	// when the next connection has made a new one (README.md, "A race").
	var id string
	connect := func(clean bool, seconds uint32) (*Client, bool) {
		t.Helper()
		c, ack := t.Dial(Options{Version: v, ClientID: id, Clean: clean, Props: sessionProps(v, seconds)})
		return c, ack.SessionPresent
	}
	// gone reconnects until the session is gone: a server may still be
	// ending the last connection when the new CONNECT arrives on another,
	// and would then rightly hand over the session. A reconnect with
	// interval 0 leaves no session behind either.
	gone := func(what string) {
		t.Helper()
		deadline := time.Now().Add(waitTimeout)
		for {
			c, present := connect(false, 0)
			c.Disconnect(packets.Properties{})
			if !present {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: the session was still there after %s", what, waitTimeout)
				return
			}
		}
	}
	id = t.ID("zero")
	c, present := connect(true, 0)
	if present {
		t.Errorf("a clean start reported a session present")
	}
	c.MustSubscribe(Sub{Filter: t.Topic("TopicA"), QoS: 2})
	c.Disconnect(packets.Properties{})
	gone("interval 0: the session outlived its connection")

	id = t.ID("long")
	c, _ = connect(true, 3600)
	c.MustSubscribe(Sub{Filter: t.Topic("TopicA"), QoS: 2})
	c.Disconnect(packets.Properties{})
	if c, present = connect(false, 3600); !present {
		t.Errorf("interval 3600: the session was gone at once")
	}
	c.Disconnect(packets.Properties{})

	id = t.ID("short")
	c, _ = connect(true, 1)
	c.MustSubscribe(Sub{Filter: t.Topic("TopicA"), QoS: 2})
	c.Disconnect(packets.Properties{})
	sleepPast(time.Now().Add(3 * time.Second))
	if c, present = connect(false, 0); present {
		t.Errorf("interval 1: the session was still there 3 s after the disconnect")
	}
	c.Disconnect(packets.Properties{})

	// DISCONNECT sets a longer interval, then 0.
	id = t.ID("changed")
	c, _ = connect(true, 1)
	c.MustSubscribe(Sub{Filter: t.Topic("TopicA"), QoS: 2})
	c.Disconnect(sessionProps(v, 3600))
	sleepPast(time.Now().Add(3 * time.Second))
	if c, present = connect(false, 1); !present {
		t.Errorf("DISCONNECT with interval 3600: the session was gone after 3 s (the CONNECT's interval was 1)")
	}
	c.Disconnect(sessionProps(v, 0))
	gone("DISCONNECT with interval 0: the session outlived its connection")
}

// checkUserProperties: user properties reach subscribers unchanged and in
// order at every QoS [MQTT-3.3.2-17] [MQTT-3.3.2-18].
func checkUserProperties(t *T, v byte) {
	topic := t.Topic("TopicA")
	c := t.subClient(v, Sub{Filter: topic, QoS: 2})
	for q := byte(0); q <= 2; q++ {
		c.Publish(Pub{Topic: topic, QoS: q, Payload: []byte(fmt.Sprintf("qos %d", q)), Props: packets.Properties{User: userProps}})
	}
	msgs := c.WaitMessages(3)
	if got := qosSet(msgs); !slices.Equal(got, []byte{0, 1, 2}) {
		t.Errorf("arrived at QoS %v, want 0, 1 and 2", got)
	}
	for _, m := range msgs {
		if !slices.Equal(m.Props.User, userProps) {
			t.Errorf("%q arrived with user properties %v, want %v", m.Payload, m.Props.User, userProps)
		}
	}
}

// checkPayloadFormat: Payload Format Indicator and Content Type reach
// subscribers unchanged [MQTT-3.3.2-4] [MQTT-3.3.2-20].
func checkPayloadFormat(t *T, v byte) {
	topic := t.Topic("TopicA")
	c := t.subClient(v, Sub{Filter: topic, QoS: 2})
	props := packets.Properties{PayloadFormat: 1, PayloadFormatFlag: true, ContentType: "My name"}
	for q := byte(0); q <= 2; q++ {
		c.Publish(Pub{Topic: topic, QoS: q, Payload: []byte("text"), Props: props})
	}
	for _, m := range c.WaitMessages(3) {
		if !m.Props.PayloadFormatFlag || m.Props.PayloadFormat != 1 || m.Props.ContentType != "My name" {
			t.Errorf("QoS %d: payload format %v (present %v), content type %q; want 1 and \"My name\"",
				m.QoS, m.Props.PayloadFormat, m.Props.PayloadFormatFlag, m.Props.ContentType)
		}
	}
}

// checkMessageExpiry: a message whose Message Expiry Interval passes while
// it waits for an offline subscriber is not delivered; one that has not
// expired is, with the interval reduced by its wait [MQTT-3.3.2-5]
// [MQTT-3.3.2-6].
func checkMessageExpiry(t *T, v byte) {
	id := t.ID("b")
	topic := t.Topic("TopicA")
	b := freshSession(t, v, id, false)
	b.MustSubscribe(Sub{Filter: topic, QoS: 2})
	b.Disconnect(packets.Properties{})

	a := t.pubClient(v)
	for _, p := range []struct {
		payload string
		qos     byte
		expiry  uint32
	}{{"qos 1 - expire", 1, 1}, {"qos 2 - expire", 2, 1}, {"qos 1 - don't expire", 1, 3600}, {"qos 2 - don't expire", 2, 3600}} {
		a.Publish(Pub{Topic: topic, QoS: p.qos, Payload: []byte(p.payload), Props: packets.Properties{MessageExpiryInterval: p.expiry}})
	}
	sleepPast(time.Now().Add(3 * time.Second))
	b, _ = t.Dial(Options{Version: v, ClientID: id, Clean: false, Props: sessionProps(v, 99999)})
	b.WaitPayload("qos 1 - don't expire")
	b.WaitPayload("qos 2 - don't expire")
	got := without(barrier(t, a, b, topic, 0))
	if !sameMessages(got, "qos 1 - don't expire", "qos 2 - don't expire") {
		t.Errorf("got %q, want only the two messages that had not expired", payloads(got))
	}
	for _, m := range got {
		if e := m.Props.MessageExpiryInterval; e == 0 || e >= 3600 {
			t.Errorf("%q arrived with Message Expiry Interval %d, want less than the 3600 it was published with (it waited 3 s)", m.Payload, e)
		}
	}
}

// checkNoLocal: with No Local, a client does not get its own publishes
// back; others still get them [MQTT-3.8.3-3].
func checkNoLocal(t *T, v byte) {
	topic, marker := t.Topic("TopicA"), t.Topic("Marker")
	a := t.subClient(v, Sub{Filter: topic, QoS: 2, NoLocal: true}, Sub{Filter: marker, QoS: 1})
	b := t.subClient(v, Sub{Filter: topic, QoS: 2, NoLocal: true})
	a.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("noLocal test")})
	if got := payloads(b.WaitMessages(1)); got[0] != "noLocal test" {
		t.Errorf("the other subscriber got %q", got)
	}
	// The barrier comes from a itself (on a topic it has without No
	// Local): a server handles one connection's publishes in order.
	if got := barrier(t, a, a, marker, 0); len(got) > 0 {
		t.Errorf("the publisher got its own message back: %q", payloads(got))
	}
}

// checkRetainAsPublished: with Retain As Published, a subscriber sees the
// retain flag the publisher set [MQTT-3.3.1-12].
func checkRetainAsPublished(t *T, v byte) {
	topic := t.Topic("TopicA")
	c := t.subClient(v, Sub{Filter: topic, QoS: 2, RetainAsPublished: true})
	t.Cleanup(func() { c.PublishAsync(Pub{Topic: topic, Retain: true}) })
	c.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("retain as published false")})
	c.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("retain as published true"), Retain: true})
	msgs := c.WaitMessages(2)
	if msgs[0].Retain || !msgs[1].Retain {
		t.Errorf("retain flags %v, %v; want false, true", msgs[0].Retain, msgs[1].Retain)
	}
}

// checkRetainHandling: Retain Handling 0 sends the retained messages at
// every subscribe, 1 only when the subscription is new, 2 never
// [MQTT-3.3.1-9] [MQTT-3.3.1-10] [MQTT-3.3.1-11].
func checkRetainHandling(t *T, v byte) {
	pub := t.pubClient(v)
	topics := []string{t.Topic("TopicA", "B"), t.Topic("Topic", "C"), t.Topic("TopicA", "C")}
	for q, topic := range topics {
		pub.Publish(Pub{Topic: topic, Payload: []byte(fmt.Sprintf("qos %d", q)), QoS: byte(q), Retain: true})
	}
	t.Cleanup(func() {
		for _, topic := range topics {
			pub.PublishAsync(Pub{Topic: topic, Retain: true})
		}
	})
	wild := t.Topic("+", "+")
	marker := t.Topic("Marker", "M") // matches wild, never retained
	for _, rh := range []struct {
		handling      byte
		first, second int // retained messages expected at the first and the repeated subscribe
	}{{1, 3, 0}, {2, 0, 0}, {0, 3, 3}} {
		c, _ := t.Dial(Options{Version: v, ClientID: t.ID("c"), Clean: true})
		from := 0
		for i, want := range []int{rh.first, rh.second} {
			c.MustSubscribe(Sub{Filter: wild, QoS: 2, RetainHandling: rh.handling})
			// A server sends retained messages after the SUBACK, so a
			// barrier published then may overtake them: wait for those
			// that must come, and let the barrier bound the rest.
			if want > 0 && !c.waitUntilErr(waitTimeout, func() bool { return retainedSince(c.msgs, from) >= want }) {
				t.Errorf("Retain Handling %d, subscribe #%d: %d retained messages within %s, want %d", rh.handling, i+1, retainedSince(c.Messages(), from), waitTimeout, want)
			}
			got := without(barrier(t, pub, c, marker, from))
			from = len(c.Messages())
			if len(got) != want || (want == 3 && !slices.Equal(qosSet(got), []byte{0, 1, 2})) {
				t.Errorf("Retain Handling %d, subscribe #%d: got %d retained messages (QoS %v), want %d", rh.handling, i+1, len(got), qosSet(got), want)
			}
		}
	}
}

// retainedSince counts the retained messages in msgs from index from on.
func retainedSince(msgs []Message, from int) int {
	n := 0
	for _, m := range msgs[min(from, len(msgs)):] {
		if m.Retain {
			n++
		}
	}
	return n
}

// checkAssignedClientID: a client with an empty client id gets one in
// CONNACK's Assigned Client Identifier [MQTT-3.2.2-16].
func checkAssignedClientID(t *T, v byte) {
	_, ack := t.Dial(Options{Version: v, Clean: true})
	if ack.Properties.AssignedClientID == "" {
		t.Errorf("CONNACK has no Assigned Client Identifier")
	}
}

// checkSubscriptionIdentifiers: deliveries carry the identifiers of the
// subscriptions they match: in one copy all of them, or one each in a
// copy per subscription [MQTT-3.3.4-3] [MQTT-3.3.4-4] [MQTT-3.3.4-5].
func checkSubscriptionIdentifiers(t *T, v byte) {
	topic := t.Topic("TopicA")
	a, _ := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true})
	a.MustSubscribeID(456789, Sub{Filter: topic, QoS: 2})
	b, _ := t.Dial(Options{Version: v, ClientID: t.ID("b"), Clean: true})
	b.MustSubscribeID(2, Sub{Filter: topic, QoS: 2})
	b.MustSubscribeID(3, Sub{Filter: topic + "/#", QoS: 2})
	b.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("sub identifier test")})

	if m := a.WaitMessages(1)[0]; !slices.Equal(m.Props.SubscriptionIdentifier, []int{456789}) {
		t.Errorf("a single subscription's delivery carries identifiers %v, want [456789]", m.Props.SubscriptionIdentifier)
	}
	got := without(barrier(t, b, b, topic+"/marker", 0))
	var ids []int
	for _, m := range got {
		ids = append(ids, m.Props.SubscriptionIdentifier...)
		if len(got) == 2 && len(m.Props.SubscriptionIdentifier) != 1 {
			t.Errorf("with a copy per subscription, a copy carries identifiers %v", m.Props.SubscriptionIdentifier)
		}
	}
	slices.Sort(ids)
	if len(got) < 1 || len(got) > 2 || !slices.Equal(ids, []int{2, 3}) {
		t.Errorf("two overlapping subscriptions: %d copies carrying identifiers %v; want [2 3]", len(got), ids)
	}
}

// checkRequestResponse: Response Topic and Correlation Data reach the
// responder unchanged, and its answer reaches the requester.
func checkRequestResponse(t *T, v byte) {
	topic := t.Topic("TopicA")
	a := t.subClient(v, Sub{Filter: topic, QoS: 2, NoLocal: true})
	b := t.subClient(v, Sub{Filter: topic, QoS: 2, NoLocal: true})
	a.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("request"),
		Props: packets.Properties{ResponseTopic: topic, CorrelationData: []byte("334")}})
	req := b.WaitMessages(1)[0]
	if req.Props.ResponseTopic != topic || !bytes.Equal(req.Props.CorrelationData, []byte("334")) {
		t.Fatalf("the request arrived with Response Topic %q and Correlation Data %q", req.Props.ResponseTopic, req.Props.CorrelationData)
	}
	b.Publish(Pub{Topic: req.Props.ResponseTopic, QoS: 1, Payload: []byte("response"),
		Props: packets.Properties{CorrelationData: req.Props.CorrelationData}})
	_, resp := a.WaitPayload("response")
	if !bytes.Equal(resp.Props.CorrelationData, []byte("334")) {
		t.Errorf("the response arrived with Correlation Data %q", resp.Props.CorrelationData)
	}
}

// publishAliasZero sends a PUBLISH with Topic Alias 0, which mochi's
// encoder will not write: QoS 1, packet id 1, properties {0x23: 0}.
func publishAliasZero(c *Client, topic string) {
	body := []byte{byte(len(topic) >> 8), byte(len(topic))}
	body = append(body, topic...)
	body = append(body, 0, 1, 3, packets.PropTopicAlias, 0, 0)
	body = append(body, "topic alias 0"...)
	c.sendRaw(append([]byte{packets.Publish<<4 | 1<<1, byte(len(body))}, body...))
}

// checkClientTopicAlias: Topic Alias 0 is a protocol error; when the
// server accepts aliases (Topic Alias Maximum in CONNACK), a client's
// alias stands for its topic on that connection only.
func checkClientTopicAlias(t *T, v byte) {
	topic := t.Topic("TopicA")
	a, _ := t.Dial(Options{Version: v, ClientID: t.ID("zero"), Clean: true})
	publishAliasZero(a, topic)
	if d := a.WaitClosed(); d != nil && d.ReasonCode < 0x80 {
		t.Errorf("Topic Alias 0: DISCONNECT with reason 0x%02x, want an error (0x94 topic alias invalid)", d.ReasonCode)
	} else if d != nil {
		t.Logf("Topic Alias 0: DISCONNECT 0x%02x", d.ReasonCode)
	}

	id := t.ID("a")
	a, ack := t.Dial(Options{Version: v, ClientID: id, Clean: true, Props: sessionProps(v, 99999)})
	if ack.Properties.TopicAliasMaximum == 0 {
		t.Logf("the server accepts no topic aliases (no Topic Alias Maximum in CONNACK)")
		return
	}
	a.MustSubscribe(Sub{Filter: topic, QoS: 2})
	alias := packets.Properties{TopicAlias: 1}
	a.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("topic alias 1"), Props: alias})
	a.Publish(Pub{Topic: "", QoS: 1, Payload: []byte("topic alias 2"), Props: alias})
	for _, m := range a.WaitMessages(2) {
		if m.Topic != topic {
			t.Errorf("%q arrived on %q, want %q", m.Payload, m.Topic, topic)
		}
	}
	a.Disconnect(packets.Properties{})

	// Aliases end with the connection; the session's subscription does not.
	a, _ = t.Dial(Options{Version: v, ClientID: id, Clean: false, Props: sessionProps(v, 99999)})
	a.Publish(Pub{Topic: topic, QoS: 1, Payload: []byte("topic alias 3")})
	a.WaitPayload("topic alias 3")
	a.PublishAsync(Pub{Topic: "", QoS: 1, Payload: []byte("topic alias 4"), Props: alias})
	a.WaitClosed()
}

// checkServerTopicAlias: a server must not send topic aliases to a client
// that allows none [MQTT-3.3.2-9]; it may use them within the client's
// Topic Alias Maximum (Paho checks that it does: optional, n.a. when not).
func checkServerTopicAlias(t *T, v byte) {
	topic := t.Topic("TopicA")
	publish3 := func(max uint16) []Message {
		t.Helper()
		c, _ := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true, Props: packets.Properties{TopicAliasMaximum: max}})
		c.MustSubscribe(Sub{Filter: topic, QoS: 2})
		for q := byte(0); q <= 2; q++ {
			c.Publish(Pub{Topic: topic, QoS: q, Payload: []byte(fmt.Sprintf("topic alias %d", q))})
		}
		return c.WaitMessages(3)
	}
	for _, m := range publish3(0) {
		if m.Props.TopicAlias != 0 || m.RawTopic != topic {
			t.Errorf("a client allowing no aliases got %q with topic %q and alias %d", m.Payload, m.RawTopic, m.Props.TopicAlias)
		}
	}
	msgs := publish3(1)
	if msgs[0].Props.TopicAlias == 0 {
		t.NotApplicable("the server does not use topic aliases (optional)")
	}
	for i, m := range msgs {
		if m.Props.TopicAlias != msgs[0].Props.TopicAlias || m.Props.TopicAlias > 1 || m.Topic != topic ||
			(i == 0 && m.RawTopic != topic) || (i > 0 && m.RawTopic != "") {
			t.Errorf("message %d: topic %q, alias %d; want %q with alias 1 first, then alias 1 alone", i, m.RawTopic, m.Props.TopicAlias, topic)
		}
	}
}

// checkMaximumPacketSize: a packet over the server's Maximum Packet Size
// ends the connection (DISCONNECT 0x95); a message over the client's
// Maximum Packet Size is not sent to it, and later ones are [MQTT-3.1.2-25].
func checkMaximumPacketSize(t *T, v byte) {
	topic := t.Topic("TopicA")
	a, ack := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true})
	limit := ack.Properties.MaximumPacketSize
	if limit == 0 {
		t.Errorf("CONNACK announces no Maximum Packet Size, but the server is configured with %d", maxPacketSize)
		limit = maxPacketSize
	}
	a.PublishAsync(Pub{Topic: topic, QoS: 0, Payload: make([]byte, limit)})
	if d := a.WaitClosed(); d != nil && d.ReasonCode != 0x95 {
		t.Errorf("a packet over the limit: DISCONNECT with reason 0x%02x, want 0x95 (packet too large)", d.ReasonCode)
	}

	// The client's limit leaves room for a small message on this topic
	// (fixed header, topic, packet id, properties length and some 30
	// bytes of properties a server might add), not for a large one.
	const clientMax = 160
	small := clientMax - (2 + 2 + len(topic) + 2 + 1) - 30
	c, _ := t.Dial(Options{Version: v, ClientID: t.ID("c"), Clean: true, Props: packets.Properties{MaximumPacketSize: clientMax}})
	c.MustSubscribe(Sub{Filter: topic, QoS: 2})
	pub := t.pubClient(v)
	pub.Publish(Pub{Topic: topic, QoS: 0, Payload: bytes.Repeat([]byte("."), small)})
	pub.Publish(Pub{Topic: topic, QoS: 1, Payload: bytes.Repeat([]byte("x"), clientMax)})
	got := without(barrier(t, pub, c, topic, 0))
	if len(got) != 1 || len(got[0].Payload) != small {
		t.Errorf("with Maximum Packet Size %d the client got payloads of %v bytes; want just the one of %d", clientMax, payloadSizes(got), small)
	}
}

func payloadSizes(msgs []Message) []int {
	var out []int
	for _, m := range msgs {
		out = append(out, len(m.Payload))
	}
	return out
}

// flowReceiveMaximum is the subscribers' Receive Maximum in the flow
// control checks: mosquitto_sub's default, with which issue 13 saw the
// stall.
const flowReceiveMaximum = 20

// checkFlowControl: a subscriber with Receive Maximum R never has more
// than R unacknowledged QoS 1 or 2 deliveries [MQTT-3.3.4-9]; a burst of
// 10 x R messages reaches it in full however slowly it acknowledges (it
// acknowledges only when R are outstanding), and afterwards it keeps
// receiving.
func checkFlowControl(t *T, qos byte) {
	const r, burst = flowReceiveMaximum, 10 * flowReceiveMaximum
	topic := t.Topic("flow")
	sub, _ := t.Dial(Options{Version: v5, ClientID: t.ID("sub"), Clean: true, ManualAcks: true,
		Props: packets.Properties{ReceiveMaximum: r}})
	sub.MustSubscribe(Sub{Filter: topic, QoS: qos})
	pub := t.pubClient(v5)
	for i := range burst {
		pub.Publish(Pub{Topic: topic, QoS: qos, Payload: []byte(fmt.Sprintf("message %d", i))})
	}

	acked, over := 0, 0
	for acked < burst {
		want := min(acked+r, burst)
		if !sub.waitUntilErr(waitTimeout, func() bool { return len(sub.msgs) >= want }) {
			t.Fatalf("stalled: %d of %d messages delivered and %d acknowledged; nothing more within %s", len(sub.Messages()), burst, acked, waitTimeout)
		}
		msgs := sub.Messages()
		if n := len(msgs) - acked; n > r {
			over = max(over, n)
		}
		sub.Ack(msgs[acked])
		acked++
	}
	if over > 0 {
		t.Errorf("up to %d unacknowledged deliveries were outstanding, more than the Receive Maximum of %d", over, r)
	}
	seen := map[string]bool{}
	for _, m := range sub.Messages()[:burst] {
		seen[string(m.Payload)] = true
	}
	if len(seen) != burst {
		t.Errorf("%d distinct messages of %d", len(seen), burst)
	}
	pub.Publish(Pub{Topic: topic, QoS: qos, Payload: []byte("after the burst")})
	if !sub.waitUntilErr(waitTimeout, func() bool {
		return slices.ContainsFunc(sub.msgs, func(m Message) bool { return string(m.Payload) == "after the burst" })
	}) {
		t.Errorf("after the burst, a new message did not arrive")
	}
}

// checkServerReceiveMaximum: a client that has more QoS 2 publishes
// unfinished than the server's Receive Maximum is disconnected with 0x93.
func checkServerReceiveMaximum(t *T, v byte) {
	c, ack := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true, Props: sessionProps(v, 0), NoPubrel: true})
	rm := int(ack.Properties.ReceiveMaximum)
	if rm == 0 || rm >= 65535 {
		// Packet ids are 16 bits: no client can have 65536 publishes unfinished.
		t.NotApplicable("the server's Receive Maximum is 65535 (absent or announced), which no client can exceed")
	}
	topic := t.Topic("TopicA")
	for i := 0; i <= rm; i++ {
		c.PublishAsync(Pub{Topic: topic, QoS: 2, Payload: []byte(fmt.Sprintf("message %d", i))})
	}
	d := c.WaitClosed()
	switch {
	case d == nil:
		t.Errorf("%d unfinished QoS 2 publishes (Receive Maximum %d): connection closed without DISCONNECT", rm+1, rm)
	case d.ReasonCode != 0x93:
		t.Errorf("%d unfinished QoS 2 publishes (Receive Maximum %d): DISCONNECT 0x%02x, want 0x93", rm+1, rm, d.ReasonCode)
	}
	c.mu.Lock()
	recs := len(c.recs)
	c.mu.Unlock()
	if recs != rm {
		t.Errorf("the server answered %d of the first %d QoS 2 publishes (within its Receive Maximum) with PUBREC before it disconnected; want all", recs, rm)
	}
}

// checkWillDelay: the will waits for its Will Delay Interval, or for the
// end of the session when that comes first [MQTT-3.1.3-9]. The checks
// are lower bounds (a server may be late, never early; a 1 s tolerance
// for servers that count whole seconds) and an upper bound far below the
// delay the server must not wait for.
func checkWillDelay(t *T, v byte) {
	for _, c := range []struct {
		delay, session uint32
		min            time.Duration // the will may not come earlier (less 1 s)
	}{
		{delay: 3, session: 60, min: 3 * time.Second},
		{delay: 60, session: 0, min: 0},               // the session ends with the connection
		{delay: 60, session: 2, min: 2 * time.Second}, // the session ends first
	} {
		topic := t.Topic(fmt.Sprintf("will-%d-%d", c.delay, c.session))
		sub := t.subClient(v, Sub{Filter: topic, QoS: 2})
		w := &Will{Topic: topic, Payload: []byte("will message"), Props: packets.Properties{WillDelayInterval: c.delay}}
		a, _ := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true, Will: w, Props: sessionProps(v, c.session)})
		start := time.Now()
		a.Kill()
		if !sub.waitUntilErr(waitTimeout, func() bool { return len(sub.msgs) > 0 }) {
			t.Errorf("will delay %d s, session expiry %d s: no will within %s", c.delay, c.session, waitTimeout)
			continue
		}
		if took := time.Since(start); took < c.min-time.Second {
			t.Errorf("will delay %d s, session expiry %d s: the will came after %s, too early", c.delay, c.session, took.Round(time.Millisecond))
		}
	}
}

// checkSharedSubscriptions: two clients in a share group get each message
// once between them, while their plain subscriptions each get every one.
func checkSharedSubscriptions(t *T, v byte) {
	shared := "$share/sharename/" + t.Topic("x")
	plain := t.Topic("TopicA")
	a := t.subClient(v, Sub{Filter: shared, QoS: 2}, Sub{Filter: plain, QoS: 2})
	b := t.subClient(v, Sub{Filter: shared, QoS: 2}, Sub{Filter: plain, QoS: 2})
	pub := t.pubClient(v)
	pub.Publish(Pub{Topic: plain, QoS: 1, Payload: []byte("to both")})
	a.WaitPayload("to both")
	b.WaitPayload("to both")
	const n = 10
	for i := range n {
		pub.Publish(Pub{Topic: t.Topic("x"), QoS: 1, Payload: []byte(fmt.Sprintf("shared %d", i))})
	}
	fromA := without(barrier(t, pub, a, plain, 1))
	fromB := without(barrier(t, pub, b, plain, 1))
	seen := map[string]int{}
	for _, m := range append(fromA, fromB...) {
		seen[string(m.Payload)]++
	}
	if len(seen) != n || len(fromA)+len(fromB) != n {
		t.Errorf("the share group got %d messages (%d distinct) of %d: a %q, b %q", len(fromA)+len(fromB), len(seen), n, payloads(fromA), payloads(fromB))
	}
}

// checkAckCodes: PUBACK, PUBREC and PUBCOMP for accepted publishes carry
// reason codes of their packet type and do not echo the publisher's user
// properties.
func checkAckCodes(t *T, v byte) {
	c := t.pubClient(v)
	topic := t.Topic("acks")
	for q := byte(1); q <= 2; q++ {
		r := c.Publish(Pub{Topic: topic, QoS: q, Payload: []byte("ack me"), Props: packets.Properties{User: userProps}})
		checkAck(t, fmt.Sprintf("QoS %d %s", q, packetName(r.Ack.FixedHeader.Type)), r.Ack, userProps)
		if q == 2 {
			checkAck(t, "QoS 2 PUBCOMP", r.Comp, userProps)
		}
	}
}

// checkConnackLimits: CONNACK announces the limits the server enforces:
// Topic Alias Maximum if it accepts client topic aliases (absent means 0,
// and a client may not use any), and the Maximum Packet Size it is
// configured with [MQTT-3.2.2-15].
func checkConnackLimits(t *T, v byte) {
	topic := t.Topic("TopicA")
	c, ack := t.Dial(Options{Version: v, ClientID: t.ID("a"), Clean: true})
	if got := ack.Properties.MaximumPacketSize; got != maxPacketSize {
		t.Errorf("CONNACK announces Maximum Packet Size %d, but the server is configured with %d", got, maxPacketSize)
	}
	if ack.Properties.TopicAliasMaximum > 0 {
		return
	}
	c.MustSubscribe(Sub{Filter: topic, QoS: 1})
	c.PublishAsync(Pub{Topic: topic, QoS: 1, Payload: []byte("alias"), Props: packets.Properties{TopicAlias: 1}})
	if !c.PingOrClosed() {
		t.Errorf("CONNACK announces no Topic Alias Maximum (so 0), yet a PUBLISH with Topic Alias 1 was accepted")
	}
}
