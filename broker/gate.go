package broker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker/retained"
)

// The gate is the pre-authentication budget of every listener (TCP, TLS,
// WebSocket). mochi would give a new connection a client with its buffers,
// an outbound queue and a writer goroutine at once, wait for its CONNECT
// forever, and allocate the length any packet's header claims before a
// byte of it arrives. So each accepted connection first passes the gate:
//
//   - it has ConnectTimeout to finish its TLS or WebSocket handshake and
//     send a whole CONNECT, or it is closed;
//   - a CONNECT whose header claims more than MaxConnectSize is refused
//     from its header; a smaller one is read into a buffer that grows with
//     the bytes that arrive, never from the claim;
//   - only then does mochi see the connection (and the CONNECT, replayed).
//
// Afterwards the gate stays in the connection's read path as a framer: a
// packet whose header claims more than the client buffer is held back
// until all its bytes have arrived, so that mochi's allocation of the
// claimed length only ever copies bytes the client really sent; a packet
// over MaxPacketSize ends the connection, with DISCONNECT "packet too
// large" for an MQTT 5 client.
type gate struct {
	connectTimeout time.Duration
	maxConnect     int
	hold           int // packets claiming more than this wait until they have arrived
	maxPacket      int // 0: no limit
	metrics        *metrics
	log            zerolog.Logger
	warn           rateLimitedLog

	// disconnect ends a client that sent a packet over maxPacket, through
	// mochi (which writes the DISCONNECT from its own writer).
	disconnect func(cl *mqtt.Client, code packets.Code)
	// retained is the store whose syncs release the acks of retained
	// publishes (see ackGate).
	retained *retained.Store
	// screen looks at a CONNECT before mochi sees the connection, and
	// returns a CONNACK to refuse it with, or nil (see authHook.screen).
	screen func(remote string, version byte, connect []byte) []byte
}

// Reasons a connection is refused before authentication, as the `reason`
// label of firehose_broker_connections_refused_total.
const (
	refusedConnectTimeout   = "connect_timeout"   // no whole CONNECT within connect_timeout
	refusedConnectTooLarge  = "connect_too_large" // a CONNECT over max_connect_size
	refusedNotConnect       = "not_connect"       // the first packet was not a CONNECT, or was malformed
	refusedBadCredentials   = "bad_credentials"   // wrong password, unknown user, anonymous when not allowed
	refusedThrottled        = "throttled"         // the source or username is backing off after failures
	refusedBusy             = "busy"              // no password check slot freed within connect_timeout
	refusedWillNotAllowed   = "will_not_allowed"  // a will the client may not publish
	refusedClientIDTaken    = "client_id_taken"   // the client id is another identity's session
	refusedReservedClientID = "reserved_client_id"
	refusedPacketTooLarge   = "packet_too_large" // a later packet over max_packet_size (the connection ends)
)

var (
	errConnectTooLarge = errors.New("CONNECT larger than broker.max_connect_size")
	errScreened        = errors.New("refused at CONNECT") // answered, counted and logged by the screen
)

// gatedListener is a mochi listener whose connections pass the gate.
type gatedListener struct {
	listeners.Listener
	gate   *gate
	server *mqtt.Server
}

// Serve serves the inner listener, with every new connection admitted by the gate first.
func (l gatedListener) Serve(establish listeners.EstablishFn) {
	l.Listener.Serve(l.gate.wrap(establish))
}

// Close closes the listener and disconnects its clients. It does what
// mochi's closeListenerClients does, but through Clients.GetAll: mochi's
// Clients.GetByListener takes its read lock twice (it calls Len inside),
// which deadlocks when a client connects or leaves in between, as they do
// while a busy broker shuts down.
func (l gatedListener) Close(listeners.CloseFn) {
	l.Listener.Close(func(id string) {
		for _, cl := range l.server.Clients.GetAll() {
			if cl.Net.Listener == id && !cl.Closed() {
				_ = l.server.DisconnectClient(cl, packets.ErrServerShuttingDown)
			}
		}
	})
}

// synced is the last retained-store write on disk.
func (g *gate) synced() uint64 {
	if g.retained == nil {
		return ^uint64(0)
	}
	return g.retained.Synced()
}

