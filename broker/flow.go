package broker

import (
	"bytes"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"
)

// Flow control: each MQTT 5 client's Receive Maximum.
//
// mochi's own flow control stalls a subscriber for good: once the quota is
// spent it parks messages in the client's in-flight store, sends one per
// packet the client sends (the one that arrived in the earliest second, so
// not in order), and deletes it from the store as it does, so the ack that
// comes back restores no quota; twenty such messages later the client gets
// nothing ever again (issue 13: mosquitto_sub -V 5 got 40 of 70 messages).
// Nor can a hook hold mochi's writer: mochi coalesces what it writes to a
// client while the client's queue is not empty, and flushes only with a
// later write made when it is, so whatever it wrote meanwhile (the messages
// the client must ack, a PINGRESP) would wait for good as well.
//
// So the window is kept where the bytes leave: in the client's gatedConn,
// below mochi's writer. flowHook switches mochi's quota off for the client
// (a quota of 0 is "no limit" to mochi), and mochi writes everything, in
// order, as it does for MQTT 3.1.1. The connection counts the QoS 1 and 2
// PUBLISH packets that go out, and once the client has its Receive Maximum
// unacknowledged, holds everything mochi writes after that, in order, until
// acks come in: its framer reads PUBACK, PUBCOMP and PUBREC-with-an-error
// from the client, and each frees a place and lets held packets go, in one
// write. Nothing is reordered, nothing is written that mochi did not write,
// and mochi's own bounds still apply: a client has at most max_inflight QoS
// 1 and 2 messages, held or sent (beyond, mochi drops and counts them as
// inflight_quota); QoS 0 messages held behind them are dropped past
// max_queued_messages, and counted as slow_subscriber.
//
// MQTT 3.1.1 has no Receive Maximum, and an MQTT 5 client that announces
// none allows 65,535: neither has a window.

// flowHook gives each MQTT 5 client that announces a Receive Maximum a
// window on its connection.
type flowHook struct {
	mqtt.HookBase
	maxQueued int
	metrics   *metrics
	log       zerolog.Logger
	warn      rateLimitedLog
}

// ID names the hook in mochi's logs.
func (h *flowHook) ID() string { return "firehose-flow" }

// Provides lists the events the hook handles.
func (h *flowHook) Provides(b byte) bool { return b == mqtt.OnConnect }

// OnConnect takes the client's Receive Maximum over from mochi. It runs
// after mochi parsed the CONNECT (and after the auth hook admitted it), and
// before mochi writes anything to the client but a CONNACK. The property
// itself is zeroed too, because mochi resets the quota from it when a new
// connection inherits a session's in-flight messages.
func (h *flowHook) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	rm := int(cl.Properties.Props.ReceiveMaximum)
	gc, ok := cl.Net.Conn.(*gatedConn)
	if !ok || cl.Properties.ProtocolVersion != 5 || rm == 0 {
		return nil
	}
	cl.Properties.Props.ReceiveMaximum = 0
	cl.State.Inflight.ResetSendQuota(0)
	gc.setWindow(&window{limit: rm, maxHeld: h.maxQueued, unacked: map[uint16]struct{}{}, dropped: h.droppedFor(cl)})
	return nil
}

// droppedFor counts and logs the QoS 0 messages a connection drops for
// client cl because broker.max_queued_messages wait: behind its Receive
// Maximum, or behind a retained stream.
func (h *flowHook) droppedFor(cl *mqtt.Client) func(topic []byte) {
	return func(topic []byte) {
		h.metrics.droppedSlow.Add(1)
		h.warn.do(func() {
			h.log.Warn().Str("client", cl.ID).Str("remote", cl.Net.Remote).Bytes("topic", topic).
				Msg("dropping QoS 0 messages for a slow subscriber: broker.max_queued_messages wait behind its Receive Maximum or its retained messages")
		})
	}
}

// window is one connection's Receive Maximum; gatedConn guards it with its
// write lock.
type window struct {
	limit    int
	maxHeld  int // QoS 0 PUBLISH packets held at most
	unacked  map[uint16]struct{}
	held     [][]byte // packets mochi wrote that wait, in order; each a copy
	heldQoS0 int
	dropped  func(topic []byte)
}

