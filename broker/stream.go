package broker

import (
	"bytes"
	"errors"
	"net"

	"github.com/mochi-mqtt/server/v2/packets"
)

// What a connection does for retained messages (see retain.go for the
// hook that drives it).
//
// A late subscriber's retained messages are written by the retained hook's
// stream, not by mochi, and they must reach the client after its SUBACK and
// before any live message of the new subscription, in order per topic, as
// mosquitto's single queue does. mochi's writer cannot be paused, so the
// connection does it where the bytes leave: from the SUBSCRIBE until every
// stream of it ends, liveHold keeps the PUBLISH packets mochi writes, in
// order, and writes them after the stream. Other packets (acks, PINGRESP,
// the SUBACK itself) go at once. The stream's own packets are written
// between mochi's whole writes, under the same lock, so no packet is ever
// split; their packet ids are reserved in mochi's in-flight store, so mochi
// never reuses them, handles their PUBACKs and resends them to a resumed
// session as its own.
//
// The stream is flow-controlled: a QoS 1 or 2 message waits for a place in
// the client's Receive Maximum window (MQTT 5) or the stream's own window
// (streamWindow, for clients that announce none), and the acks that come
// back (acked, on the reading goroutine) free places and wake it. Nothing is
// dropped for being many; a client that stops acking stops its stream, and
// nobody else's.
//
// What mochi holds meanwhile is bounded as ever: QoS 0 packets held beyond
// broker.max_queued_messages are dropped and counted as slow_subscriber,
// and mochi itself drops QoS 1 beyond broker.max_inflight.
//
// ackGate is the other half of retained durability: the PUBACK (PUBREC) of
// a retained publish leaves only once the store has synced it, and so does
// everything written after it, in order. Many publishes share one sync.

// streamWindow is how many retained QoS 1 and 2 messages a stream has
// unacknowledged at most, for a client that announced no Receive Maximum
// (mosquitto's max_inflight_messages is 20).
const streamWindow = 64

// errStreamEnded tells a stream its client has gone.
var errStreamEnded = errors.New("client gone")

// liveHold is a connection's retained streams' state; gatedConn guards it
// with wmu.
type liveHold struct {
	streams  int      // SUBSCRIBE packets whose retained messages are not all written
	held     [][]byte // mochi's PUBLISH packets written meanwhile, in order; copies
	heldQoS0 int
	maxHeld  int
	dropped  func(topic []byte)
	subacks  map[uint16]chan struct{} // SUBACKs a stream waits to see leave
	own      map[uint16]struct{}      // the streams' QoS 1 and 2 packets not acked yet
	ownLimit int
	stopped  bool
}

// admit returns what of p goes now: everything but PUBLISH packets while a
// stream runs, which it keeps. A SUBACK that a stream waits for lets the
// stream start.
func (h *liveHold) admit(p []byte) []byte {
	if h.streams == 0 {
		return p
	}
	var out []byte // nil while all of p so far goes
	for i := 0; i < len(p); {
		n, pub := packetAt(p[i:])
		if n == 0 {
			n = len(p) - i
		}
		switch {
		case pub.isPublish:
			if out == nil {
				out = append(make([]byte, 0, len(p)), p[:i]...)
			}
			h.hold(p[i:i+n], pub)
		default:
			if p[i]>>4 == packets.Suback {
				h.subacked(p[i : i+n])
			}
			if out != nil {
				out = append(out, p[i:i+n]...)
			}
		}
		i += n
	}
	if out == nil {
		return p
	}
	return out
}

func (h *liveHold) hold(pk []byte, pub publish) {
	if pub.qos == 0 {
		if h.heldQoS0 >= h.maxHeld {
			h.dropped(pub.topic)
			return
		}
		h.heldQoS0++
	}
	h.held = append(h.held, bytes.Clone(pk))
}

func (h *liveHold) subacked(pk []byte) {
	_, size, done, err := decodeLength(pk)
	if !done || err != nil || len(pk) < size+2 {
		return
	}
	id := uint16(pk[size])<<8 | uint16(pk[size+1])
	if ch, ok := h.subacks[id]; ok {
		close(ch)
		delete(h.subacks, id)
	}
}

// ownAcked frees the place of one of the streams' packets; it reports
// whether id was one.
func (h *liveHold) ownAcked(id uint16) bool {
	if _, ok := h.own[id]; !ok {
		return false
	}
	delete(h.own, id)
	return true
}

// beginStream starts holding mochi's PUBLISH packets for a SUBSCRIBE whose
// retained messages will be streamed. It is called from mochi's
// OnSubscribe, before mochi adds the subscription, on the reading goroutine.
func (c *gatedConn) beginStream(maxHeld int, dropped func(topic []byte)) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.live == nil {
		limit := streamWindow
		if c.win != nil {
			limit = c.win.limit
		}
		c.live = &liveHold{maxHeld: maxHeld, dropped: dropped, subacks: map[uint16]chan struct{}{},
			own: map[uint16]struct{}{}, ownLimit: limit}
	}
	c.live.streams++
}

// awaitSuback returns a channel closed once the SUBACK with packet id
// leaves; it is called before mochi writes it.
func (c *gatedConn) awaitSuback(id uint16) <-chan struct{} {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ch := make(chan struct{})
	c.live.subacks[id] = ch
	return ch
}

