package broker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// burst publishes n messages on topic through the inline client.
func burst(t *testing.T, b *Broker, topic string, from, n int, qos byte) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := b.Publish(context.Background(), bus.Message{Topic: topic, Payload: []byte(strconv.Itoa(i)), QoS: qos}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReceiveMaximumNeverStalls: an MQTT 5 subscriber with Receive Maximum
// 20 gets bursts of ten times that at QoS 1 and 2, every message, in
// order, never more than 20 unacknowledged at once, and keeps receiving
// after the bursts (mochi's own flow control stalled it after 40).
func TestReceiveMaximumNeverStalls(t *testing.T) {
	b, _ := start(t, testConfig())
	for _, qos := range []byte{1, 2} {
		t.Run(fmt.Sprintf("QoS %d", qos), func(t *testing.T) {
			c := testkit.DialRaw(t, b.Addr("mqtt"))
			c.Connect(5, testkit.ConnectOptions{Clean: true, Properties: packets.Properties{ReceiveMaximum: 20}})
			topic := fmt.Sprintf("burst/%d", qos)
			c.Subscribe(1, topic, qos)
			next := 0
			for round := range 3 {
				burst(t, b, topic, next, 200, qos)
				for got := 0; got < 200; {
					// Take what the broker sends without acking: it must stop at 20.
					var held []packets.Packet
					for len(held) < 20 && got+len(held) < 200 {
						pk := c.Next()
						if pk.FixedHeader.Type != packets.Publish {
							t.Fatalf("round %d: packet type %d while waiting for a PUBLISH", round, pk.FixedHeader.Type)
						}
						if want := strconv.Itoa(next + got + len(held)); string(pk.Payload) != want {
							t.Fatalf("round %d: got message %q, want %q", round, pk.Payload, want)
						}
						held = append(held, pk)
					}
					// 180 more are queued for it: a broker ignoring its Receive
					// Maximum has them on the wire before the PINGRESP.
					c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}})
					if pk := c.Next(); pk.FixedHeader.Type != packets.Pingresp {
						t.Fatalf("round %d: a 21st message (type %d) came while 20 were unacknowledged", round, pk.FixedHeader.Type)
					}
					ackAll(t, c, held)
					got += len(held)
				}
				next += 200
			}
		})
	}
}

// ackAll acknowledges messages the broker sent: PUBACK each, or for QoS 2
// PUBREC each, read the PUBRELs (no message comes meanwhile: a PUBREC
// frees no place), then PUBCOMP each.
func ackAll(t *testing.T, c *testkit.Raw, pks []packets.Packet) {
	t.Helper()
	for _, pk := range pks {
		typ := packets.Puback
		if pk.FixedHeader.Qos == 2 {
			typ = packets.Pubrec
		}
		c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: typ}, PacketID: pk.PacketID})
	}
	if pks[0].FixedHeader.Qos == 1 {
		return
	}
	for _, pk := range pks {
		if rel := c.Next(); rel.FixedHeader.Type != packets.Pubrel || rel.PacketID != pk.PacketID {
			t.Fatalf("got packet type %d id %d, want PUBREL %d", rel.FixedHeader.Type, rel.PacketID, pk.PacketID)
		}
	}
	for _, pk := range pks {
		c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubcomp}, PacketID: pk.PacketID})
	}
}

// TestMosquittoSubV5GetsEveryMessage is issue 13's report, replayed:
// mosquitto_sub -V 5 -q 1 (Receive Maximum 20) got 40 of 70 messages and
// then nothing more.
func TestMosquittoSubV5GetsEveryMessage(t *testing.T) {
	subBin := testkit.RequireCommand(t, "mosquitto_sub")
	b, _ := start(t, testConfig())
	host, port, _ := net.SplitHostPort(b.Addr("mqtt"))
	sub := exec.Command(subBin, "-V", "5", "-q", "1", "-h", host, "-p", port, "-t", "chef/#", "-C", "400", "-W", "60")
	out := &testkit.SyncBuffer{}
	sub.Stdout = out
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Process.Kill(); _ = sub.Wait() })
	testkit.Eventually(t, func() bool { return atomic.LoadInt64(&b.server.Info.Subscriptions) > 0 }, "mosquitto_sub to subscribe")
	burst(t, b, "chef/acme/web1/run/start", 0, 200, 1)
	burst(t, b, "chef/acme/web1/run/start", 200, 200, 1) // later messages too
	if err := sub.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v; it printed %d lines", err, strings.Count(out.String(), "\n"))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}

func encoded(t *testing.T, pk packets.Packet) []byte {
	t.Helper()
	pk.ProtocolVersion = 5
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case packets.Publish:
		err = pk.PublishEncode(&buf)
	case packets.Pingresp:
		err = pk.PingrespEncode(&buf)
	case packets.Pubrel:
		err = pk.PubrelEncode(&buf)
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestWindow: past the limit, PUBLISH packets wait in order (QoS 0 ones
// behind them too, dropped past maxHeld) while other packets go at once;
// an ack lets waiting ones go until the window is full again.
func TestWindow(t *testing.T) {
	pub := func(qos byte, id uint16) []byte {
		return encoded(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, PacketID: id, TopicName: "t", Payload: []byte{byte(id)}})
	}
	ping := encoded(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingresp}})
	rel := encoded(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: 9})
	var drops int
	w := &window{limit: 2, maxHeld: 1, unacked: map[uint16]struct{}{}, dropped: func([]byte) { drops++ }}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

	if got := w.admit(cat(pub(1, 1), pub(0, 0), pub(1, 2))); !bytes.Equal(got, cat(pub(1, 1), pub(0, 0), pub(1, 2))) {
		t.Fatalf("within the window: %x", got)
	}
	// Full: 3 waits; the QoS 0 behind it waits too (the first), or is dropped (the second); PINGRESP and PUBREL go.
	if got := w.admit(cat(pub(1, 3), ping, pub(0, 0), rel, pub(0, 0), pub(2, 4))); !bytes.Equal(got, cat(ping, rel)) {
		t.Fatalf("past the window: %x", got)
	}
	if drops != 1 {
		t.Fatalf("%d QoS 0 messages dropped, want 1", drops)
	}
	if got := w.acked(7); got != nil {
		t.Fatalf("an ack for a message not in flight let %x go", got)
	}
	if got := w.acked(1); !bytes.Equal(got, cat(pub(1, 3), pub(0, 0))) {
		t.Fatalf("after one ack: %x", got)
	}
	if got := w.acked(2); !bytes.Equal(got, pub(2, 4)) {
		t.Fatalf("after another: %x", got)
	}
	if got := w.admit(pub(0, 0)); !bytes.Equal(got, pub(0, 0)) {
		t.Fatalf("QoS 0 with nothing waiting: %x", got)
	}
}
