package mqttload

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// MQTT control packet types (upper nibble of the fixed header).
const (
	pktConnect    = 1
	pktConnack    = 2
	pktPublish    = 3
	pktPuback     = 4
	pktSubscribe  = 8
	pktSuback     = 9
	pktPingreq    = 12
	pktPingresp   = 13
	pktDisconnect = 14
)

// kinds of outgoing messages handled by the writer goroutine.
const (
	outPublish = iota
	outMessage // a PUBLISH of its own topic and payload, sent as they are
	outSubscribe
	outPing
	outDisconnect
	outSync
)

// outMsg is one queued outgoing packet. It is a small value type so that the
// hot path (publish, puback) does not allocate.
type outMsg struct {
	kind    uint8
	qos     uint8
	retain  bool // outMessage only
	pid     uint16
	seq     uint64
	topic   string        // SUBSCRIBE and outMessage
	payload []byte        // outMessage only
	done    chan struct{} // outSync only: closed after the writer has flushed
}

// Options configure a connection.
type Options struct {
	Addr      string
	ClientID  string
	Username  string
	Password  string
	KeepAlive time.Duration // 0 means 60s
	QueueLen  int           // outgoing queue length; 0 means 1024
	Timeout   time.Duration // dial + CONNACK timeout; 0 means 5s
}

// Client is one MQTT 3.1.1 connection. Dial connects; set the callbacks
// and the publish template, then Start the reader and writer goroutines.
type Client struct {
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex // guards bw: the writer goroutine and the reader's PUBACKs
	bw   *bufio.Writer
	out  chan outMsg

	keepAlive time.Duration

	// publish template, owned by the writer goroutine after start;
	// pubRandom is the state of the random bytes that fill the template's
	// tail for each message (0: the tail stays as it is).
	pubTopic   string
	pubPayload []byte
	pubRandom  uint64
	pubSpans   [][2]int // where the random bytes go, as hex; nil: the whole tail, as bytes

	// OnPublish is called for each PUBLISH received, on the reader
	// goroutine, with now the UnixNano of its processing; topic and payload
	// are only valid during the call. Set before Start.
	OnPublish func(topic, payload []byte, qos byte, now int64)
	// OnPuback is called for each PUBACK received, on the reader goroutine.
	// Set before Start.
	OnPuback func(pid uint16)
	// OnPingresp is called for each PINGRESP received, on the reader
	// goroutine. Set before Start.
	OnPingresp func()

	subMu   sync.Mutex
	subWait map[uint16]chan []byte // SUBACK waiters by packet id
	subPID  uint16

	written atomic.Int64 // PUBLISH packets encoded into the write buffer

	dead       chan struct{} // closed when the connection failed or was closed
	deadOnce   sync.Once
	errMu      sync.Mutex
	err        error
	readerDone chan struct{}
	writerDone chan struct{}
	closing    atomic.Bool
}

// ErrClosed is the error of a connection closed by Close.
var ErrClosed = errors.New("mqtt: connection closed")

// Dial connects, sends CONNECT (clean session) and waits for a successful
// CONNACK; a refusal is a *RefusedError. The reader and writer goroutines
// are not running yet; call Start.
func Dial(o Options) (*Client, error) {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 60 * time.Second
	}
	if o.QueueLen == 0 {
		o.QueueLen = 1024
	}
	conn, err := net.DialTimeout("tcp", o.Addr, o.Timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // we batch ourselves
	}
	c := newClient(conn, o)
	_ = conn.SetDeadline(time.Now().Add(o.Timeout))
	c.bw.Write(encodeConnect(o.ClientID, o.Username, o.Password, uint16(o.KeepAlive/time.Second)))
	if err := c.bw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	p, big, err := c.readPacket()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("mqtt: reading CONNACK: %w", err)
	}
	if p.typ != pktConnack || len(p.body) != 2 {
		conn.Close()
		return nil, fmt.Errorf("mqtt: expected CONNACK, got packet type %d", p.typ)
	}
	if rc := p.body[1]; rc != 0 {
		conn.Close()
		return nil, &RefusedError{Code: rc}
	}
	if !big {
		c.br.Discard(len(p.body))
	}
	_ = conn.SetDeadline(time.Time{})
	return c, nil
}

