package testkit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// Conn5 is a bare MQTT 5 client over TCP, for what paho.mqtt.golang (MQTT
// 3.1.1 only) cannot show: the reason codes and reason strings of acks. It
// sends packets one at a time and reads the answers in order; packets are
// encoded and decoded by mochi's packets package.
type Conn5 struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

// Dial5 connects to addr (host:port) as an MQTT 5 client with a clean
// start, and fails the test unless the CONNACK says success. It closes the
// connection when the test ends.
func Dial5(t testing.TB, addr, username, password string) *Conn5 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, Timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &Conn5{t: t, conn: conn, r: bufio.NewReader(conn)}
	connect := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 5,
		Connect: packets.ConnectParams{
			ProtocolName:     []byte("MQTT"),
			Clean:            true,
			Keepalive:        60,
			ClientIdentifier: fmt.Sprintf("test5-%d", clientSeq.Add(1)),
			UsernameFlag:     username != "",
			Username:         []byte(username),
			PasswordFlag:     password != "",
			Password:         []byte(password),
		},
	}
	c.write(connect.ConnectEncode)
	if ack := c.Next(); ack.FixedHeader.Type != packets.Connack || ack.ReasonCode != 0 {
		t.Fatalf("MQTT 5 CONNECT answered %s with 0x%02X", packets.PacketNames[ack.FixedHeader.Type], ack.ReasonCode)
	}
	return c
}

// Publish sends a PUBLISH with packet id id (QoS 1 or 2).
func (c *Conn5) Publish(topic string, qos byte, id uint16, payload []byte) {
	c.t.Helper()
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: qos},
		ProtocolVersion: 5,
		TopicName:       topic,
		PacketID:        id,
		Payload:         payload,
	}
	c.write(pk.PublishEncode)
}

// Pubrel sends the PUBREL of a QoS 2 exchange.
func (c *Conn5) Pubrel(id uint16) {
	c.t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, ProtocolVersion: 5, PacketID: id}
	c.write(pk.PubrelEncode)
}

func (c *Conn5) write(encode func(*bytes.Buffer) error) {
	c.t.Helper()
	var buf bytes.Buffer
	if err := encode(&buf); err != nil {
		c.t.Fatal(err)
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(Timeout))
	if _, err := c.conn.Write(buf.Bytes()); err != nil {
		c.t.Fatal(err)
	}
}

// Next reads the next packet the broker sends: a CONNACK, PUBACK, PUBREC or
// PUBCOMP (with its reason code and properties), or a DISCONNECT.
func (c *Conn5) Next() packets.Packet {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(Timeout))
	first, err := c.r.ReadByte()
	if err != nil {
		c.t.Fatalf("reading a packet: %v", err)
	}
	pk := packets.Packet{ProtocolVersion: 5}
	if err := pk.FixedHeader.Decode(first); err != nil {
		c.t.Fatal(err)
	}
	n, _, err := packets.DecodeLength(c.r)
	if err != nil {
		c.t.Fatal(err)
	}
	pk.FixedHeader.Remaining = n
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		c.t.Fatal(err)
	}
	switch pk.FixedHeader.Type {
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Puback:
		err = pk.PubackDecode(body)
	case packets.Pubrec:
		err = pk.PubrecDecode(body)
	case packets.Pubcomp:
		err = pk.PubcompDecode(body)
	case packets.Disconnect:
		err = pk.DisconnectDecode(body)
	default:
		c.t.Fatalf("Conn5 reads no %s", packets.PacketNames[pk.FixedHeader.Type])
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return pk
}
