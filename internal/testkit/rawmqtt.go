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

// Dial5 connects to addr (host:port) as an MQTT 5 client with a clean
// start, and fails the test unless the CONNACK says success: a bare client
// for what paho.mqtt.golang (MQTT 3.1.1 only) cannot show, the reason codes
// and reason strings of acks.
func Dial5(t testing.TB, addr, username, password string) *Raw {
	t.Helper()
	c := DialRaw(t, addr)
	ack := c.Connect(5, ConnectOptions{
		ClientID: fmt.Sprintf("test5-%d", clientSeq.Add(1)), Username: username, Password: password, Clean: true,
	})
	if ack.ReasonCode != 0 {
		t.Fatalf("MQTT 5 CONNECT answered with 0x%02X", ack.ReasonCode)
	}
	return c
}

// ConnectOptions are the CONNECT fields tests vary.
type ConnectOptions struct {
	ClientID, Username, Password string
	Clean                        bool
	// Will, when its TopicName is set, is the client's last will; its
	// Properties give the MQTT 5 will's user properties and delay.
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
		pk.Connect.WillProperties.User = w.Properties.User
		pk.Connect.WillProperties.WillDelayInterval = w.Properties.WillDelayInterval
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
	_ = c.Conn.SetWriteDeadline(time.Now().Add(Timeout))
	_, err = c.Conn.Write(b)
	return err
}

// Publish sends a PUBLISH with packet id id (0 for QoS 0).
func (c *Raw) Publish(topic string, qos byte, id uint16, payload []byte) {
	c.t.Helper()
	c.Send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos},
		TopicName:   topic,
		PacketID:    id,
		Payload:     payload,
	})
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
	return ReadPacket(c.r, c.Version, 0)
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

// ReadPacket reads one packet a server sends, in protocol version, and
// decodes it with mochi's own decoders. A packet longer than limit bytes (0:
// no limit) is refused before its body is read.
func ReadPacket(r *bufio.Reader, version byte, limit int) (packets.Packet, error) {
	var pk packets.Packet
	b, err := r.ReadByte()
	if err != nil {
		return pk, err
	}
	if err := pk.FixedHeader.Decode(b); err != nil {
		return pk, fmt.Errorf("fixed header 0x%02x: %w", b, err)
	}
	n, _, err := packets.DecodeLength(r)
	if err != nil {
		return pk, err
	}
	if limit > 0 && n > limit {
		return pk, fmt.Errorf("a packet of %d bytes exceeds the client's limit", n)
	}
	pk.FixedHeader.Remaining = n
	pk.ProtocolVersion = version
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return pk, err
	}
	decode, ok := serverPackets[pk.FixedHeader.Type]
	if !ok {
		return pk, fmt.Errorf("a server does not send packet type %d", pk.FixedHeader.Type)
	}
	err = decode(&pk, body)
	if pk.FixedHeader.Type == packets.Disconnect && version == 5 && n >= 1 {
		// mochi's decoder reads the reason code only when properties
		// follow it; a DISCONNECT may end with its reason code.
		pk.ReasonCode = body[0]
	}
	return pk, err
}

// serverPackets are mochi's decoders of the packets a server sends.
var serverPackets = map[byte]func(*packets.Packet, []byte) error{
	packets.Connack:    (*packets.Packet).ConnackDecode,
	packets.Publish:    (*packets.Packet).PublishDecode,
	packets.Puback:     (*packets.Packet).PubackDecode,
	packets.Pubrec:     (*packets.Packet).PubrecDecode,
	packets.Pubrel:     (*packets.Packet).PubrelDecode,
	packets.Pubcomp:    (*packets.Packet).PubcompDecode,
	packets.Suback:     (*packets.Packet).SubackDecode,
	packets.Unsuback:   (*packets.Packet).UnsubackDecode,
	packets.Pingresp:   (*packets.Packet).PingrespDecode,
	packets.Disconnect: (*packets.Packet).DisconnectDecode,
}

// EncodePacket encodes one packet a client sends, in pk.ProtocolVersion, with
// mochi's own encoders.
func EncodePacket(pk packets.Packet) ([]byte, error) {
	encode, ok := clientPackets[pk.FixedHeader.Type]
	if !ok {
		return nil, fmt.Errorf("a client does not send packet type %d", pk.FixedHeader.Type)
	}
	var buf bytes.Buffer
	err := encode(&pk, &buf)
	return buf.Bytes(), err
}

// clientPackets are mochi's encoders of the packets a client sends.
var clientPackets = map[byte]func(*packets.Packet, *bytes.Buffer) error{
	packets.Connect:     (*packets.Packet).ConnectEncode,
	packets.Publish:     (*packets.Packet).PublishEncode,
	packets.Puback:      (*packets.Packet).PubackEncode,
	packets.Pubrec:      (*packets.Packet).PubrecEncode,
	packets.Pubrel:      (*packets.Packet).PubrelEncode,
	packets.Pubcomp:     (*packets.Packet).PubcompEncode,
	packets.Subscribe:   (*packets.Packet).SubscribeEncode,
	packets.Unsubscribe: (*packets.Packet).UnsubscribeEncode,
	packets.Pingreq:     (*packets.Packet).PingreqEncode,
	packets.Disconnect:  (*packets.Packet).DisconnectEncode,
}