// newClient wraps a connection; o has its defaults applied.
func newClient(conn net.Conn, o Options) *Client {
	return &Client{
		conn:       conn,
		br:         bufio.NewReaderSize(conn, 64<<10),
		bw:         bufio.NewWriterSize(conn, 64<<10),
		out:        make(chan outMsg, o.QueueLen),
		keepAlive:  o.KeepAlive,
		subWait:    make(map[uint16]chan []byte),
		dead:       make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
}

// RefusedError is a CONNACK with a non-zero return code.
type RefusedError struct{ Code byte }

func (e *RefusedError) Error() string { return "mqtt: connection refused: " + connackReason(e.Code) }

// AuthFailure reports whether the broker refused the credentials.
func (e *RefusedError) AuthFailure() bool { return e.Code == 4 || e.Code == 5 }

func connackReason(rc byte) string {
	switch rc {
	case 1:
		return "unacceptable protocol version"
	case 2:
		return "identifier rejected"
	case 3:
		return "server unavailable"
	case 4:
		return "bad user name or password"
	case 5:
		return "not authorized"
	}
	return fmt.Sprintf("return code %d", rc)
}

func encodeConnect(clientID, user, pass string, keepAlive uint16) []byte {
	var vh []byte
	vh = appendString(vh, "MQTT")
	vh = append(vh, 4) // protocol level 3.1.1
	flags := byte(0x02)
	if user != "" {
		flags |= 0x80
		if pass != "" {
			flags |= 0x40
		}
	}
	vh = append(vh, flags, byte(keepAlive>>8), byte(keepAlive))
	vh = appendString(vh, clientID)
	if user != "" {
		vh = appendString(vh, user)
		if pass != "" {
			vh = appendString(vh, pass)
		}
	}
	b := []byte{pktConnect << 4}
	b = appendVarint(b, len(vh))
	return append(b, vh...)
}

func appendString(b []byte, s string) []byte {
	b = append(b, byte(len(s)>>8), byte(len(s)))
	return append(b, s...)
}

func appendVarint(b []byte, n int) []byte {
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

// maxPacket bounds the packets the client reads (the benchmarks publish at
// most 1 MiB), so a corrupt length cannot make it allocate 256 MiB.
const maxPacket = 16 << 20

// readPacket reads one packet. When big is false, p.body aliases the
// bufio.Reader's buffer and is only valid until the caller does
// br.Discard(len(p.body)); when big is true the body was copied and already
// consumed.
type rawPacket struct {
	typ, flags byte
	body       []byte
}

func (c *Client) readPacket() (p rawPacket, big bool, err error) {
	h, err := c.br.ReadByte()
	if err != nil {
		return p, false, err
	}
	n, mul := 0, 1
	for i := 0; ; i++ {
		d, err := c.br.ReadByte()
		if err != nil {
			return p, false, err
		}
		n += int(d&0x7f) * mul
		if d&0x80 == 0 {
			break
		}
		if i == 3 {
			return p, false, errors.New("mqtt: malformed remaining length")
		}
		mul *= 128
	}
	p.typ, p.flags = h>>4, h&0x0f
	if n > maxPacket {
		return p, false, fmt.Errorf("mqtt: a packet of %d bytes exceeds the client's limit of %d", n, maxPacket)
	}
	if n <= c.br.Size() {
		p.body, err = c.br.Peek(n)
		return p, false, err
	}
	p.body = make([]byte, n)
	_, err = io.ReadFull(c.br, p.body)
	return p, true, err
}

// Start launches the reader and writer goroutines.
func (c *Client) Start() {
	go c.readLoop()
	go c.writeLoop()
}

func (c *Client) fail(err error) {
	c.deadOnce.Do(func() {
		c.errMu.Lock()
		if c.closing.Load() {
			err = ErrClosed
		}
		c.err = err
		c.errMu.Unlock()
		close(c.dead)
		c.conn.Close()
	})
}

// Written is the number of PUBLISH packets encoded into the write buffer so
// far; at QoS 0 it counts as published (FlushSync puts them on the wire).
func (c *Client) Written() int64 { return c.written.Load() }

// Dead is closed when the connection failed or was closed.
func (c *Client) Dead() <-chan struct{} { return c.dead }

// Err returns why the connection died (ErrClosed after Close), or nil.
func (c *Client) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

func (c *Client) readLoop() {
	defer close(c.readerDone)
	acks := make([]byte, 0, 4096+4)
	for {
		p, big, err := c.readPacket()
		if err != nil {
			c.fail(fmt.Errorf("mqtt: read: %w", err))
			return
		}
		switch p.typ {
		case pktPublish:
			qos := (p.flags >> 1) & 3
			body := p.body
			if len(body) < 2 {
				c.fail(errors.New("mqtt: short PUBLISH"))
				return
			}
			tl := int(binary.BigEndian.Uint16(body))
			if len(body) < 2+tl {
				c.fail(errors.New("mqtt: short PUBLISH topic"))
				return
			}
			topic := body[2 : 2+tl]
			rest := body[2+tl:]
			if qos > 0 {
				if len(rest) < 2 {
					c.fail(errors.New("mqtt: short PUBLISH packet id"))
					return
				}
				pid := binary.BigEndian.Uint16(rest)
				rest = rest[2:]
				if qos == 1 {
					acks = append(acks, pktPuback<<4, 2, byte(pid>>8), byte(pid))
				}
			}
			if c.OnPublish != nil {
				c.OnPublish(topic, rest, qos, time.Now().UnixNano())
			}
		case pktPuback:
			if len(p.body) >= 2 && c.OnPuback != nil {
				c.OnPuback(binary.BigEndian.Uint16(p.body))
			}
		case pktSuback:
			if len(p.body) >= 2 {
				pid := binary.BigEndian.Uint16(p.body)
				codes := append([]byte(nil), p.body[2:]...)
				c.subMu.Lock()
				ch := c.subWait[pid]
				delete(c.subWait, pid)
				c.subMu.Unlock()
				if ch != nil {
					ch <- codes
				}
			}
		case pktPingresp:
			if c.OnPingresp != nil {
				c.OnPingresp()
			}
		default:
			c.fail(fmt.Errorf("mqtt: unexpected packet type %d", p.typ))
			return
		}
		if !big {
			c.br.Discard(len(p.body))
		}
		// PUBACKs go out as soon as everything already received has been
		// processed (i.e. before the next read could block), batched into
		// one write.
		if len(acks) > 0 && (len(acks) >= 4096 || c.inputDrained()) {
			if err := c.writeRaw(acks); err != nil {
				c.fail(fmt.Errorf("mqtt: write: %w", err))
				return
			}
			acks = acks[:0]
		}
	}
}

// inputDrained reports whether the read buffer holds no complete packet, so
// the next readPacket would block on the socket.
func (c *Client) inputDrained() bool {
	n := c.br.Buffered()
	if n == 0 {
		return true
	}
	b, _ := c.br.Peek(min(n, 5))
	rl, mul := 0, 1
	for i := 1; i < len(b); i++ {
		rl += int(b[i]&0x7f) * mul
		if b[i]&0x80 == 0 {
			return 1+i+rl > n
		}
		mul *= 128
	}
	return true
}

// writeRaw writes complete packets and flushes, from the reader goroutine.
func (c *Client) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.bw.Write(b)
	return c.bw.Flush()
}

// enqueue queues a packet for the writer; false when the connection is dead.
func (c *Client) enqueue(m outMsg) bool {
	select {
	case c.out <- m:
		return true
	case <-c.dead:
		return false
	}
}

func (c *Client) writeLoop() {
	defer close(c.writerDone)
	ping := time.NewTicker(c.keepAlive / 2)
	defer ping.Stop()
	var m outMsg
	for {
		select {
		case m = <-c.out:
		case <-ping.C:
			m = outMsg{kind: outPing}
		case <-c.dead:
			return
		}
		// Encode everything queued, then flush once the queue is empty.
		c.wmu.Lock()
		for {
			if err := c.encode(m); err != nil {
				c.wmu.Unlock()
				c.fail(fmt.Errorf("mqtt: write: %w", err))
				return
			}
			if m.kind == outSync || m.kind == outDisconnect {
				break
			}
			select {
			case m = <-c.out:
				continue
			default:
			}
			break
		}
		err := c.bw.Flush()
		c.wmu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("mqtt: write: %w", err))
			return
		}
		switch m.kind {
		case outSync:
			close(m.done)
		case outDisconnect:
			c.fail(ErrClosed)
			return
		}
	}
}

