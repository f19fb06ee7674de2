package broker

import (
	"io"
	"log/slog"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/credentials"
)

// BenchmarkPublishHooks is what our hooks cost mochi per QoS 1 publish of
// an MQTT 3.1.1 client inside its ACL: the hook events mochi dispatches
// for the publish and its PUBACK, through mochi's own Hooks, with the
// hooks broker.New registers. It leaves out mochi's own work (decoding,
// routing, writing): bench/broker measures the whole.
func BenchmarkPublishHooks(b *testing.B) {
	cfg := DefaultConfig()
	m := newMetrics()
	auth := newAuthHook(zerolog.Nop(), m, newAccessPolicy(false, []credentials.User{{Username: "bench", PasswordHash: hash(b, "x"), Publish: []string{"bench/#"}}}), cfg)
	hooks := &mqtt.Hooks{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, h := range []mqtt.Hook{auth, &flowHook{metrics: m}, &protocolHook{}, newDropHook(zerolog.Nop(), m)} {
		if err := hooks.Add(h, nil); err != nil {
			b.Fatal(err)
		}
	}
	server := mqtt.New(&mqtt.Options{Logger: hooks.Log})
	auth.server = server
	cl := server.NewClient(nil, "t", "publisher", false)
	cl.Properties.Username = []byte("bench")
	cl.Properties.ProtocolVersion = 4
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "bench/3", PacketID: 7, Payload: make([]byte, 100)}
	ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: 7, ReasonCode: packets.CodeGrantedQos1.Code}
	b.ReportAllocs()
	for b.Loop() {
		read, err := hooks.OnPacketRead(cl, pk)
		if err != nil || read.Ignore || !hooks.OnACLCheck(cl, read.TopicName, true) {
			b.Fatal("publish refused")
		}
		if _, err := hooks.OnPublish(cl, read); err != nil {
			b.Fatal(err)
		}
		hooks.OnQosPublish(cl, ack, 0, 0)
		_ = hooks.OnPacketEncode(cl, ack)
		hooks.OnPacketSent(cl, ack, nil)
		hooks.OnQosComplete(cl, ack)
		hooks.OnPublished(cl, read)
		hooks.OnPacketProcessed(cl, read, nil)
	}
}
