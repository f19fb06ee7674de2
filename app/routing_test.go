package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
	"github.com/opsfirehose/firehose/router"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
)

// routedConfig is a bridge with a publisher account and one required route
// of everything to a JetStream stream.
func routedConfig(t *testing.T, natsURL string) config.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	cfg.Broker.Users = []credentials.User{{Username: "pub", PasswordHash: string(hash), Publish: []string{"#"}}}
	sc := *natssink.NewConfig(natssink.TypeNATS)
	sc.Type, sc.URLs, sc.ConfirmTimeout = sinkconfig.TypeJetStream, []string{natsURL}, 2*time.Second
	sc.Stream = &natssink.StreamConfig{}
	sc.Stream.SetDefaults()
	sc.Stream.Name, sc.Stream.Create, sc.Stream.Subjects = "FIREHOSE", true, []string{"firehose.>"}
	cfg.Sinks = map[string]sinkconfig.Config{"js": sinkconfig.NATSConfig(&sc)}
	var rc router.Config
	rc.SetDefaults()
	rc.Name, rc.Sink, rc.Filters = "all", "js", []string{"#"}
	cfg.Routes = []router.Config{rc}
	if err := config.Parse(nil, &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func streamMsgs(t *testing.T, url string) uint64 {
	return uint64(max(streamMsgsOf(t, url, "FIREHOSE"), 0))
}

// streamMsgsOf counts the messages of the named stream on the NATS server
// at url; -1 while there is no such stream.
func streamMsgsOf(t *testing.T, url, stream string) int64 {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), stream)
	if err != nil {
		return -1
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int64(info.State.Msgs)
}

// waitFor waits for a condition another goroutine brings about.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, cond, "%s", what)
}

func TestMQTTPublishIsAckedOnlyOnceRouted(t *testing.T) {
	srv := testnats.Start(t)
	b := startBridge(t, routedConfig(t, srv.URL()))
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	pub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{Username: "pub", Password: "pw"})
	for i := 1; i <= 20; i++ {
		if err := pub.Publish(fmt.Sprintf("sensors/%d", i), 1, false, "x"); err != nil {
			t.Fatal(err)
		}
		// The PUBACK has arrived: the message must already be in the stream.
		if n := streamMsgs(t, srv.URL()); n != uint64(i) {
			t.Fatalf("after %d PUBACKs the stream holds %d messages", i, n)
		}
	}
	// The bridge's own messages are routed once, not again by the hook.
	if err := b.Publisher().Publish(context.Background(), bus.NewMessage("test", "own-1", "own/1", []byte("x"), time.Now())); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, srv.URL()); n != 21 {
		t.Fatalf("stream holds %d messages, want 21", n)
	}
}

