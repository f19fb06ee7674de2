package app

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// metric reads one unlabelled sample from the bridge's /metrics.
func metric(t *testing.T, b *Bridge, name string) float64 {
	t.Helper()
	_, body := testkit.Get(t, "http://"+b.HTTPAddr()+"/metrics")
	s := bufio.NewScanner(strings.NewReader(body))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// TestRoutedPublishesKeepMochisSemantics: with a required route, an MQTT 5
// publish is acked only once stored, and is otherwise what it is without
// routes: No Local holds, the PUBACK is bare (no echoed user properties, a
// PUBACK reason code), a retained message is kept, $SYS counts each message
// once, and a message expiry removes a retained message (it did not when
// routed messages were re-published by the bridge's own client).
func TestRoutedPublishesKeepMochisSemantics(t *testing.T) {
	srv := testnats.Start(t)
	b := startBridge(t, routedConfig(t, srv.URL()))
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	addr := b.Broker().Addr("mqtt")
	other := testkit.DialRaw(t, addr)
	other.Connect(5, testkit.ConnectOptions{Clean: true})
	other.Subscribe(1, "nl/#", 1)

	c := testkit.DialRaw(t, addr)
	c.Connect(5, testkit.ConnectOptions{ClientID: "self", Username: "pub", Password: "pw", Clean: true})
	c.SubscribeTo(1, packets.Subscription{Filter: "nl/#", Qos: 1, NoLocal: true})
	received := metric(t, b, "firehose_broker_messages_received_total")
	const n = 10
	for i := 1; i <= n; i++ {
		c.Send(packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: i == n}, PacketID: uint16(i),
			TopicName: "nl/x", Payload: []byte(strconv.Itoa(i)),
			Properties: packets.Properties{User: []packets.UserProperty{{Key: "trace", Val: "abc"}}},
		})
		ack := c.Next()
		if ack.FixedHeader.Type != packets.Puback || ack.PacketID != uint16(i) || ack.FixedHeader.Remaining != 2 {
			t.Fatalf("message %d: got %+v, want a bare PUBACK", i, ack)
		}
		if got := streamMsgs(t, srv.URL()); got != uint64(i) {
			t.Fatalf("after %d PUBACKs the stream holds %d messages", i, got)
		}
		if m := other.Next(); string(m.Payload) != strconv.Itoa(i) {
			t.Fatalf("the other subscriber got %q, want %d", m.Payload, i)
		}
	}
	if got := metric(t, b, "firehose_broker_messages_received_total") - received; got != n {
		t.Errorf("$SYS counted %v messages received for %d", got, n)
	}
	// No Local: the publisher's first message is the barrier published after its own.
	if err := b.Publisher().Publish(context.Background(), bus.Message{Topic: "nl/barrier", Payload: []byte("barrier")}); err != nil {
		t.Fatal(err)
	}
	if m := c.Next(); m.TopicName != "nl/barrier" {
		t.Fatalf("the publisher got its own message %q on %s despite No Local", m.Payload, m.TopicName)
	}
	late := testkit.DialRaw(t, addr)
	late.Connect(5, testkit.ConnectOptions{Clean: true})
	late.Subscribe(1, "nl/x", 1)
	if m := late.Next(); string(m.Payload) != strconv.Itoa(n) || !m.FixedHeader.Retain {
		t.Fatalf("a late subscriber got %+v, want the retained message %d", m, n)
	}

	// A retained message with an expiry goes once it expires.
	c.Send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true}, PacketID: 99,
		TopicName: "expiring/x", Payload: []byte("soon gone"),
		Properties: packets.Properties{MessageExpiryInterval: 1},
	})
	if ack := c.Next(); ack.FixedHeader.Type != packets.Puback {
		t.Fatalf("packet type %d, want PUBACK", ack.FixedHeader.Type)
	}
	try := 0
	testkit.Eventually(t, func() bool {
		try++
		sub := testkit.DialRaw(t, addr)
		defer sub.Conn.Close()
		sub.Connect(5, testkit.ConnectOptions{Clean: true})
		sub.Subscribe(1, "expiring/#", 1)
		topic := fmt.Sprintf("expiring/barrier-%d", try)
		if err := b.Publisher().Publish(context.Background(), bus.Message{Topic: topic, Payload: []byte("b")}); err != nil {
			t.Fatal(err)
		}
		return sub.Next().TopicName == topic // no retained message before the barrier: it expired
	}, "the retained message with a 1 s expiry to expire")
}

// TestUnroutablePublishesAreRefused: when a publish cannot be made safe
// (the outbox is full), an MQTT 5 client gets PUBACK 0x97, and an MQTT
// 3.1.1 client, which has no negative ack and no DISCONNECT from a server,
// gets its connection closed with nothing sent, so that it resends. Both
// for a publish that is all its client sent (routed in OnPublish) and for a
// burst (routed by the pipeline).
func TestUnroutablePublishesAreRefused(t *testing.T) {
	srv := testnats.Start(t)
	cfg := routedConfig(t, srv.URL())
	cfg.Routes[0].OutboxMaxBytes = 1 << 20
	b := startBridge(t, cfg)
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	srv.Stop()
	waitFor(t, "the sink to go down", func() bool { return len(b.router.Ready()) == 1 })
	for err := error(nil); err == nil; {
		err = b.Publisher().Publish(context.Background(), bus.Message{Topic: "fill/up", Payload: make([]byte, 64<<10), QoS: 1})
	}
	for err := error(nil); err == nil; {
		err = b.Publisher().Publish(context.Background(), bus.Message{Topic: "fill/up", QoS: 1})
	}
	publish := func(id uint16) packets.Packet {
		return packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: id, TopicName: "sensors/x", Payload: []byte("unsafe")}
	}
	for _, burst := range []int{1, 3} {
		c := testkit.DialRaw(t, b.Broker().Addr("mqtt"))
		c.Connect(5, testkit.ConnectOptions{Username: "pub", Password: "pw", Clean: true})
		var all bytes.Buffer
		for i := 1; i <= burst; i++ {
			pk := publish(uint16(i))
			pk.ProtocolVersion = 5
			if err := pk.PublishEncode(&all); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Conn.Write(all.Bytes()); err != nil { // in one write: the later ones wait to be read
			t.Fatal(err)
		}
		for i := 1; i <= burst; i++ {
			if ack := c.Next(); ack.FixedHeader.Type != packets.Puback || ack.ReasonCode != packets.ErrQuotaExceeded.Code {
				t.Fatalf("MQTT 5, a burst of %d: got type %d reason %#x, want PUBACK 0x97", burst, ack.FixedHeader.Type, ack.ReasonCode)
			}
		}

		c3 := testkit.DialRaw(t, b.Broker().Addr("mqtt"))
		c3.Connect(4, testkit.ConnectOptions{Username: "pub", Password: "pw", Clean: true})
		all.Reset()
		for i := 1; i <= burst; i++ {
			pk := publish(uint16(i))
			pk.ProtocolVersion = 4
			if err := pk.PublishEncode(&all); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c3.Conn.Write(all.Bytes()); err != nil {
			t.Fatal(err)
		}
		if got := c3.WaitClosed(); len(got) != 0 {
			t.Fatalf("MQTT 3.1.1, a burst of %d: got %+v before the connection closed, want nothing", burst, got)
		}
	}
}