// wrap puts the gate in front of mochi's establish function.
func (g *gate) wrap(establish listeners.EstablishFn) listeners.EstablishFn {
	return func(listener string, c net.Conn) error {
		gc, err := g.admit(c)
		if err != nil {
			_ = c.Close()
			g.refused(listener, c.RemoteAddr(), err)
			return nil // counted and logged here; mochi would log every one at warn
		}
		if err := establish(listener, gc); err != nil {
			// How the connection ended (EOF, a refusal already counted):
			// mochi's listener would log each at warn.
			g.log.Debug().Err(err).Str("listener", listener).Str("remote", addrString(c.RemoteAddr())).Msg("client connection ended")
		}
		return nil
	}
}

func (g *gate) refused(listener string, remote net.Addr, err error) {
	reason := refusedNotConnect
	switch {
	case errors.Is(err, errScreened):
		return
	case errors.Is(err, errConnectTooLarge):
		reason = refusedConnectTooLarge
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		g.metrics.refuse(refusedNotConnect)
		return // the client went away before it said anything: nothing worth a warning
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			reason = refusedConnectTimeout
		}
	}
	g.metrics.refuse(reason)
	g.warn.do(func() {
		ev := g.log.Warn().Err(err).Str("listener", listener).Str("remote", addrString(remote)).Str("reason", reason)
		ev.Msg("closed a connection before its CONNECT")
	})
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// admit reads the connection's CONNECT within the deadline and returns the
// connection mochi reads it from. Over-read bytes (a client that sends its
// first packets right behind the CONNECT) stay in the connection's buffer.
func (g *gate) admit(c net.Conn) (*gatedConn, error) {
	deadline := time.Now().Add(g.connectTimeout)
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	buf, err := fill(c, nil, 2, g.maxConnect+5)
	if err != nil {
		return nil, err
	}
	if buf[0]>>4 != packets.Connect {
		return nil, fmt.Errorf("first packet is of type %d, not CONNECT", buf[0]>>4)
	}
	var remaining, header int
	for {
		var done bool
		remaining, header, done, err = decodeLength(buf)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		if buf, err = fill(c, buf, len(buf)+1, g.maxConnect+5); err != nil {
			return nil, err
		}
	}
	if remaining > g.maxConnect {
		return nil, fmt.Errorf("%w: its header claims %d bytes, the limit is %d", errConnectTooLarge, remaining, g.maxConnect)
	}
	total := header + remaining
	if buf, err = fill(c, buf, total, total); err != nil {
		return nil, err
	}
	version := protocolVersion(buf[header:total])
	if g.screen != nil {
		if connack := g.screen(addrString(c.RemoteAddr()), version, buf[header:total]); connack != nil {
			_, _ = c.Write(connack) // within the deadline
			return nil, errScreened
		}
	}
	// mochi sets its own deadline (the client's keepalive) once it has the
	// CONNECT; until then reads keep ours, and writes have none.
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		return nil, err
	}
	gc := &gatedConn{Conn: c, g: g, version: version, pend: buf, rel: total, f: framer{packets: 1}}
	gc.room.L = &gc.wmu
	// Every client's acks are seen on their way in: they free places in a
	// Receive Maximum window and in a retained stream's (see stream.go).
	gc.f.acks = gc.acked
	return gc, nil
}

// fill reads from c until buf holds at least n bytes. It grows buf with
// what arrives (at most doubling it per read) and never beyond limit, so a
// peer that claims much and sends little costs little.
func fill(c net.Conn, buf []byte, n, limit int) ([]byte, error) {
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grow := min(max(len(buf), 256), limit-len(buf))
			if grow <= 0 {
				grow = n - len(buf)
			}
			buf = slices.Grow(buf, grow)
		}
		m, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

// decodeLength decodes the remaining length of the fixed header at the
// start of b: the length, the size of the fixed header, and whether b held
// all of it.
func decodeLength(b []byte) (remaining, header int, done bool, err error) {
	mult := 1
	for i := 1; i < len(b); i++ {
		if i > 4 {
			return 0, 0, false, errors.New("malformed remaining length")
		}
		remaining += int(b[i]&0x7f) * mult
		if b[i]&0x80 == 0 {
			return remaining, i + 1, true, nil
		}
		mult <<= 7
	}
	return 0, 0, false, nil
}

// protocolVersion reads the protocol level from a CONNECT's variable header
// (after the protocol name), or 0 if it is malformed; mochi validates it.
func protocolVersion(body []byte) byte {
	if len(body) < 2 {
		return 0
	}
	n := int(body[0])<<8 | int(body[1])
	if len(body) < 2+n+1 {
		return 0
	}
	return body[2+n]
}

