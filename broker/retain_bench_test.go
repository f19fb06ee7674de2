package broker

import (
	"bufio"
	"fmt"
	"net"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// BenchmarkRetainedPublish is the broker's side of a fleet's statuses
// arriving: one MQTT 3.1.1 publisher over TCP, QoS 1 retained messages of
// 467 bytes on distinct topics with 100 in flight, into the store on disk
// (each PUBACK waits for its sync), and in memory. bench/retained measures
// the bridge against mosquitto; this is for profiles (-cpuprofile).
func BenchmarkRetainedPublish(b *testing.B) {
	b.Run("disk", func(b *testing.B) { benchmarkRetainedPublish(b, b.TempDir()) })
	b.Run("memory", func(b *testing.B) { benchmarkRetainedPublish(b, "") })
}

func benchmarkRetainedPublish(b *testing.B, path string) {
	cfg := testConfig()
	cfg.Persistence.Path = path
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(b, "pw"), Publish: []string{"#"}}}
	br, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close(b.Context()) })
	c := testkit.DialRaw(b, br.Addr("mqtt"))
	c.Connect(4, testkit.ConnectOptions{ClientID: "bench", Username: "pub", Password: "pw", Clean: true})

	const window = 100
	payload := make([]byte, 467)
	acks := make(chan struct{}, window)
	go func() {
		r := bufio.NewReader(c.Conn)
		for {
			if _, err := testkit.ReadPacket(r, 4, 1<<20); err != nil {
				return
			}
			acks <- struct{}{}
		}
	}()
	w := bufio.NewWriter(c.Conn)
	send := func(i int) {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true},
			TopicName: fmt.Sprintf("chef/org/node%06d/status", i%100000), PacketID: uint16(i%60000 + 1), Payload: payload, ProtocolVersion: 4}
		raw, err := testkit.EncodePacket(pk)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = w.Write(raw)
	}
	b.ReportAllocs()
	b.ResetTimer()
	inflight := 0
	for i := 0; i < b.N; i++ {
		if inflight == window {
			_ = w.Flush()
			<-acks
			inflight--
		}
		send(i)
		inflight++
	}
	_ = w.Flush()
	for ; inflight > 0; inflight-- {
		<-acks
	}
	b.StopTimer()
	_ = net.ErrClosed
}
