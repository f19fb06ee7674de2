package conformance

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// MQTT protocol versions, as CONNECT carries them.
const (
	v311 byte = 4
	v5   byte = 5
)

// waitTimeout bounds every wait for something that should arrive. A
// passing check never waits for it; a known deviation that stalls costs it
// once. Generous, because the suite runs on busy 2-core machines.
const waitTimeout = 15 * time.Second

// maxIncoming bounds the packets the client reads, so that a broken server
// cannot make it allocate from a length it merely claims.
const maxIncoming = 1 << 20

// Message is a PUBLISH the client received.
type Message struct {
	Topic    string // resolved through the connection's topic aliases
	RawTopic string // as sent: empty when the server used an alias alone
	Payload  []byte
	QoS      byte
	Retain   bool
	Dup      bool
	PacketID uint16
	Props    packets.Properties
}

// Options configure Dial. Credentials come from the target unless Anonymous.
type Options struct {
	Version   byte   // v311 (default) or v5
	ClientID  string // "" sends an empty client id
	Clean     bool   // CleanSession (3.1.1) or CleanStart (5)
	KeepAlive uint16 // seconds; 0 means none
	Anonymous bool   // connect without username and password
	// User overrides the target's publisher account (e.g. the limited one).
	User, Password string
	Props          packets.Properties // CONNECT properties (MQTT 5)
	Will           *Will
	// ManualAcks leaves received QoS 1 and 2 PUBLISHes unacknowledged
	// until the test calls Ack.
	ManualAcks bool
	// NoPubrel leaves the server's PUBRECs for this client's QoS 2
	// publishes unanswered, so that they stay unfinished.
	NoPubrel bool
	// ProtocolName overrides "MQTT", to send a malformed CONNECT.
	ProtocolName string
}

// Will is a CONNECT's last will.
type Will struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
	Props   packets.Properties // will properties (MQTT 5)
}

// Client is a minimal MQTT 3.1.1 and 5 client over one TCP connection, on
// mochi's packet codec, with exact control over what it sends: properties,
// packet ids, aliases, sizes, and when (or whether) it acknowledges. A
// reader goroutine records everything the server sends; the test reads it
// through the methods, which wait with a deadline.
type Client struct {
	t        *T
	conn     net.Conn
	version  byte
	manual   bool
	noPubrel bool
	wmu      sync.Mutex

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced whenever the state below changes
	msgs       []Message
	acks       map[uint16]packets.Packet // PUBACK, PUBREC (failed), PUBCOMP, SUBACK, UNSUBACK by packet id
	recs       map[uint16]packets.Packet // PUBREC for our QoS 2 publishes
	disconnect *packets.Packet           // the server's DISCONNECT, if any
	pingresps  int
	closed     error // why the connection ended; nil while open
	aliases    map[uint16]string
	pid        uint16
	unexpected []string // packets a server must not send, as text
}

func versionName(v byte) string {
	if v == v5 {
		return "5"
	}
	return "3.1.1"
}