// endStream ends one SUBSCRIBE's stream. After the last, what mochi wrote
// meanwhile goes, in order, through the Receive Maximum window.
func (c *gatedConn) endStream() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	h := c.live
	if h.streams--; h.streams > 0 {
		return
	}
	held := h.held
	h.held, h.heldQoS0 = nil, 0
	if len(h.own) == 0 && len(h.subacks) == 0 {
		c.live = nil // back to the fast path
	}
	var out []byte
	for _, pk := range held {
		out = append(out, pk...)
	}
	if c.win != nil {
		if len(out) > 0 {
			out = c.win.admit(out)
		}
		out = append(out, c.win.release()...)
	}
	_ = c.writeOutLocked(out)
}

// stopStreams wakes the streams of a client that has gone, for good.
func (c *gatedConn) stopStreams() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.live != nil {
		c.live.stopped = true
	}
	c.room.Broadcast()
}

// waitRoom waits until a stream's packet of the QoS given may be written
// at once: a place in the windows for QoS 1 and 2, and for any QoS nothing
// held by the Receive Maximum window before it. It fails once the client
// has gone.
func (c *gatedConn) waitRoom(qos byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for {
		h := c.live
		if c.werr != nil || h == nil || h.stopped {
			return errStreamEnded
		}
		ok := qos == 0 || len(h.own) < h.ownLimit
		if c.win != nil {
			ok = ok && len(c.win.held) == 0 && (qos == 0 || len(c.win.unacked) < c.win.limit)
		}
		if ok {
			return nil
		}
		c.room.Wait()
	}
}

// writeOwn writes a stream's PUBLISH packet pk, after waitRoom said it may
// go; id is its packet id if qos > 0.
func (c *gatedConn) writeOwn(pk []byte, id uint16, qos byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil || c.live == nil || c.live.stopped {
		return errStreamEnded
	}
	if qos > 0 {
		c.live.own[id] = struct{}{}
		if c.win != nil {
			c.win.unacked[id] = struct{}{}
		}
	}
	if err := c.writeOutLocked(pk); err != nil {
		return errStreamEnded
	}
	return nil
}

// ackGate holds a client's acks of retained publishes until the store has
// them on disk, and everything written after such an ack, in order.
type ackGate struct {
	wait map[uint16]uint64 // packet id -> the store write its ack waits for
	segs []heldSegment
	// armed is set while a release waits for the store's sync of last,
	// the latest write an ack waits for: one wake-up per sync, not one
	// per publish.
	armed bool
	last  uint64
}

// heldSegment is what was written from one waiting ack up to the next.
type heldSegment struct {
	seq uint64
	b   []byte
}

func (a *ackGate) active() bool { return len(a.wait) > 0 || len(a.segs) > 0 }

// admit returns what of p goes now, given that every store write up to
// synced is on disk; it keeps the rest.
func (a *ackGate) admit(p []byte, synced uint64) []byte {
	var out []byte // nil while all of p so far goes
	for i := 0; i < len(p); {
		n, _ := packetAt(p[i:])
		if n == 0 {
			n = len(p) - i
		}
		pk := p[i : i+n]
		if typ := pk[0] >> 4; (typ == packets.Puback || typ == packets.Pubrec) && len(a.wait) > 0 {
			if id, ok := ackID(pk); ok {
				if seq, ok := a.wait[id]; ok {
					delete(a.wait, id)
					if seq > synced {
						a.segs = append(a.segs, heldSegment{seq: seq})
					}
				}
			}
		}
		switch {
		case len(a.segs) > 0:
			if out == nil {
				out = append(make([]byte, 0, i), p[:i]...)
			}
			last := &a.segs[len(a.segs)-1]
			last.b = append(last.b, pk...)
		case out != nil:
			out = append(out, pk...)
		}
		i += n
	}
	if out == nil {
		return p
	}
	return out
}

// release returns what may go now that every write up to synced is on disk.
func (a *ackGate) release(synced uint64) []byte {
	var out []byte
	n := 0
	for ; n < len(a.segs) && a.segs[n].seq <= synced; n++ {
		out = append(out, a.segs[n].b...)
	}
	a.segs = append(a.segs[:0], a.segs[n:]...)
	return out
}

func ackID(pk []byte) (uint16, bool) {
	_, size, done, err := decodeLength(pk)
	if !done || err != nil || len(pk) < size+2 {
		return 0, false
	}
	return uint16(pk[size])<<8 | uint16(pk[size+1]), true
}

// awaitDurable makes the ack of the client's publish id wait until store
// write seq is on disk. It is called from retainTail.OnPublish, before
// mochi writes the ack.
func (c *gatedConn) awaitDurable(id uint16, seq uint64) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.durable.wait == nil {
		c.durable.wait = map[uint16]uint64{}
	}
	c.durable.wait[id] = seq
	c.durable.last = max(c.durable.last, seq)
	c.armLocked()
}

// armLocked asks the store to release the connection once its latest
// awaited write is on disk, unless it already asked; the caller holds wmu.
func (c *gatedConn) armLocked() {
	if c.durable.armed {
		return
	}
	c.durable.armed = true
	c.g.retained.WhenDurable(c.durable.last, func(err error) {
		// On the store's sync goroutine, which must not wait on a client.
		go c.releaseDurable(err)
	})
}

// releaseDurable writes the acks (and what followed them) whose retained
// messages are on disk. If the store could not sync, the client's
// connection ends instead: its unacknowledged publishes are not safe, and
// it sends them again when it reconnects.
func (c *gatedConn) releaseDurable(err error) {
	if err != nil {
		_ = c.Close()
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.durable.armed = false
	synced := c.g.synced()
	if out := c.durable.release(synced); len(out) > 0 && c.werr == nil {
		_ = c.writeLocked(out)
	}
	if c.durable.last > synced {
		c.armLocked()
	}
}

var _ net.Conn = (*gatedConn)(nil)
