package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// bigTask is the task-ok fixture with a stdout of n bytes, which the
// published payload keeps.
func bigTask(t *testing.T, n int) []byte {
	t.Helper()
	raw, err := os.ReadFile("../adapters/ansible/testdata/task-ok/input.json")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(raw, []byte(`"stdout":"changed"`), []byte(`"stdout":"`+strings.Repeat("x", n)+`"`), 1)
}

// TestTooLargeForARequiredRouteIsRefusedBeforeTheAnswer: with a required
// route to JetStream, whose server takes messages of up to 1 MiB (nats-server's
// default max_payload), a larger message is refused before its sender is
// answered, and nothing of it, nor of its batch, is delivered anywhere:
// HTTP gets a 413 naming the route and the limit, an MQTT 5 publisher a
// PUBACK (or PUBREC) 0x97 whose reason string names them, and an MQTT 3.1.1
// publisher, which has no negative ack, a PUBACK; the message is counted as
// too_large. Before, the answer was a 200 or a PUBACK, and the route
// dropped the message.
func TestTooLargeForARequiredRouteIsRefusedBeforeTheAnswer(t *testing.T) {
	srv := testnats.Start(t)
	cfg := routedConfig(t, srv.URL())
	cfg.Broker.MaxPacketSize = 4 << 20 // the broker takes the 1.5 MB publishes; the route cannot
	b := startBridge(t, cfg)
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	all := sub.Subscribe("#", 1)
	barrier := func(name string) {
		t.Helper()
		if err := b.Broker().Publish(context.Background(), bus.Message{Topic: "barrier/" + name, Payload: []byte("b")}); err != nil {
			t.Fatal(err)
		}
		if m := testkit.Next(t, all); m.Topic != "barrier/"+name {
			t.Fatalf("before barrier %s, %s arrived (%d bytes)", name, m.Topic, len(m.Payload))
		}
	}

	// HTTP: a batch of a small event and one of 1.1 MiB is refused whole.
	small := bigTask(t, 10)
	big := bigTask(t, 1100<<10)
	for _, body := range [][]byte{big, append(append(append([]byte("["), small...), ','), append(big, ']')...)} {
		resp, err := http.Post("http://"+b.HTTPAddr()+"/ansible/v1/events", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		_ = json.Unmarshal(answer, &e)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(e.Error, "required route all: 1048576 bytes (the NATS server's max_payload)") {
			t.Fatalf("%d %s", resp.StatusCode, answer)
		}
		t.Logf("HTTP: %d %s", resp.StatusCode, e.Error)
	}
	barrier("http")
	if n := streamMsgs(t, srv.URL()); n != 0 {
		t.Fatalf("the stream holds %d messages of refused requests", n)
	}

	// MQTT 5, QoS 1 and 2: refused with 0x97 and a reason string.
	c5 := testkit.Dial5(t, b.Broker().Addr("mqtt"), "pub", "pw")
	c5.Publish("sensors/v5", 1, 1, make([]byte, 1500_000))
	ack := c5.Next()
	if ack.FixedHeader.Type != packets.Puback || ack.ReasonCode != 0x97 || !strings.Contains(ack.Properties.ReasonString, "over route all's limit of 1048576 bytes") {
		t.Fatalf("QoS 1: %s 0x%02X %q", packets.PacketNames[ack.FixedHeader.Type], ack.ReasonCode, ack.Properties.ReasonString)
	}
	t.Logf("MQTT 5 PUBACK: 0x%02X %q", ack.ReasonCode, ack.Properties.ReasonString)
	c5.Publish("sensors/v5q2", 2, 2, make([]byte, 1500_000))
	if rec := c5.Next(); rec.FixedHeader.Type != packets.Pubrec || rec.ReasonCode != 0x97 || !strings.Contains(rec.Properties.ReasonString, "route all") {
		t.Fatalf("QoS 2: %s 0x%02X %q", packets.PacketNames[rec.FixedHeader.Type], rec.ReasonCode, rec.Properties.ReasonString)
	}
	c5.Publish("sensors/v5", 1, 3, []byte("small"))
	if ack := c5.Next(); ack.FixedHeader.Type != packets.Puback || ack.ReasonCode != 0 {
		t.Fatalf("a small message after: 0x%02X %q", ack.ReasonCode, ack.Properties.ReasonString)
	}
	if m := testkit.Next(t, all); m.Topic != "sensors/v5" || m.Payload != "small" {
		t.Fatalf("got %s (%d bytes), want the small message", m.Topic, len(m.Payload))
	}

	// MQTT 3.1.1: acknowledged (a disconnect would make the client send it
	// again forever), delivered nowhere; the connection stays.
	lost := testkit.NewSignal()
	c3 := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{Username: "pub", Password: "pw", OnLost: lost.Fire})
	if tok := c3.Client.Publish("sensors/v3", 1, false, make([]byte, 1500_000)); !tok.WaitTimeout(testkit.Timeout) || tok.Error() != nil {
		t.Fatalf("MQTT 3.1.1: no PUBACK (%v)", tok.Error())
	}
	if err := c3.Publish("sensors/v3", 1, false, "small"); err != nil {
		t.Fatalf("MQTT 3.1.1, a small message after: %v", err)
	}
	if m := testkit.Next(t, all); m.Topic != "sensors/v3" || m.Payload != "small" {
		t.Fatalf("got %s (%d bytes), want the small message", m.Topic, len(m.Payload))
	}
	barrier("mqtt")
	if n := streamMsgs(t, srv.URL()); n != 2 {
		t.Fatalf("the stream holds %d messages, want the 2 small ones", n)
	}
	if got := metricValue(t, b, "firehose_route_messages_total", "result", "too_large"); got != 5 {
		t.Errorf("too_large counted %v, want 5: two HTTP requests, three MQTT publishes", got)
	}
}

// TestStartUpWarnsOfMaxBodyOverARoutesLimit: once a NATS sink has read its
// server's max_payload, the bridge logs each intake whose max_body is over
// it, for a required route its topics reach.
func TestStartUpWarnsOfMaxBodyOverARoutesLimit(t *testing.T) {
	srv := testnats.Start(t, func(o *server.Options) { o.MaxPayload = 512 << 10 })
	cfg := routedConfig(t, srv.URL())
	cfg.Routes[0].Filters = []string{"ansible/#"}
	var logs testkit.SyncBuffer
	b, err := New(t.Context(), cfg, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	want := `"key":"ansible.max_body","sink":"js","message":"8MiB is over the 512KiB limit of required route all (sink js: the NATS server's max_payload)`
	testkit.Eventually(t, func() bool { return strings.Contains(logs.String(), want) }, "the warning about ansible.max_body")
	if strings.Contains(logs.String(), `"key":"chef.max_body"`) {
		t.Errorf("a warning about chef, whose topics the route does not take:\n%s", logs.String())
	}
}