// dial connects to tg and waits for the CONNACK. A refusal (reason code
// >= 0x80 in MQTT 5, non-zero in 3.1.1) is an error, with the CONNACK.
func dial(t *T, tg *target, o Options) (*Client, packets.Packet, error) {
	if o.Version == 0 {
		o.Version = v311
	}
	conn, err := net.DialTimeout("tcp", tg.addr, waitTimeout)
	if err != nil {
		return nil, packets.Packet{}, err
	}
	c := &Client{t: t, conn: conn, version: o.Version, manual: o.ManualAcks, noPubrel: o.NoPubrel, changed: make(chan struct{}),
		acks: map[uint16]packets.Packet{}, recs: map[uint16]packets.Packet{}, aliases: map[uint16]string{},
		// Far from the small ids servers give their deliveries, so that
		// only the check meant for it (packet-ids-per-direction) reuses one.
		pid: firstPacketID - 1}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: o.Version, Properties: o.Props}
	pk.Connect.ProtocolName = []byte("MQTT")
	if o.ProtocolName != "" {
		pk.Connect.ProtocolName = []byte(o.ProtocolName)
	}
	pk.Connect.ClientIdentifier = o.ClientID
	pk.Connect.Clean = o.Clean
	pk.Connect.Keepalive = o.KeepAlive
	user, pass := tg.user, tg.pass
	if o.User != "" {
		user, pass = o.User, o.Password
	}
	if !o.Anonymous {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(user)
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(pass)
	}
	if w := o.Will; w != nil {
		pk.Connect.WillFlag, pk.Connect.WillTopic, pk.Connect.WillPayload = true, w.Topic, w.Payload
		pk.Connect.WillQos, pk.Connect.WillRetain, pk.Connect.WillProperties = w.QoS, w.Retain, w.Props
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		conn.Close()
		return nil, packets.Packet{}, err
	}
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := conn.Write(buf.Bytes()); err != nil {
		conn.Close()
		return nil, packets.Packet{}, err
	}
	br := bufio.NewReader(conn)
	connack, err := testkit.ReadPacket(br, o.Version, maxIncoming)
	if err != nil {
		conn.Close()
		return nil, packets.Packet{}, fmt.Errorf("reading CONNACK: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	if connack.FixedHeader.Type != packets.Connack {
		conn.Close()
		return nil, connack, fmt.Errorf("expected CONNACK, got packet type %d", connack.FixedHeader.Type)
	}
	if (o.Version == v5 && connack.ReasonCode >= 0x80) || (o.Version != v5 && connack.ReasonCode != 0) {
		conn.Close()
		return nil, connack, fmt.Errorf("CONNACK refused the connection: reason code 0x%02x", connack.ReasonCode)
	}
	go c.readLoop(br)
	t.Cleanup(c.Kill)
	return c, connack, nil
}

func (c *Client) readLoop(br *bufio.Reader) {
	for {
		pk, err := testkit.ReadPacket(br, c.version, maxIncoming)
		if err != nil {
			c.update(func() {
				if c.closed == nil {
					c.closed = err
				}
			})
			c.conn.Close()
			return
		}
		c.handle(pk)
	}
}

// handle records one packet from the server and answers what the protocol
// makes the client answer.
func (c *Client) handle(pk packets.Packet) {
	switch pk.FixedHeader.Type {
	case packets.Publish:
		m := Message{RawTopic: pk.TopicName, Topic: pk.TopicName, Payload: pk.Payload, QoS: pk.FixedHeader.Qos,
			Retain: pk.FixedHeader.Retain, Dup: pk.FixedHeader.Dup, PacketID: pk.PacketID, Props: pk.Properties}
		c.update(func() {
			if a := pk.Properties.TopicAlias; a > 0 {
				if pk.TopicName != "" {
					c.aliases[a] = pk.TopicName
				} else {
					m.Topic = c.aliases[a]
				}
			}
			c.msgs = append(c.msgs, m)
		})
		if !c.manual {
			c.Ack(m)
		}
	case packets.Pubrel:
		c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubcomp}, PacketID: pk.PacketID})
	case packets.Pubrec:
		if pk.ReasonCode < 0x80 {
			c.update(func() { c.recs[pk.PacketID] = pk })
			if c.noPubrel {
				return
			}
			c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: pk.PacketID})
			return
		}
		c.update(func() { c.acks[pk.PacketID] = pk })
	case packets.Puback, packets.Pubcomp, packets.Suback, packets.Unsuback:
		c.update(func() { c.acks[pk.PacketID] = pk })
	case packets.Pingresp:
		c.update(func() { c.pingresps++ })
	case packets.Disconnect:
		c.update(func() {
			c.disconnect = &pk
			if c.version != v5 {
				c.unexpected = append(c.unexpected, "a DISCONNECT packet (3.1.1 defines it only from client to server)")
			}
		})
	}
}