func TestUnsafeMQTTPublishesAreRefused(t *testing.T) {
	mosquittoPub := testkit.RequireCommand(t, "mosquitto_pub")
	srv := testnats.Start(t)
	cfg := routedConfig(t, srv.URL())
	cfg.Routes[0].OutboxMaxBytes = bytesize.MiB
	b := startBridge(t, cfg)
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	srv.Stop()
	waitFor(t, "the sink to go down", func() bool { return len(b.router.Ready()) == 1 })

	// Fill the outbox to the last byte through the bridge's own publisher, as
	// an adapter would, with ever smaller messages.
	for _, size := range []int{300 << 10, 4 << 10, 16, 0} {
		var err error
		for i := 0; i < 10000 && err == nil; i++ {
			err = b.Publisher().Publish(context.Background(), bus.Message{Topic: "fill/up", Payload: make([]byte, size), QoS: 1})
		}
		if !errors.Is(err, bus.ErrUnavailable) {
			t.Fatalf("filling the outbox: %v, want bus.ErrUnavailable", err)
		}
	}

	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	all := sub.Subscribe("sensors/#", 1)

	// MQTT 3.1.1: no PUBACK, and a disconnect so the client resends later.
	lost := testkit.NewSignal()
	pub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{Username: "pub", Password: "pw", OnLost: lost.Fire})
	_ = pub.Publish("sensors/v3", 1, false, "unsafe")
	if !lost.Wait() {
		t.Fatal("an MQTT 3.1.1 publisher whose message could not be made safe stayed connected")
	}
	// MQTT 5: a PUBACK with a reason code.
	host, port, _ := net.SplitHostPort(b.Broker().Addr("mqtt"))
	out, _ := exec.Command(mosquittoPub, "-V", "5", "-q", "1", "-h", host, "-p", port, "-u", "pub", "-P", "pw", "-t", "sensors/v5", "-m", "unsafe").CombinedOutput()
	if !strings.Contains(string(out), "Quota exceeded") {
		t.Errorf("mosquitto_pub -V 5 printed %q, want a Quota exceeded reason", out)
	}
	// MQTT 5 at QoS 2: a PUBREC with the reason code, which ends the exchange.
	out, _ = exec.Command(mosquittoPub, "-V", "5", "-q", "2", "-h", host, "-p", port, "-u", "pub", "-P", "pw", "-t", "sensors/v5q2", "-m", "unsafe").CombinedOutput()
	if !strings.Contains(string(out), "Quota exceeded") {
		t.Errorf("mosquitto_pub -V 5 -q 2 printed %q, want a Quota exceeded reason", out)
	}
	// Neither message reached local subscribers.
	if err := b.Broker().Publish(context.Background(), bus.Message{Topic: "sensors/barrier", Payload: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if m := testkit.Next(t, all); m.Topic != "sensors/barrier" {
		t.Fatalf("a refused message was delivered: %+v", m)
	}
}

func TestReadyzReportsARequiredSinkDown(t *testing.T) {
	srv := testnats.Start(t)
	b := startBridge(t, routedConfig(t, srv.URL()))
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	srv.Stop()
	waitFor(t, "readyz to fail", func() bool {
		code, _ := testkit.Get(t, "http://"+b.HTTPAddr()+"/readyz")
		return code == 503
	})
	_, body := testkit.Get(t, "http://"+b.HTTPAddr()+"/readyz")
	if !strings.Contains(body, `"route all":"sink js is down: `) || !strings.Contains(body, `; buffering in the outbox"`) {
		t.Fatalf("/readyz: %s", body)
	}
	srv.Restart()
	waitFor(t, "readyz to recover", func() bool {
		code, _ := testkit.Get(t, "http://"+b.HTTPAddr()+"/readyz")
		return code == 200
	})
}

// TestExternalModeRoutesEachMessageOnce runs two bridges against Debian's
// mosquitto, sharing one subscription, with a route to NATS. What an
// adapter publishes (under its topic prefix, here gerrit's) is routed by
// the bridge that publishes it, before it reaches the broker, and not again
// by the router subscriber the broker hands it to; what an MQTT publisher
// publishes elsewhere is routed by one subscriber.
func TestExternalModeRoutesEachMessageOnce(t *testing.T) {
	mosq := testkit.StartMosquitto(t)
	srv := testnats.Start(t)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := make(chan *nats.Msg, 10000)
	if _, err := nc.ChanSubscribe("firehose.>", got); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()

	var bridges []*Bridge
	for i := 0; i < 2; i++ {
		cfg := testConfig(t)
		cfg.DataDir = t.TempDir()
		cfg.Broker.Mode = broker.ModeExternal
		cfg.Broker.External = &broker.External{}
		cfg.Broker.External.SetDefaults()
		cfg.Broker.External.URL = mosq.URL()
		cfg.Broker.External.ClientID = fmt.Sprintf("bridge-%d", i)
		cfg.Broker.External.MaxReconnectInterval = 200 * time.Millisecond
		sc := *natssink.NewConfig(natssink.TypeNATS)
		sc.Type, sc.URLs = sinkconfig.TypeNATS, []string{srv.URL()}
		cfg.Sinks = map[string]sinkconfig.Config{"core": sinkconfig.NATSConfig(&sc)}
		var rc router.Config
		rc.SetDefaults()
		rc.Name, rc.Sink, rc.Filters = "events", "core", []string{"gerrit/#", "gerrit/+/x", "events/#"}
		cfg.Routes = []router.Config{rc}
		if err := config.Parse(nil, &cfg, config.Options{}); err != nil {
			t.Fatal(err)
		}
		bridges = append(bridges, startBridge(t, cfg))
	}
	for _, b := range bridges {
		waitSubscribed(t, b, got)
	}
	pub := testkit.Connect(t, mosq.URL(), testkit.ClientOptions{})

	const n = 400
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%3 == 2 { // an MQTT publisher's
				if err := pub.Publish(fmt.Sprintf("events/%d/x", i), 1, false, fmt.Sprint(i)); err != nil {
					t.Error(err)
				}
				return
			}
			b := bridges[i%3]
			m := bus.NewMessage("test", fmt.Sprint(i), fmt.Sprintf("gerrit/%d/x", i), []byte(fmt.Sprint(i)), time.Now())
			if err := b.Publisher().Publish(context.Background(), m); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	seen := map[string]int{}
	for len(seen) < n {
		select {
		case m := <-got:
			seen[string(m.Data)]++
			if seen[string(m.Data)] > 1 {
				t.Fatalf("message %s reached NATS twice", m.Data)
			}
		case <-time.After(testkit.Timeout):
			t.Fatalf("%d of %d messages reached NATS", len(seen), n)
		}
	}
	// Nothing more arrives: a final message is the next one on NATS.
	if err := bridges[1].Publisher().Publish(context.Background(), bus.Message{Topic: "gerrit/end", Payload: []byte("end"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m.Data) != "end" {
			t.Fatalf("a duplicate arrived late: %s", m.Data)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("the final message did not arrive")
	}
}

func TestRoutedMQTTMessagesKeepOrderAndReachSubscribers(t *testing.T) {
	srv := testnats.Start(t)
	b := startBridge(t, routedConfig(t, srv.URL()))
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	got := sub.Subscribe("ordered/#", 1)
	pub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{Username: "pub", Password: "pw"})

	const n = 2000
	tokens := make([]interface{ Wait() bool }, 0, n)
	for i := 0; i < n; i++ { // without waiting, so many messages are in the pipeline at once
		tokens = append(tokens, pub.Client.Publish("ordered/x", 1, false, fmt.Sprint(i)))
	}
	for _, tok := range tokens {
		tok.Wait()
	}
	for i := 0; i < n; i++ {
		if m := testkit.Next(t, got); m.Payload != fmt.Sprint(i) {
			t.Fatalf("message %d arrived as %q", i, m.Payload)
		}
	}
	if c := streamMsgs(t, srv.URL()); c != n {
		t.Fatalf("stream holds %d, want %d", c, n)
	}
	// A retained message is kept once routed.
	if err := pub.Publish("ordered/status", 1, true, "last"); err != nil {
		t.Fatal(err)
	}
	late := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	if m := testkit.Next(t, late.Subscribe("ordered/status", 1)); m.Payload != "last" || !m.Retained {
		t.Fatalf("retained: %+v", m)
	}
}

// TestRoutingStoresRepeatedPublishesOfNewSessions publishes the same message
// twice, as `mosquitto_pub -i door` run twice does: each run is a new MQTT
// session reusing client id, packet id, topic and payload, and each is a
// message of its own that JetStream must store.
func TestRoutingStoresRepeatedPublishesOfNewSessions(t *testing.T) {
	mosquittoPub := testkit.RequireCommand(t, "mosquitto_pub")
	srv := testnats.Start(t)
	b := startBridge(t, routedConfig(t, srv.URL()))
	waitFor(t, "the sink", func() bool { return len(b.router.Ready()) == 0 })
	host, port, _ := net.SplitHostPort(b.Broker().Addr("mqtt"))
	for i := 1; i <= 2; i++ {
		out, err := exec.Command(mosquittoPub, "-h", host, "-p", port, "-u", "pub", "-P", "pw",
			"-i", "door", "-q", "1", "-t", "door", "-m", "open").CombinedOutput()
		if err != nil {
			t.Fatalf("mosquitto_pub: %v: %s", err, out)
		}
		// mosquitto_pub has its PUBACK: the message is in the stream.
		if n := streamMsgs(t, srv.URL()); n != uint64(i) {
			t.Fatalf("after %d runs of mosquitto_pub the stream holds %d messages", i, n)
		}
	}
}

// externalConfig is a bridge in external broker mode against url, with the
// given sinks and one route of filters to the sink named "out".
func externalConfig(t *testing.T, url, clientID string, sink sinkconfig.Config, filters ...string) config.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	cfg.Broker.Mode = broker.ModeExternal
	cfg.Broker.External = &broker.External{}
	cfg.Broker.External.SetDefaults()
	cfg.Broker.External.URL = url
	cfg.Broker.External.ClientID = clientID
	cfg.Broker.External.MaxReconnectInterval = 200 * time.Millisecond
	cfg.Sinks = map[string]sinkconfig.Config{"out": sink}
	var rc router.Config
	rc.SetDefaults()
	rc.Name, rc.Sink, rc.Filters = "events", "out", filters
	cfg.Routes = []router.Config{rc}
	if err := config.Parse(nil, &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func coreSink(url string) sinkconfig.Config {
	sc := *natssink.NewConfig(natssink.TypeNATS)
	sc.Type, sc.URLs = sinkconfig.TypeNATS, []string{url}
	return sinkconfig.NATSConfig(&sc)
}

func natsSubscribe(t *testing.T, url, subject string) <-chan *nats.Msg {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	got := make(chan *nats.Msg, 100000)
	if _, err := nc.ChanSubscribe(subject, got); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return got
}

// waitSubscribed waits until the bridge is connected to the external broker
// with its shared subscription in place (the broker has answered it), then
// empties got, when given.
func waitSubscribed(t *testing.T, b *Bridge, got <-chan *nats.Msg) {
	t.Helper()
	waitFor(t, "the external broker and the shared subscription", func() bool {
		return b.external.Ready() && b.subscriber.Ready() == nil
	})
	for len(got) > 0 {
		<-got
	}
}

// TestExternalModeStoresIdenticalMessagesTwice: heartbeats with the same
// topic and payload, from an MQTT publisher on the external broker, are
// distinct messages, each stored by JetStream.
func TestExternalModeStoresIdenticalMessagesTwice(t *testing.T) {
	mosq := testkit.StartMosquitto(t)
	srv := testnats.Start(t)
	js := routedConfig(t, srv.URL()).Sinks["js"]
	b := startBridge(t, externalConfig(t, mosq.URL(), "bridge-hb", js, "heartbeat/#"))
	waitFor(t, "the external broker and the sink", func() bool {
		return b.external.Ready() && b.subscriber.Ready() == nil && len(b.router.Ready()) == 0
	})
	pub := testkit.Connect(t, mosq.URL(), testkit.ClientOptions{})
	for range 3 {
		if err := pub.Publish("heartbeat/web1", 1, false, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three heartbeats in the stream", func() bool { return streamMsgs(t, srv.URL()) == 3 })
}

// TestExternalModeKeepsArrivalOrder: messages from the external broker reach
// the sink in the order the broker sent them.
func TestExternalModeKeepsArrivalOrder(t *testing.T) {
	mosq := testkit.StartMosquitto(t)
	srv := testnats.Start(t)
	got := natsSubscribe(t, srv.URL(), "firehose.>")
	b := startBridge(t, externalConfig(t, mosq.URL(), "bridge-order", coreSink(srv.URL()), "events/#"))
	waitSubscribed(t, b, got)

	pub := testkit.Connect(t, mosq.URL(), testkit.ClientOptions{})
	const n = 3000
	tokens := make([]interface{ Wait() bool }, 0, n)
	for i := 0; i < n; i++ { // without waiting, so that many are in flight at once
		tokens = append(tokens, pub.Client.Publish("events/ordered", 1, false, fmt.Sprint(i)))
	}
	for _, tok := range tokens {
		tok.Wait()
	}
	for i := 0; i < n; i++ {
		select {
		case m := <-got:
			if string(m.Data) != fmt.Sprint(i) {
				t.Fatalf("message %d arrived as %q", i, m.Data)
			}
		case <-time.After(testkit.Timeout):
			t.Fatalf("%d of %d messages arrived", i, n)
		}
	}
}

// aclGate is an MQTT broker's access control that refuses every
// subscription while deny is set.
type aclGate struct {
	mqtt.HookBase
	deny atomic.Bool
}

func (g *aclGate) ID() string { return "acl-gate" }
func (g *aclGate) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}
func (g *aclGate) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }
func (g *aclGate) OnACLCheck(_ *mqtt.Client, _ string, write bool) bool {
	return write || !g.deny.Load()
}

// TestExternalModeRetriesARefusedSubscriptionAndReadyzSaysSo runs the bridge
// against a broker that refuses its shared subscription at first (as an ACL
// may): /readyz says so, and once the broker grants it the bridge routes
// without being restarted.
func TestExternalModeRetriesARefusedSubscriptionAndReadyzSaysSo(t *testing.T) {
	gate := &aclGate{}
	gate.deny.Store(true)
	ext := mqtt.New(&mqtt.Options{InlineClient: false, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := ext.AddHook(gate, nil); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port of its own, not one that was free a moment ago
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ext.AddListener(listeners.NewNet("tcp", ln)); err != nil {
		t.Fatal(err)
	}
	if err := ext.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ext.Close() })
	srv := testnats.Start(t)
	got := natsSubscribe(t, srv.URL(), "firehose.>")
	b := startBridge(t, externalConfig(t, "tcp://"+addr, "bridge-acl", coreSink(srv.URL()), "events/#"))

	readyz := "http://" + b.HTTPAddr() + "/readyz"
	waitFor(t, "readyz to report the refused subscription", func() bool {
		code, body := testkit.Get(t, readyz)
		return code == 503 && strings.Contains(body, `"router subscriber":"router subscriber not receiving from the external broker: the shared subscription failed: the broker refused $share/firehose/events/#`)
	})
	if !b.external.Ready() {
		t.Fatal("the bridge's publisher is not connected; the test needs it to be")
	}
	gate.deny.Store(false)
	waitFor(t, "readyz to recover", func() bool {
		code, _ := testkit.Get(t, readyz)
		return code == 200
	})
	if err := b.Publisher().Publish(context.Background(), bus.Message{Topic: "events/after", Payload: []byte("after"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.Subject != "firehose.events.after" {
			t.Fatalf("got %s", m.Subject)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("nothing is routed after the broker granted the subscription")
	}
}

// TestRoutingRefusesARouteOutsideItsStream: a route whose subjects JetStream's
// stream does not capture could never deliver; the bridge does not start.
func TestRoutingRefusesARouteOutsideItsStream(t *testing.T) {
	cfg := routedConfig(t, "nats://127.0.0.1:1")
	cfg.Routes[0].SubjectPrefix = "fh.dc1"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `routes[0].filters[0]: route "all" sends "fh.dc1.>"`) {
		t.Fatalf("Validate: %v, want an error naming routes[0].filters[0]", err)
	}
}
