package app

import (
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// TestTooLargeInAPipelinedBurst: a client that sends before it is
// answered has its publishes routed in batches by the router's pipeline
// and released in order; one too large for the required route, in the
// middle of a burst, is answered in its place (MQTT 5: PUBACK 0x97; MQTT
// 3.1.1: a positive PUBACK, the message dropped) and delivered nowhere,
// while the others of its batch are acked and stored. Whether the burst
// goes through the pipeline or each publish alone (a publish that is all
// its client sent is routed in OnPublish) depends on how the bytes
// arrive; the answers must be the same either way.
func TestTooLargeInAPipelinedBurst(t *testing.T) {
	srv := testnats.Start(t)
	cfg := routedConfig(t, srv.URL())
	cfg.Broker.MaxPacketSize = 4 << 20
	b := startBridge(t, cfg)
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	const before, big = 20, 21 // ids 1..20 small, 21 too large, 22 small

	c5 := testkit.Dial5(t, b.Broker().Addr("mqtt"), "pub", "pw")
	for id := uint16(1); id <= big+1; id++ {
		payload := []byte("small")
		if id == big {
			payload = make([]byte, 1500_000)
		}
		c5.Publish("sensors/burst5", 1, id, payload)
	}
	for id := uint16(1); id <= big+1; id++ {
		ack := c5.Next()
		want := byte(0)
		if id == big {
			want = 0x97
		}
		if ack.FixedHeader.Type != packets.Puback || ack.PacketID != id || ack.ReasonCode != want {
			t.Fatalf("MQTT 5 burst: %s id %d 0x%02X, want PUBACK id %d 0x%02X", packets.PacketNames[ack.FixedHeader.Type], ack.PacketID, ack.ReasonCode, id, want)
		}
	}

	c3 := testkit.DialRaw(t, b.Broker().Addr("mqtt"))
	c3.Connect(4, testkit.ConnectOptions{Clean: true, Username: "pub", Password: "pw"})
	for id := uint16(1); id <= big+1; id++ {
		payload := []byte("small")
		if id == big {
			payload = make([]byte, 1500_000)
		}
		c3.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "sensors/burst3", PacketID: id, Payload: payload})
	}
	for id := uint16(1); id <= big+1; id++ {
		if ack := c3.Next(); ack.FixedHeader.Type != packets.Puback || ack.PacketID != id {
			t.Fatalf("MQTT 3.1.1 burst: %s id %d, want PUBACK id %d", packets.PacketNames[ack.FixedHeader.Type], ack.PacketID, id)
		}
	}
	if n := streamMsgs(t, srv.URL()); n != 2*(before+1) {
		t.Fatalf("the stream holds %d messages, want the %d small ones", n, 2*(before+1))
	}
}