// gatedConn is a client connection past the gate. mochi reads from it and
// writes to it as to any net.Conn; Read passes packets through the framer.
type gatedConn struct {
	net.Conn
	g       *gate
	version byte // the client's protocol version, from its CONNECT

	// client is the mochi client of this connection, set when it connects,
	// so that an oversized packet can be answered by mochi.
	client atomic.Pointer[mqtt.Client]

	// Read state, used only by the one goroutine that reads (mochi's).
	pend  []byte // bytes read from the network that mochi has not taken
	rel   int    // pend[:rel] may be handed to mochi
	f     framer
	err   error // the read error to return once nothing more can be handed out
	spare []byte

	held     atomic.Int64 // bytes of a packet held back until it has arrived, for tests
	deadline atomic.Int64 // the deadline set last, UnixNano; 0 for none

	// taken counts the packets mochi has read (the auth hook's
	// OnPacketRead), against the framer's count of those handed to it.
	taken int

	// batch is set while mochi works through packets that arrived in one
	// read (the reading goroutine's copy of wbatch; see startBatch).
	batch bool

	// Write side: the client's Receive Maximum, if it announced one (see
	// flow.go), and the corks: the router's (see Batch) and the reading
	// goroutine's (wbatch, see startBatch).
	wmu    sync.Mutex
	win    *window
	werr   error
	corked int
	wbatch bool
	wbuf   []byte

	// live holds mochi's PUBLISH packets while retained messages stream
	// to the client, and durable holds its acks until the retained
	// messages they acknowledge are on disk (see stream.go). room is
	// signalled when a place frees in the client's windows.
	live    *liveHold
	durable ackGate
	room    sync.Cond
}

// inputPending reports whether mochi holds packets of this client that it
// has not read yet (a client that sends before it is answered). Only the
// reading goroutine calls it.
func (c *gatedConn) inputPending() bool { return c.f.packets > c.taken }

// cork makes the connection keep what is written until uncork, so that
// what mochi writes in a row (the PUBACKs of a batch the router releases)
// leaves in one write. Writes stay in order: every write goes through the
// same buffer meanwhile.
func (c *gatedConn) cork() {
	c.wmu.Lock()
	c.corked++
	c.wmu.Unlock()
}

// uncork sends what the cork holds once the last cork is off, even while
// the reading goroutine's batch goes on: the router releases a batch from
// its own goroutine and wants its acks out now.
func (c *gatedConn) uncork() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.corked--; c.corked > 0 {
		return
	}
	c.flushLocked()
}

// startBatch corks the connection while mochi works through the packets
// that one read brought, several at once (a publisher with messages in
// flight, a subscriber acking what it got): mochi writes each PUBACK as
// it processes the PUBLISH, with a write(2) of its own, and these now
// leave together when mochi has handled them all and reads again
// (endBatch). An ack waits at most for mochi to handle the packets that
// arrived with its own; a lone packet is never held. It is called, as
// endBatch, on the reading goroutine only.
func (c *gatedConn) startBatch() {
	c.batch = true
	c.wmu.Lock()
	c.wbatch = true
	c.wmu.Unlock()
}

// endBatch sends what was written during the reading goroutine's batch.
// Read calls it before it waits for the network, so nothing is held while
// mochi waits for the client.
func (c *gatedConn) endBatch() {
	if !c.batch {
		return
	}
	c.batch = false
	c.wmu.Lock()
	c.wbatch = false
	if c.corked == 0 {
		c.flushLocked()
	}
	c.wmu.Unlock()
}

// flushLocked writes what the corks hold; the caller holds wmu.
func (c *gatedConn) flushLocked() {
	if len(c.wbuf) == 0 {
		return
	}
	if c.werr == nil {
		if _, err := c.Conn.Write(c.wbuf); err != nil {
			c.werr = err
		}
	}
	if cap(c.wbuf) > 64<<10 {
		c.wbuf = nil
	} else {
		c.wbuf = c.wbuf[:0]
	}
}

// writeLocked writes p now, or into the corks' buffer; the caller holds wmu.
func (c *gatedConn) writeLocked(p []byte) error {
	if c.werr != nil {
		return c.werr
	}
	if c.corked > 0 || c.wbatch {
		c.wbuf = append(c.wbuf, p...)
		return nil
	}
	if _, err := c.Conn.Write(p); err != nil {
		c.werr = err
		c.room.Broadcast()
		return err
	}
	return nil
}

// closeFlush bounds how long Close waits for the peer to take what the
// cork still holds.
const closeFlush = 200 * time.Millisecond