func (c *Client) encode(m outMsg) error {
	w := c.bw
	switch m.kind {
	case outPublish:
		p := c.pubPayload
		binary.LittleEndian.PutUint64(p[0:], uint64(time.Now().UnixNano()))
		binary.LittleEndian.PutUint64(p[8:], m.seq)
		if c.pubRandom != 0 {
			c.fillRandom(p)
		}
		return c.encodePublish(c.pubTopic, p, m.qos, false, m.pid)
	case outMessage:
		return c.encodePublish(m.topic, m.payload, m.qos, m.retain, m.pid)
	case outSubscribe:
		var b []byte
		b = append(b, pktSubscribe<<4|0x02)
		b = appendVarint(b, 2+2+len(m.topic)+1)
		b = append(b, byte(m.pid>>8), byte(m.pid))
		b = appendString(b, m.topic)
		b = append(b, m.qos)
		_, err := w.Write(b)
		return err
	case outPing:
		_, err := w.Write([]byte{pktPingreq << 4, 0})
		return err
	case outDisconnect:
		_, err := w.Write([]byte{pktDisconnect << 4, 0})
		return err
	case outSync:
		return nil
	}
	return fmt.Errorf("mqtt: unknown outgoing kind %d", m.kind)
}

// encodePublish writes one PUBLISH into the write buffer and counts it.
func (c *Client) encodePublish(topic string, payload []byte, qos byte, retain bool, pid uint16) error {
	w := c.bw
	rl := 2 + len(topic) + len(payload)
	h := byte(pktPublish << 4)
	if qos > 0 {
		rl += 2
		h |= qos << 1
	}
	if retain {
		h |= 1
	}
	var hdr [5]byte
	hb := append(hdr[:0], h)
	hb = appendVarint(hb, rl)
	w.Write(hb)
	w.WriteByte(byte(len(topic) >> 8))
	w.WriteByte(byte(len(topic)))
	w.WriteString(topic)
	if qos > 0 {
		w.WriteByte(byte(pid >> 8))
		w.WriteByte(byte(pid))
	}
	_, err := w.Write(payload)
	c.written.Add(1)
	return err
}