// admit takes what mochi writes, whole packets, and returns what may go
// now: every packet but the PUBLISH packets that must wait, which it keeps.
// PUBLISH packets wait behind one that waits, in order; other packets (the
// client's own acks, PUBREL, PINGRESP, SUBACK) never wait, or a client at
// its Receive Maximum could not complete a QoS 2 exchange, nor keep alive.
func (w *window) admit(p []byte) []byte {
	var out []byte // nil while all of p so far goes
	for i := 0; i < len(p); {
		n, pub := packetAt(p[i:])
		if n == 0 {
			n = len(p) - i // not whole packets: not ours to account
		}
		wait := pub.isPublish && (len(w.held) > 0 || pub.qos > 0 && len(w.unacked) >= w.limit)
		switch {
		case wait:
			if out == nil {
				out = append(make([]byte, 0, len(p)), p[:i]...)
			}
			w.hold(p[i:i+n], pub)
		case out != nil:
			out = append(out, p[i:i+n]...)
		}
		if !wait && pub.qos > 0 {
			w.unacked[pub.id] = struct{}{}
		}
		i += n
	}
	if out == nil {
		return p
	}
	return out
}

// hold keeps a PUBLISH packet, or drops it if it is QoS 0 and maxHeld wait.
func (w *window) hold(pk []byte, pub publish) {
	if pub.qos == 0 {
		if w.heldQoS0 >= w.maxHeld {
			w.dropped(pub.topic)
			return
		}
		w.heldQoS0++
	}
	w.held = append(w.held, bytes.Clone(pk))
}

// acked frees the place of message id and returns the held packets that
// may go now, concatenated (nil if none).
func (w *window) acked(id uint16) []byte {
	if _, ok := w.unacked[id]; !ok {
		return nil
	}
	delete(w.unacked, id)
	return w.release()
}

// release returns the held packets that may go now, concatenated (nil if
// none).
func (w *window) release() []byte {
	var out []byte
	for len(w.held) > 0 {
		_, pub := packetAt(w.held[0])
		if pub.qos > 0 {
			if len(w.unacked) >= w.limit {
				break
			}
			w.unacked[pub.id] = struct{}{}
		} else {
			w.heldQoS0--
		}
		out = append(out, w.held[0]...)
		w.held[0] = nil
		w.held = w.held[1:]
	}
	if len(w.held) == 0 {
		w.held = nil // let the array go
	}
	return out
}

// publish is what the window needs of an outgoing packet.
type publish struct {
	isPublish bool
	qos       byte
	id        uint16
	topic     []byte
}

// packetAt returns the length of the whole packet at the start of p (0 if
// p does not hold one) and, for a PUBLISH, its QoS, packet id and topic.
func packetAt(p []byte) (int, publish) {
	remaining, size, done, err := decodeLength(p)
	if !done || err != nil || len(p) < size+remaining {
		return 0, publish{}
	}
	n := size + remaining
	if p[0]>>4 != packets.Publish {
		return n, publish{}
	}
	pub := publish{isPublish: true, qos: (p[0] >> 1) & 3}
	body := p[size:n]
	if len(body) < 2 {
		return n, pub
	}
	tl := int(body[0])<<8 | int(body[1])
	if len(body) < 2+tl {
		return n, pub
	}
	pub.topic = body[2 : 2+tl]
	if pub.qos > 0 && len(body) >= 2+tl+2 {
		pub.id = uint16(body[2+tl])<<8 | uint16(body[2+tl+1])
	}
	return n, pub
}

// frees reports whether a packet the client sent, of type typ with body,
// frees a place in its window, and which: PUBACK and PUBCOMP do, and so
// does a PUBREC with an error (the QoS 2 exchange ends there).
func frees(typ byte, body []byte) (uint16, bool) {
	if len(body) < 2 {
		return 0, false
	}
	id := uint16(body[0])<<8 | uint16(body[1])
	switch typ {
	case packets.Puback, packets.Pubcomp:
		return id, true
	case packets.Pubrec:
		return id, len(body) > 2 && body[2] >= packets.ErrUnspecifiedError.Code
	}
	return 0, false
}
