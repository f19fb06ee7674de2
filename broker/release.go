package broker

import (
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The deferred PUBACK, in one place.
//
// The router's hook must hold a client's publish until every required
// route has it, and only then let mochi retain it, deliver it and ack it.
// mochi's hooks decide synchronously: OnPublish may pass a packet, drop it
// (ErrRejectPacket: no ack, no delivery), or answer it with a reason code,
// but not answer later. Blocking in OnPublish would hold the client's reads
// for a sink's round trip per message. So the hook takes the packet
// (ErrRejectPacket) into a pipeline that routes in batches, and then hands
// it back to mochi with Release: mochi's own InjectPacket, as the client
// that sent it, so that everything after OnPublish is mochi's own path
// (origin and No Local, retain, message expiry, the PUBACK or PUBREC
// written by mochi's writer, in order with everything else it writes to
// that client). A mark on the packet tells the hook, when mochi calls
// OnPublish again, that the packet is back from the pipeline.
//
// What this relies on of mochi (v2.7.9), checked by TestReleaseContract:
//   - InjectPacket(cl, pk) runs processPublish as for a packet read from cl;
//   - a publish's Filters are carried unchanged from InjectPacket to the
//     OnPublish hooks (a publish read from the network has none);
//   - mochi counts a packet it reads (ReadPacket) and again one injected,
//     so Release takes one off $SYS's packets and messages received.

var (
	markRouted  = packets.Subscriptions{{Filter: "\x00firehose: released"}}
	markDropped = packets.Subscriptions{{Filter: "\x00firehose: released, dropped"}}
)

// Release hands back to mochi a publish that the router's hook took from
// client cl. mochi then processes it as it would have at first: it
// retains, delivers and acks it or, with drop, only acks it (an MQTT 3.1.1
// publish refused for good: it has no negative ack). It fails when mochi
// does, e.g. when the client has gone and the ack cannot be written.
func (b *Broker) Release(cl *mqtt.Client, pk packets.Packet, drop bool) error {
	pk.Filters = markRouted
	if drop {
		pk.Filters = markDropped
	}
	if err := b.server.InjectPacket(cl, pk); err != nil {
		return err
	}
	atomic.AddInt64(&b.server.Info.PacketsReceived, -1)
	atomic.AddInt64(&b.server.Info.MessagesReceived, -1)
	return nil
}

// Batch runs fn, in which the caller releases or answers several of cl's
// publishes, with the client's connection corked: what mochi writes to it
// meanwhile (the PUBACKs) leaves in one write when fn returns, in the order
// mochi wrote it, instead of a system call each.
func (b *Broker) Batch(cl *mqtt.Client, fn func()) {
	gc, ok := cl.Net.Conn.(*gatedConn)
	if !ok {
		fn()
		return
	}
	gc.cork()
	defer gc.uncork()
	fn()
}

// Idle reports whether mochi has read everything client cl sent so far,
// so that the publish being processed is the only one: routing it at once,
// in OnPublish, delays no other. It is asked from OnPublish, on the
// client's reading goroutine.
func (b *Broker) Idle(cl *mqtt.Client) bool {
	gc, ok := cl.Net.Conn.(*gatedConn)
	return ok && !gc.inputPending()
}

// Released reports whether pk came back through Release, and whether it is
// to be dropped; it removes the mark, so that nothing after the hook sees it.
func (b *Broker) Released(pk *packets.Packet) (released, drop bool) {
	if len(pk.Filters) != 1 {
		return false, false
	}
	switch &pk.Filters[0] {
	case &markRouted[0]:
		released = true
	case &markDropped[0]:
		released, drop = true, true
	default:
		return false, false
	}
	pk.Filters = nil
	return released, drop
}