// SetPublishTemplate prepares the topic and payload that Publish sends;
// the writer patches the payload in place (see NewPayload), so it must be
// at least MinPayload bytes. Call it before Start.
func (c *Client) SetPublishTemplate(topic string, payload []byte) {
	c.pubTopic = topic
	c.pubPayload = payload
}

// SetPublishRandom makes Publish fill part of the template with new
// pseudo-random bytes for each message, seeded by seed: with no spans, all
// its bytes after the header (MinPayload), so that payloads do not
// compress; with spans ([start, end) offsets in the template, at or past
// MinPayload), those bytes, as hex digits, as the ids and times that vary from one JSON
// message to the next. Call it before Start.
func (c *Client) SetPublishRandom(seed uint64, spans ...[2]int) {
	c.pubRandom, c.pubSpans = seed|1, spans
}

// fillRandom fills p's random parts with xorshift64 bytes: cheap next to a
// publish.
func (c *Client) fillRandom(p []byte) {
	x := c.pubRandom
	next := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	if c.pubSpans == nil {
		b := p[MinPayload:]
		for ; len(b) >= 8; b = b[8:] {
			binary.LittleEndian.PutUint64(b, next())
		}
		for i := range b {
			b[i] = byte(next())
		}
	}
	for _, sp := range c.pubSpans {
		for i := sp[0]; i < sp[1]; i++ {
			p[i] = "0123456789abcdef"[next()&15]
		}
	}
	c.pubRandom = x
}