// Close sends what the cork holds before it closes the connection: mochi
// writes a DISCONNECT and then closes (DisconnectClient), and when that
// happens during a batch the router releases (a publish beyond the Receive
// Maximum, released corked), the DISCONNECT and the acks before it must
// not be lost with the buffer. A writer blocked on a peer that does not
// read holds wmu; then there is nothing corked to send, and closing
// unblocks it.
func (c *gatedConn) Close() error {
	if c.wmu.TryLock() {
		if len(c.wbuf) > 0 && c.werr == nil {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlush))
			_, _ = c.Conn.Write(c.wbuf)
		}
		c.wbuf, c.werr = nil, net.ErrClosed
		c.room.Broadcast()
		c.wmu.Unlock()
	}
	return c.Conn.Close()
}

// setWindow gives the connection a Receive Maximum window. It is called on
// the reading goroutine (mochi's OnConnect), before mochi writes any PUBLISH.
func (c *gatedConn) setWindow(w *window) {
	c.wmu.Lock()
	c.win = w
	c.wmu.Unlock()
}

// Write writes what mochi's writer writes (whole packets), or keeps it:
// PUBLISH packets while retained messages stream to the client (liveHold),
// or once the client has its Receive Maximum unacknowledged, until acks
// free places (acked); and everything from an ack on whose message is not
// on disk yet, until it is (ackGate).
func (c *gatedConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.win == nil && c.live == nil && !c.durable.active() && c.corked == 0 && !c.wbatch {
		return c.Conn.Write(p)
	}
	now := p
	if c.live != nil {
		now = c.live.admit(now)
	}
	if c.win != nil && len(now) > 0 {
		now = c.win.admit(now)
	}
	if err := c.writeOutLocked(now); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeOutLocked writes p, past the ack gate; the caller holds wmu.
func (c *gatedConn) writeOutLocked(p []byte) error {
	if c.durable.active() {
		p = c.durable.admit(p, c.g.synced())
	}
	if len(p) == 0 {
		return nil
	}
	return c.writeLocked(p)
}

// acked is called by the framer, on the reading goroutine, for each
// PUBACK, PUBREC and PUBCOMP the client sends, before mochi reads it:
// what its window held and may now go is written, in one write, and a
// retained stream waiting for a place is woken.
func (c *gatedConn) acked(typ byte, body []byte) {
	id, ok := frees(typ, body)
	if !ok {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.live != nil && c.live.ownAcked(id) {
		c.room.Broadcast()
	}
	if c.win == nil {
		return
	}
	if out := c.win.acked(id); len(out) > 0 {
		_ = c.writeOutLocked(out)
	}
	c.room.Broadcast()
}

// deadlineSlack is how much later than asked a connection's deadline may
// be. mochi moves the deadline forward before every packet it reads (the
// keepalive); the connection passes a move on only once the deadline it
// set has less than this left, and then sets it this much later, so a
// busy client costs a timer update per slack rather than per packet, and
// a silent one is closed no earlier than mochi asked.
const deadlineSlack = time.Second

// SetDeadline sets the read and write deadline, with deadlineSlack.
func (c *gatedConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.deadline.Store(0)
		return c.Conn.SetDeadline(t)
	}
	if set := c.deadline.Load(); set != 0 && t.UnixNano() <= set {
		return nil
	}
	t = t.Add(deadlineSlack)
	c.deadline.Store(t.UnixNano())
	return c.Conn.SetDeadline(t)
}

// SetClient records the mochi client that owns the connection.
func (c *gatedConn) SetClient(cl *mqtt.Client) { c.client.Store(cl) }

// Read hands mochi the bytes the framer releases. While nothing is pending
// it reads straight into p, so the common case costs no copy.
func (c *gatedConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if c.rel > 0 {
			n := copy(p, c.pend[:c.rel])
			c.consume(n)
			return n, nil
		}
		if len(c.pend) > 0 {
			rel, err := c.f.advance(c.pend, c.g)
			if err != nil {
				return 0, c.tooLarge(err)
			}
			if rel > 0 {
				c.rel = rel
				continue
			}
		}
		// mochi has handled everything handed to it so far: what it wrote
		// meanwhile goes before the wait for more.
		c.endBatch()
		if c.err != nil {
			// Nothing more will arrive. What is pending is the start of a
			// packet that never came whole: mochi never sees it, so it
			// never allocates what its header claimed.
			c.pend = nil
			return 0, c.err
		}
		if len(c.pend) == 0 {
			n, err := c.Conn.Read(p)
			if n == 0 {
				if err != nil {
					return 0, err
				}
				continue
			}
			before := c.f.packets
			rel, ferr := c.f.advance(p[:n], c.g)
			if ferr != nil {
				return 0, c.tooLarge(ferr)
			}
			if c.f.packets-before > 1 {
				c.startBatch()
			}
			if rel == n {
				return n, err
			}
			// The tail begins a packet that must arrive whole first.
			c.pend = append(c.spare[:0], p[rel:n]...)
			c.spare = nil
			c.err = err
			if rel > 0 {
				return rel, nil
			}
			continue
		}
		// pend holds the start of a packet that must arrive whole: read
		// more, growing pend with what arrives rather than what is claimed.
		want := c.f.want(c.pend)
		c.pend = slices.Grow(c.pend, min(max(len(c.pend), 512), want))
		c.held.Store(int64(len(c.pend)))
		n, err := c.Conn.Read(c.pend[len(c.pend):cap(c.pend)])
		c.pend = c.pend[:len(c.pend)+n]
		if err != nil {
			c.err = err
		}
	}
}