// update changes the recorded state under the lock and wakes the waiters.
func (c *Client) update(f func()) {
	c.mu.Lock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// waitUntil waits until cond (called under the lock) holds, failing the
// check after waitTimeout with what describes the wait.
func (c *Client) waitUntil(what string, cond func() bool) {
	c.t.Helper()
	if !c.waitUntilErr(waitTimeout, cond) {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed != nil {
			c.t.Fatalf("%s: the connection ended (%v%s)", what, closed, c.disconnectText())
		}
		c.t.Fatalf("%s: nothing after %s", what, waitTimeout)
	}
}

// waitUntilErr is waitUntil returning false at the deadline, or as soon
// as the connection has ended without cond holding.
func (c *Client) waitUntilErr(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok, ch, closed := cond(), c.changed, c.closed != nil
		c.mu.Unlock()
		if ok {
			return true
		}
		if closed {
			return false
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// firstPacketID is the first packet id a client uses.
const firstPacketID = 10000

// UsePacketID makes p the packet id of the client's next SUBSCRIBE,
// UNSUBSCRIBE or QoS 1/2 PUBLISH.
func (c *Client) UsePacketID(p uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pid = p - 1
}

func (c *Client) nextPID() uint16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pid++
	if c.pid == 0 {
		c.pid = 1
	}
	return c.pid
}

// send encodes and writes one packet; a write error is recorded as the
// end of the connection (the server may have closed it on purpose).
func (c *Client) send(pk packets.Packet) {
	pk.ProtocolVersion = c.version
	pk.Mods.AllowResponseInfo = true // else mochi's encoder drops Response Topic and Correlation Data
	b, err := testkit.EncodePacket(pk)
	if err != nil {
		c.t.Fatalf("encoding packet type %d: %v", pk.FixedHeader.Type, err)
	}
	c.sendRaw(b)
}

// sendRaw writes bytes as they are, for packets the codec will not make.
func (c *Client) sendRaw(b []byte) {
	c.wmu.Lock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(waitTimeout))
	_, err := c.conn.Write(b)
	c.wmu.Unlock()
	if err != nil {
		c.update(func() {
			if c.closed == nil {
				c.closed = err
			}
		})
	}
}

// Ack acknowledges a received PUBLISH: PUBACK for QoS 1, PUBREC for QoS 2
// (the reader answers the PUBREL with PUBCOMP).
func (c *Client) Ack(m Message) {
	switch m.QoS {
	case 1:
		c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: m.PacketID})
	case 2:
		c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrec}, PacketID: m.PacketID})
	}
}

// Sub is one filter of a SUBSCRIBE.
type Sub struct {
	Filter            string
	QoS               byte
	NoLocal           bool
	RetainAsPublished bool
	RetainHandling    byte
}

// Subscribe subscribes and returns the SUBACK's reason codes; a refusal is
// not a failure here (see MustSubscribe).
func (c *Client) Subscribe(subID int, subs ...Sub) []byte {
	c.t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: c.nextPID()}
	for _, s := range subs {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: s.Filter, Qos: s.QoS, NoLocal: s.NoLocal,
			RetainAsPublished: s.RetainAsPublished, RetainHandling: s.RetainHandling})
	}
	if subID > 0 {
		pk.Properties.SubscriptionIdentifier = []int{subID}
	}
	ack := c.request(pk, "SUBACK")
	if len(ack.ReasonCodes) != len(subs) {
		c.t.Fatalf("SUBACK has %d reason codes for %d filters", len(ack.ReasonCodes), len(subs))
	}
	return ack.ReasonCodes
}

// MustSubscribe subscribes and fails the check unless every filter is granted.
func (c *Client) MustSubscribe(subs ...Sub) {
	c.t.Helper()
	c.MustSubscribeID(0, subs...)
}