// Publish queues one PUBLISH of the template with the given sequence
// number and packet id (ignored at QoS 0). It blocks while the outgoing
// queue is full, and returns false once the connection is dead.
func (c *Client) Publish(qos byte, pid uint16, seq uint64) bool {
	return c.enqueue(outMsg{kind: outPublish, qos: qos, pid: pid, seq: seq})
}

// PublishMessage queues one PUBLISH of topic and payload as they are (not
// the template, and not patched), with the retain flag when retain is set,
// and the packet id pid (ignored at QoS 0). payload must not change until the
// message is written (FlushSync). It blocks while the outgoing queue is
// full, and returns false once the connection is dead.
func (c *Client) PublishMessage(topic string, payload []byte, qos byte, retain bool, pid uint16) bool {
	return c.enqueue(outMsg{kind: outMessage, qos: qos, retain: retain, pid: pid, topic: topic, payload: payload})
}

// Ping queues a PINGREQ. A broker handles a connection's packets in order,
// so its PINGRESP (see OnPingresp) says that it has processed everything
// this client sent before: a fence for QoS 0 publishing, which has no acks.
// It returns false once the connection is dead.
func (c *Client) Ping() bool { return c.enqueue(outMsg{kind: outPing}) }

// FlushSync blocks until everything queued so far has been written to the
// socket, the connection died, or the timeout passed.
func (c *Client) FlushSync(timeout time.Duration) bool {
	done := make(chan struct{})
	if !c.enqueue(outMsg{kind: outSync, done: done}) {
		return false
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-c.dead:
		return false
	case <-t.C:
		return false
	}
}

// Subscribe subscribes to one filter and waits for the SUBACK; it returns
// the granted QoS.
func (c *Client) Subscribe(filter string, qos byte, timeout time.Duration) (byte, error) {
	ch := make(chan []byte, 1)
	c.subMu.Lock()
	c.subPID++
	if c.subPID == 0 {
		c.subPID = 1
	}
	pid := c.subPID
	c.subWait[pid] = ch
	c.subMu.Unlock()
	if !c.enqueue(outMsg{kind: outSubscribe, pid: pid, qos: qos, topic: filter}) {
		return 0, c.deadErr()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case codes := <-ch:
		if len(codes) != 1 {
			return 0, fmt.Errorf("mqtt: SUBACK with %d return codes", len(codes))
		}
		if codes[0] == 0x80 {
			return 0, fmt.Errorf("mqtt: subscription to %q refused", filter)
		}
		return codes[0], nil
	case <-c.dead:
		return 0, c.deadErr()
	case <-t.C:
		return 0, fmt.Errorf("mqtt: no SUBACK for %q within %v", filter, timeout)
	}
}

func (c *Client) deadErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Close sends DISCONNECT (best effort, bounded in time), closes the socket
// and waits for both goroutines to finish.
func (c *Client) Close() {
	c.closing.Store(true)
	t := time.NewTimer(time.Second)
	select {
	case c.out <- outMsg{kind: outDisconnect}:
		select {
		case <-c.writerDone:
		case <-t.C:
		}
	case <-c.dead:
	case <-t.C:
	}
	t.Stop()
	c.fail(ErrClosed)
	<-c.readerDone
	<-c.writerDone
}
