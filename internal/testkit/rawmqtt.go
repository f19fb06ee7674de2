package testkit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// Raw is an MQTT client over a real socket that writes and reads single
// packets, encoded and decoded by mochi's packets package, for tests that
// need exact packets (MQTT 5 properties, topic aliases, reason codes) or a
// client that misbehaves on purpose. Unlike Client, it does nothing by
// itself: no acks, no pings.
type Raw struct {
	t       testing.TB
	Conn    net.Conn
	r       *bufio.Reader
	Version byte // protocol version used to encode and decode; set by Connect
}

// DialRaw opens a TCP connection to addr (host:port), closed when the test ends.
func DialRaw(t testing.TB, addr string) *Raw {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, Timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Raw{t: t, Conn: c, r: bufio.NewReader(c), Version: 4}
}

// ConnectOptions are the CONNECT fields tests vary.
type ConnectOptions struct {
	ClientID, Username, Password string
	Clean                        bool
	// Will, when its TopicName is set, is the client's last will.
	Will *packets.Packet
	// Properties are the CONNECT's MQTT 5 properties.
	Properties packets.Properties
}

// Connect sends a CONNECT for the protocol version and returns the CONNACK.
func (c *Raw) Connect(version byte, o ConnectOptions) packets.Packet {
	c.t.Helper()
	c.Version = version
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Connect},
		Connect: packets.ConnectParams{
			ProtocolName:     []byte("MQTT"),
			ClientIdentifier: o.ClientID,
			Clean:            o.Clean,
			Keepalive:        60,
		},
		Properties: o.Properties,
	}
	if o.Username != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(o.Username)
	}
	if o.Password != "" {
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(o.Password)
	}
	if w := o.Will; w != nil {
		pk.Connect.WillFlag = true
		pk.Connect.WillTopic, pk.Connect.WillPayload = w.TopicName, w.Payload
		pk.Connect.WillQos, pk.Connect.WillRetain = w.FixedHeader.Qos, w.FixedHeader.Retain
	}
	c.Send(pk)
	ack := c.Next()
	if ack.FixedHeader.Type != packets.Connack {
		c.t.Fatalf("expected CONNACK, got packet type %d", ack.FixedHeader.Type)
	}
	return ack
}

// Send encodes and writes one packet.
func (c *Raw) Send(pk packets.Packet) {
	c.t.Helper()
	if err := c.TrySend(pk); err != nil {
		c.t.Fatal(err)
	}
}

// TrySend is Send that returns the error, for a connection the broker may have closed.
func (c *Raw) TrySend(pk packets.Packet) error {
	pk.ProtocolVersion = c.Version
	b, err := EncodePacket(pk)
	if err != nil {
		return err
	}
	_, err = c.Conn.Write(b)
	return err
}

// Next reads the next packet, failing the test if none arrives within Timeout.
func (c *Raw) Next() packets.Packet {
	c.t.Helper()
	pk, err := c.NextErr()
	if err != nil {
		c.t.Fatalf("reading a packet: %v", err)
	}
	return pk
}

// NextErr reads the next packet within Timeout; io.EOF means the broker closed the connection.
func (c *Raw) NextErr() (packets.Packet, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(Timeout))
	var pk packets.Packet
	b, err := c.r.ReadByte()
	if err != nil {
		return pk, err
	}
	if err := pk.FixedHeader.Decode(b); err != nil {
		return pk, err
	}
	n, _, err := packets.DecodeLength(c.r)
	if err != nil {
		return pk, err
	}
	pk.FixedHeader.Remaining = n
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return pk, err
	}
	pk.ProtocolVersion = c.Version
	switch pk.FixedHeader.Type {
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Publish:
		err = pk.PublishDecode(body)
	case packets.Puback:
		err = pk.PubackDecode(body)
	case packets.Pubrec:
		err = pk.PubrecDecode(body)
	case packets.Pubrel:
		err = pk.PubrelDecode(body)
	case packets.Pubcomp:
		err = pk.PubcompDecode(body)
	case packets.Suback:
		err = pk.SubackDecode(body)
	case packets.Unsuback:
		err = pk.UnsubackDecode(body)
	case packets.Disconnect:
		err = pk.DisconnectDecode(body)
	case packets.Pingresp:
	default:
		err = fmt.Errorf("raw client cannot decode packet type %d", pk.FixedHeader.Type)
	}
	return pk, err
}

// Subscribe subscribes to filter at qos and fails the test unless it is granted.
func (c *Raw) Subscribe(id uint16, filter string, qos byte) {
	c.t.Helper()
	c.SubscribeTo(id, packets.Subscription{Filter: filter, Qos: qos})
}

// SubscribeTo makes one subscription, with MQTT 5's options (No Local,
// Retain As Published, Retain Handling), and fails the test unless it is granted.
func (c *Raw) SubscribeTo(id uint16, sub packets.Subscription) {
	c.t.Helper()
	c.Send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1},
		PacketID:    id,
		Filters:     packets.Subscriptions{sub},
	})
	ack := c.Next()
	if ack.FixedHeader.Type != packets.Suback || len(ack.ReasonCodes) != 1 || ack.ReasonCodes[0] >= 0x80 {
		c.t.Fatalf("subscribe %s: got packet type %d, codes %v", sub.Filter, ack.FixedHeader.Type, ack.ReasonCodes)
	}
}

// WaitClosed reads until the broker closes the connection, and returns the
// packets it sent before closing; it fails the test if the connection is
// still open after Timeout.
func (c *Raw) WaitClosed() []packets.Packet {
	c.t.Helper()
	var got []packets.Packet
	for {
		pk, err := c.NextErr()
		if err == nil {
			got = append(got, pk)
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("the broker kept the connection open (got %d packets)", len(got))
		}
		return got
	}
}

// EncodePacket encodes one packet a client sends, in pk.ProtocolVersion, with
// mochi's own encoders.
func EncodePacket(pk packets.Packet) ([]byte, error) {
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case packets.Connect:
		err = pk.ConnectEncode(&buf)
	case packets.Publish:
		err = pk.PublishEncode(&buf)
	case packets.Puback:
		err = pk.PubackEncode(&buf)
	case packets.Pubrec:
		err = pk.PubrecEncode(&buf)
	case packets.Pubrel:
		err = pk.PubrelEncode(&buf)
	case packets.Pubcomp:
		err = pk.PubcompEncode(&buf)
	case packets.Subscribe:
		err = pk.SubscribeEncode(&buf)
	case packets.Unsubscribe:
		err = pk.UnsubscribeEncode(&buf)
	case packets.Pingreq:
		err = pk.PingreqEncode(&buf)
	case packets.Disconnect:
		err = pk.DisconnectEncode(&buf)
	default:
		err = fmt.Errorf("a client does not send packet type %d", pk.FixedHeader.Type)
	}
	return buf.Bytes(), err
}
