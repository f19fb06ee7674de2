package mqttin

import (
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

func publish(id uint16, dup bool, topic, payload string) packets.Packet {
	return packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Dup: dup},
		PacketID:    id,
		TopicName:   topic,
		Payload:     []byte(payload),
	}
}

func TestSessionMsgIDs(t *testing.T) {
	s := newSession()
	first := s.msgID(publish(1, false, "door", "open"))
	if got := s.msgID(publish(1, true, "door", "open")); got != first {
		t.Errorf("a resend (DUP=1) of packet 1 got %s, want the first sending's %s", got, first)
	}
	second := s.msgID(publish(2, false, "door", "open"))
	if second == first {
		t.Error("two messages with different packet ids share an id")
	}
	// The client reuses packet id 1 for a new, identical message: a new cycle.
	again := s.msgID(publish(1, false, "door", "open"))
	if again == first || again == second {
		t.Error("a new message that reuses packet id 1 got the id of an earlier message")
	}
	if got := s.msgID(publish(1, true, "door", "open")); got != again {
		t.Error("a resend after the reuse did not get the id of the reusing message")
	}
	// A resend of the previous cycle's packet 2, after packet 1 was reused.
	if got := s.msgID(publish(2, true, "door", "open")); got != second {
		t.Error("a resend from the previous cycle of packet ids did not keep its id")
	}
	// A client that counts up and wraps around: 65535 new messages later the
	// same packet id and payload is a new message.
	w := newSession()
	ids := map[string]uint16{}
	for i := 0; i < 3*65535; i++ {
		pid := uint16(i%65535) + 1
		id := w.msgID(publish(pid, false, "heartbeat", "ok"))
		if prev, dup := ids[id]; dup {
			t.Fatalf("message %d (packet id %d) got the id of packet id %d", i, pid, prev)
		}
		ids[id] = pid
	}
	// QoS 0 messages never share an id, however alike.
	q0 := publish(0, false, "door", "open")
	q0.FixedHeader.Qos = 0
	if a, b := s.msgID(q0), s.msgID(q0); a == b {
		t.Error("two QoS 0 messages share an id")
	}
	// Another session (a clean start, or a restart of the bridge) never
	// repeats an id.
	if newSession().msgID(publish(1, false, "door", "open")) == first {
		t.Error("a new session repeated an id of an old one")
	}
}

func connect(h *Hook, id string, version byte, clean bool) *mqtt.Client {
	cl := &mqtt.Client{ID: id, Properties: mqtt.ClientProperties{ProtocolVersion: version, Clean: clean}}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, Connect: packets.ConnectParams{Clean: clean}}
	h.OnSessionEstablish(cl, pk)
	return cl
}

// TestHookKeepsASessionAsMochiDoes follows mochi's rules for when a
// connection inherits the session of the previous one with its client id.
func TestHookKeepsASessionAsMochiDoes(t *testing.T) {
	h := &Hook{}
	a := connect(h, "door", 4, false)
	sa := h.sessionFor(a)
	h.OnDisconnect(a, nil, false) // a persistent session outlives its connection
	b := connect(h, "door", 4, false)
	if h.sessionFor(b) != sa {
		t.Fatal("a CleanSession=false reconnect did not keep the session")
	}
	if h.sessionFor(a) == sa {
		t.Error("the old connection still owns the session after the reconnect")
	}
	c := connect(h, "door", 4, true)
	sc := h.sessionFor(c)
	if sc == sa {
		t.Fatal("a clean session kept the old session")
	}
	// A 3.1.1 clean session is never inherited, even by CleanSession=false.
	d := connect(h, "door", 4, false)
	if h.sessionFor(d) == sc {
		t.Error("a 3.1.1 clean session was passed on")
	}
	// A session that ends with its connection, or expires, is forgotten.
	sd := h.sessionFor(d)
	h.OnDisconnect(d, nil, true)
	if e := connect(h, "door", 5, false); h.sessionFor(e) == sd {
		t.Error("an ended session was passed on")
	}
	f := connect(h, "lamp", 5, false)
	sf := h.sessionFor(f)
	h.OnDisconnect(f, nil, false)
	h.OnClientExpired(f)
	if g := connect(h, "lamp", 5, false); h.sessionFor(g) == sf {
		t.Error("an expired session was passed on")
	}
}

// TestIgnoredPublishIsNeverRouted: a publish mochi will ack and drop (the
// broker's auth hook marks a denied MQTT 3.1.1 publish Ignore in
// OnPacketRead) is passed by, never taken into a route.
func TestIgnoredPublishIsNeverRouted(t *testing.T) {
	h := &Hook{} // no router and no broker: any attempt to route would panic
	cl := connect(h, "anonymous", 4, true)
	pk := publish(1, false, "ansible/playbook/1/action/start", "forged")
	pk.Ignore = true
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("the hook tried to route an ignored publish: %v", r)
		}
	}()
	got, err := h.OnPublish(cl, pk)
	if err != nil || !got.Ignore {
		t.Fatalf("OnPublish = Ignore %v, %v; want the packet passed by unchanged", got.Ignore, err)
	}
}