// MustSubscribeID is MustSubscribe with a subscription identifier (0: none).
func (c *Client) MustSubscribeID(subID int, subs ...Sub) {
	c.t.Helper()
	for i, code := range c.Subscribe(subID, subs...) {
		if code >= 0x80 {
			c.t.Fatalf("subscribing to %q: refused with 0x%02x", subs[i].Filter, code)
		}
	}
}

// Unsubscribe unsubscribes and waits for the UNSUBACK.
func (c *Client) Unsubscribe(filters ...string) {
	c.t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Unsubscribe, Qos: 1}, PacketID: c.nextPID()}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
	}
	c.request(pk, "UNSUBACK")
}

// request sends a packet with a fresh packet id and waits for its ack.
func (c *Client) request(pk packets.Packet, what string) packets.Packet {
	c.t.Helper()
	c.send(pk)
	var ack packets.Packet
	c.waitUntil(fmt.Sprintf("%s for packet id %d", what, pk.PacketID), func() bool {
		var ok bool
		ack, ok = c.acks[pk.PacketID]
		return ok
	})
	return ack
}

// Pub is one PUBLISH to send.
type Pub struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
	Props   packets.Properties
}

// PubResult is the server's answer to a QoS 1 or 2 publish: the PUBACK,
// or the PUBREC (and, when it was positive, the PUBCOMP).
type PubResult struct {
	Ack  packets.Packet // PUBACK, or PUBREC
	Comp packets.Packet // PUBCOMP, QoS 2 only
}

// Publish sends a PUBLISH and, at QoS 1 and 2, waits for the whole
// exchange. A server that ends the connection instead fails the check.
func (c *Client) Publish(p Pub) PubResult {
	c.t.Helper()
	pid := c.PublishAsync(p)
	return c.WaitPublished(pid, p.QoS)
}

// PublishAsync sends a PUBLISH without waiting and returns its packet id
// (0 at QoS 0).
func (c *Client) PublishAsync(p Pub) uint16 {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: p.QoS, Retain: p.Retain},
		TopicName: p.Topic, Payload: p.Payload, Properties: p.Props}
	if p.QoS > 0 {
		pk.PacketID = c.nextPID()
	}
	if p.Props.TopicAlias > 0 {
		pk.Properties.TopicAliasFlag = true
	}
	c.send(pk)
	return pk.PacketID
}

// WaitPublished waits for the acks of a QoS 1 or 2 publish.
func (c *Client) WaitPublished(pid uint16, qos byte) PubResult {
	c.t.Helper()
	var r PubResult
	switch qos {
	case 1:
		c.waitUntil(fmt.Sprintf("PUBACK for packet id %d", pid), func() bool {
			var ok bool
			r.Ack, ok = c.acks[pid]
			return ok
		})
	case 2:
		c.waitUntil(fmt.Sprintf("PUBREC and PUBCOMP for packet id %d", pid), func() bool {
			if ack, ok := c.acks[pid]; ok && ack.FixedHeader.Type == packets.Pubrec {
				r.Ack = ack // a failed PUBREC ends the exchange
				return true
			}
			rec, ok1 := c.recs[pid]
			comp, ok2 := c.acks[pid]
			r.Ack, r.Comp = rec, comp
			return ok1 && ok2
		})
	}
	return r
}

// disconnectText describes the server's DISCONNECT, if it sent one.
func (c *Client) disconnectText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disconnect == nil {
		return ", no DISCONNECT"
	}
	return fmt.Sprintf(", after a DISCONNECT with reason 0x%02x", c.disconnect.ReasonCode)
}