// consume drops n handed-out bytes from the front of pend.
func (c *gatedConn) consume(n int) {
	c.held.Store(0)
	c.rel -= n
	if len(c.pend) == n {
		// Keep a small buffer for next time; let a big one go.
		if cap(c.pend) <= 4096 {
			c.spare = c.pend[:0]
		}
		c.pend = nil
		return
	}
	c.pend = c.pend[n:]
}

// tooLarge ends a connection that sent a packet over max_packet_size: an
// MQTT 5 client is told why, by mochi.
func (c *gatedConn) tooLarge(err error) error {
	c.pend, c.rel, c.err = nil, 0, err
	cl := c.client.Load()
	if !errors.Is(err, errPacketTooLarge) {
		return err // malformed: mochi's own error handling applies
	}
	c.g.metrics.refuse(refusedPacketTooLarge)
	c.g.warn.do(func() {
		ev := c.g.log.Warn().Err(err).Str("remote", addrString(c.RemoteAddr()))
		if cl != nil {
			ev = ev.Str("client", cl.ID).Str("username", string(cl.Properties.Username))
		}
		ev.Msg("disconnected a client that sent a packet over broker.max_packet_size")
	})
	if cl != nil && c.version == 5 && c.g.disconnect != nil {
		c.g.disconnect(cl, packets.ErrPacketTooLarge)
	}
	return err
}

// framer follows MQTT's framing over the bytes a client sends, to decide
// how far they may be handed to mochi. Bytes it does not release are passed
// to it again, longer, on the next call: only the body of a packet already
// released is state.
type framer struct {
	body    int // bytes of the current packet's body still to pass
	packets int // packets handed on so far
	// acks, when set, is told of each PUBACK, PUBREC and PUBCOMP, which
	// are then released whole (see gatedConn.acked).
	acks func(typ byte, body []byte)
}

var errPacketTooLarge = errors.New("packet larger than broker.max_packet_size")

// advance scans b, the bytes not released yet, and returns how many of them
// may be released: whole packets, and the header and body so far of a
// packet no bigger than the hold size. It stops at a fixed header that is
// not complete yet, and before a bigger packet until all of it is in b.
func (f *framer) advance(b []byte, g *gate) (int, error) {
	i := 0
	for i < len(b) {
		if f.body > 0 {
			n := min(f.body, len(b)-i)
			f.body -= n
			i += n
			continue
		}
		remaining, size, done, err := decodeLength(b[i:])
		if err != nil {
			return i, err
		}
		if !done {
			return i, nil // the header continues in the next read
		}
		if g.maxPacket > 0 && size+remaining > g.maxPacket {
			return i, fmt.Errorf("%w: a packet of %d bytes, the limit is %d", errPacketTooLarge, size+remaining, g.maxPacket)
		}
		if typ := b[i] >> 4; f.acks != nil && (typ == packets.Puback || typ == packets.Pubrec || typ == packets.Pubcomp) {
			if len(b)-i < size+remaining {
				return i, nil // an ack is read whole
			}
			f.acks(typ, b[i+size:i+size+remaining])
			i += size + remaining
			f.packets++
			continue
		}
		if remaining <= g.hold {
			i += size
			f.body = remaining
			f.packets++
			continue
		}
		if len(b)-i < size+remaining {
			return i, nil // hold it until all of it has arrived
		}
		i += size + remaining
		f.packets++
	}
	return i, nil
}

// want is how many more bytes the unreleased b needs before the framer can
// release any of it.
func (f *framer) want(b []byte) int {
	remaining, size, done, _ := decodeLength(b)
	if !done {
		return 1
	}
	return max(size+remaining-len(b), 1)
}