// Answer waits for the server's answer to a publish: its final ack (PUBACK;
// at QoS 2 a failed PUBREC, or the PUBCOMP), at QoS 0 the PINGRESP to a
// PINGREQ sent after it; or the end of the connection, with the server's
// DISCONNECT if any. It describes what came, e.g. "PUBACK 0x87".
func (c *Client) Answer(pid uint16, qos byte) (ack packets.Packet, what string) {
	c.t.Helper()
	var n int
	if qos == 0 {
		c.mu.Lock()
		n = c.pingresps
		c.mu.Unlock()
		c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}})
	}
	c.waitUntil("an answer to the publish", func() bool {
		if c.closed != nil {
			return true
		}
		if qos == 0 {
			return c.pingresps > n
		}
		var ok bool
		ack, ok = c.acks[pid]
		return ok
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case qos == 0 && c.pingresps > n:
		return ack, "no answer, the connection kept"
	case ack.FixedHeader.Type != 0:
		return ack, fmt.Sprintf("%s 0x%02x", packetName(ack.FixedHeader.Type), ack.ReasonCode)
	case c.disconnect != nil:
		return ack, fmt.Sprintf("DISCONNECT 0x%02x", c.disconnect.ReasonCode)
	}
	return ack, "the connection closed without DISCONNECT"
}

// Messages returns what has arrived so far.
func (c *Client) Messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.msgs...)
}

// WaitMessages waits until at least n messages have arrived and returns
// them all.
func (c *Client) WaitMessages(n int) []Message {
	c.t.Helper()
	c.waitUntil(fmt.Sprintf("%d messages", n), func() bool { return len(c.msgs) >= n })
	return c.Messages()
}

// WaitPayload waits for a message with this payload and returns every
// message that arrived before it, and it.
func (c *Client) WaitPayload(payload string) (before []Message, m Message) {
	c.t.Helper()
	idx := -1
	c.waitUntil(fmt.Sprintf("a message %q", payload), func() bool {
		for i := range c.msgs {
			if string(c.msgs[i].Payload) == payload {
				idx = i
				return true
			}
		}
		return false
	})
	all := c.Messages()
	return all[:idx], all[idx]
}

// Ping sends a PINGREQ and waits for the PINGRESP: the server has handled
// everything this client sent before.
func (c *Client) Ping() {
	c.t.Helper()
	c.mu.Lock()
	n := c.pingresps
	c.mu.Unlock()
	c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}})
	c.waitUntil("PINGRESP", func() bool { return c.pingresps > n })
}

// PingOrClosed sends a PINGREQ and waits for the PINGRESP or for the
// server to end the connection, and says which (for refusals a server may
// answer either way).
func (c *Client) PingOrClosed() (closed bool) {
	c.t.Helper()
	c.mu.Lock()
	n := c.pingresps
	c.mu.Unlock()
	c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}})
	c.waitUntil("PINGRESP or the end of the connection", func() bool { return c.pingresps > n || c.closed != nil })
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pingresps == n
}

// Disconnect sends DISCONNECT (with properties for MQTT 5), waits until
// the server has closed the connection, as servers do on DISCONNECT (so
// it has seen the client go before the check goes on), and closes.
func (c *Client) Disconnect(props packets.Properties) {
	c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, Properties: props})
	c.waitUntilErr(waitTimeout, func() bool { return c.closed != nil })
	c.Kill()
}

// Kill closes the connection without DISCONNECT, as a crash would.
func (c *Client) Kill() {
	c.conn.Close()
	c.update(func() {
		if c.closed == nil {
			c.closed = net.ErrClosed
		}
	})
}

// WaitClosed waits until the server has ended the connection, and returns
// its DISCONNECT packet if it sent one.
func (c *Client) WaitClosed() *packets.Packet {
	c.t.Helper()
	c.waitUntil("the server to end the connection", func() bool { return c.closed != nil })
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.disconnect
}

// Closed reports whether the connection has ended, and the DISCONNECT the
// server sent, if any.
func (c *Client) Closed() (bool, *packets.Packet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed != nil && !errors.Is(c.closed, net.ErrClosed), c.disconnect
}

// Unexpected lists packets the server sent that the protocol forbids it to.
func (c *Client) Unexpected() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.unexpected...)
}
