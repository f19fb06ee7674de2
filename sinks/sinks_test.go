package sinks_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
	"github.com/opsfirehose/firehose/sinks"
	mqttsink "github.com/opsfirehose/firehose/sinks/mqtt"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
	"github.com/opsfirehose/firehose/sinks/sinktest"
)

func natsDest(levels ...string) string { return strings.Join(levels, ".") }
func mqttDest(levels ...string) string { return strings.Join(levels, "/") }

func natsConfig(typ string, urls ...string) natssink.Config {
	cfg := *natssink.NewConfig(natssink.TypeNATS)
	cfg.Type, cfg.URLs = typ, urls
	// A confirmation that is slow on a busy machine must not fail a test;
	// the tests of a confirmation that never comes set their own.
	cfg.ConfirmTimeout = testkit.WaitTimeout
	if typ == natssink.TypeJetStream {
		cfg.Stream = &natssink.StreamConfig{}
		cfg.Stream.SetDefaults()
		cfg.Stream.Name, cfg.Stream.Create, cfg.Stream.Subjects = "SINKTEST", true, []string{"sinktest.>"}
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return cfg
}

func natsHeaders(h nats.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v[0]
	}
	return out
}

// sinktestStream connects to the server at url and looks up the stream
// that natsConfig's JetStream sinks make.
func sinktestStream(t *testing.T, url string) (jetstream.Stream, error) {
	t.Helper()
	js := testnats.JetStream(t, url)
	return js.Stream(context.Background(), "SINKTEST")
}

// smallPayload makes a server's max_payload 256 KiB, so that the
// conformance suite finds the limit the server announces, not the default.
func smallPayload(o *server.Options) { o.MaxPayload = 256 << 10 }

func TestNATSCoreConformance(t *testing.T) {
	var srv *testnats.Server
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) (sinks.Sink, <-chan sinktest.Delivery) {
			srv = testnats.Start(t, smallPayload)
			s, err := natssink.NewNATS("core", natsConfig(natssink.TypeNATS, srv.URL()), zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			ch := make(chan sinktest.Delivery, 10000)
			nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			if _, err := nc.Subscribe("sinktest.>", func(m *nats.Msg) {
				ch <- sinktest.Delivery{Dest: m.Subject, Payload: m.Data, Headers: natsHeaders(m.Header)}
			}); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			return s, ch
		},
		Dest:           natsDest,
		HeadersVisible: true,
		MaxPayload:     1 << 20,
		Outage: func(t *testing.T) func() {
			srv.Stop()
			return srv.Restart
		},
	})
}

func TestJetStreamConformance(t *testing.T) {
	var srv *testnats.Server
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) (sinks.Sink, <-chan sinktest.Delivery) {
			srv = testnats.Start(t)
			s, err := natssink.NewNATS("js", natsConfig(natssink.TypeJetStream, srv.URL()), zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			return s, consumeStream(t, srv.URL(), "SINKTEST")
		},
		Dest:           natsDest,
		HeadersVisible: true,
		MaxPayload:     1 << 20,
		Outage: func(t *testing.T) func() {
			srv.Stop()
			return srv.Restart
		},
	})
}

// consumeStream reads what the stream stored, in order, with an ordered
// consumer that survives server restarts.
func consumeStream(t *testing.T, url, stream string) <-chan sinktest.Delivery {
	t.Helper()
	ch := make(chan sinktest.Delivery, 100000)
	js := testnats.JetStream(t, url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		for ctx.Err() == nil {
			cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
			if err != nil {
				time.Sleep(50 * time.Millisecond) // the stream may not exist yet
				continue
			}
			cc, err := cons.Consume(func(m jetstream.Msg) {
				ch <- sinktest.Delivery{Dest: m.Subject(), Payload: m.Data(), Headers: natsHeaders(m.Headers())}
			})
			if err != nil {
				continue
			}
			<-ctx.Done()
			cc.Stop()
		}
	}()
	return ch
}

func TestJetStreamStoresARetriedMessageOnce(t *testing.T) {
	srv := testnats.Start(t)
	s, err := natssink.NewNATS("js", natsConfig(natssink.TypeJetStream, srv.URL()), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := 0; i < 3; i++ { // a retry, and an outbox replay, of the same message
		if err := s.Publish(context.Background(), bus.NewMessage("chef", "run-1/run_start", "sinktest.a", []byte("x"), time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	st, err := sinktestStream(t, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages (%v), want 1", info.State.Msgs, err)
	}
}

func TestMQTTConformance(t *testing.T) {
	var broker *testkit.Mosquitto
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) (sinks.Sink, <-chan sinktest.Delivery) {
			broker = testkit.StartMosquitto(t, "max_packet_size 262144")
			cfg := *mqttsink.NewConfig()
			cfg.URL, cfg.ClientID = broker.URL(), "sinktest-publisher"
			cfg.MaxPacketSize = 256 * bytesize.KiB
			cfg.MaxReconnectInterval = 200 * time.Millisecond
			cfg.ConfirmTimeout = testkit.WaitTimeout
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			s, err := mqttsink.New("ext", cfg, t.TempDir(), zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			return s, mqttReceiver(t, broker.URL())
		},
		Dest:       mqttDest,
		MaxPayload: 4 << 20,
		Outage: func(t *testing.T) func() {
			broker.Stop()
			return broker.Restart
		},
	})
}

// An MQTT sink publishes what it is given once, however soon after
// Ready: paho says its connection is open before it resends what its store
// holds, from a list taken then, and a message published in between went
// twice (BatchArrivesInOrder saw it under CI's load). Each round is a new
// sink, fresh store and all, published to the moment Ready says so.
func TestMQTTSinkSendsOnceRightAfterConnecting(t *testing.T) {
	broker := testkit.StartMosquitto(t)
	ch := mqttReceiver(t, broker.URL())
	for round := range 20 {
		cfg := *mqttsink.NewConfig()
		cfg.URL, cfg.ClientID = broker.URL(), fmt.Sprint("sinktest-round-", round)
		cfg.ConfirmTimeout = testkit.WaitTimeout
		s, err := mqttsink.New("ext", cfg, t.TempDir(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		spinUntil(t, s.Ready, "round %d: the sink is not ready", round)
		publishTwoInOrder(t, s, ch, round)
		_ = s.Close(context.Background())
	}
}

// The same after reconnecting: paho resends what its store holds on every
// connection. Each round, another client takes the sink's client id, which
// makes the broker close the sink's connection, and leaves; once the sink
// logs that it lost the connection, it is published to the moment Ready
// says so.
func TestMQTTSinkSendsOnceRightAfterReconnecting(t *testing.T) {
	broker := testkit.StartMosquitto(t)
	ch := mqttReceiver(t, broker.URL())
	cfg := *mqttsink.NewConfig()
	cfg.URL, cfg.ClientID = broker.URL(), "sinktest-reconnecting"
	cfg.MaxReconnectInterval = 200 * time.Millisecond
	cfg.ConfirmTimeout = testkit.WaitTimeout
	lost := make(chan struct{}, 100)
	log := zerolog.New(lineWatcher{match: "MQTT sink disconnected", seen: lost})
	s, err := mqttsink.New("ext", cfg, t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	for round := range 10 {
		spinUntil(t, s.Ready, "round %d: the sink is not ready", round)
		for len(lost) > 0 { // a loss of the round before, logged late
			<-lost
		}
		// The thief does not come back: a thief that reconnected, after the
		// sink took its id back, would take it again while the sink is
		// published to.
		thief := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID(cfg.ClientID).SetAutoReconnect(false))
		if tok := thief.Connect(); !tok.WaitTimeout(testkit.WaitTimeout) || tok.Error() != nil {
			t.Fatalf("round %d: taking the sink's client id: %v", round, tok.Error())
		}
		thief.Disconnect(0)
		testkit.NextWithin(t, testkit.WaitTimeout, lost)
		spinUntil(t, s.Ready, "round %d: the sink is not ready again", round)
		publishTwoInOrder(t, s, ch, round)
	}
}

// lineWatcher is a log's writer that tells seen of each line holding
// match.
type lineWatcher struct {
	match string
	seen  chan<- struct{}
}

func (w lineWatcher) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// spinUntil waits for cond without pausing, so that what follows runs the
// moment it holds.
func spinUntil(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(testkit.WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
		runtime.Gosched()
	}
}

// publishTwoInOrder publishes a-<round> and b-<round> through s, and wants
// them from ch in that order, once each.
func publishTwoInOrder(t *testing.T, s sinks.Sink, ch <-chan sinktest.Delivery, round int) {
	t.Helper()
	dest := mqttDest("sinktest", "once")
	for _, p := range []string{"a", "b"} {
		if err := s.Publish(context.Background(), bus.Message{Topic: dest, Payload: fmt.Appendf(nil, "%s-%d", p, round), QoS: 1}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	for _, want := range []string{"a", "b"} {
		if d := testkit.NextWithin(t, testkit.WaitTimeout, ch); string(d.Payload) != fmt.Sprintf("%s-%d", want, round) {
			t.Fatalf("round %d: got %q, want %s-%d", round, d.Payload, want, round)
		}
	}
}

// mqttReceiver subscribes to sinktest/# and resubscribes after reconnecting,
// so it outlives a broker restart.
func mqttReceiver(t *testing.T, url string) <-chan sinktest.Delivery {
	t.Helper()
	ch := make(chan sinktest.Delivery, 10000)
	subscribed := make(chan struct{}, 10)
	opts := paho.NewClientOptions().AddBroker(url).SetClientID("sinktest-receiver").
		SetAutoReconnect(true).SetMaxReconnectInterval(200 * time.Millisecond).SetCleanSession(true).
		SetOnConnectHandler(func(c paho.Client) {
			c.Subscribe("sinktest/#", 1, func(_ paho.Client, m paho.Message) {
				ch <- sinktest.Delivery{Dest: m.Topic(), Payload: m.Payload()}
			}).Wait()
			subscribed <- struct{}{}
		})
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(testkit.Timeout) || tok.Error() != nil {
		t.Fatalf("receiver: %v", tok.Error())
	}
	<-subscribed
	t.Cleanup(func() { c.Disconnect(100) })
	return ch
}

// brokerSink presents the embedded broker as a sink, so it passes the same suite.
type brokerSink struct{ *testbus.Bus }

func (b brokerSink) Name() string                            { return "embedded" }
func (b brokerSink) Close(ctx context.Context) error         { return b.Broker.Close(ctx) }
func (b brokerSink) Limit() sinks.Limit                      { return sinks.Limit{} }
func (b brokerSink) MessageSize(m *bus.Message) int          { return len(m.Payload) }
func (b brokerSink) Address(_, topic string) (string, error) { return topic, nil }
func (b brokerSink) NotReadyReason() string {
	if b.Ready() {
		return ""
	}
	return "not running"
}

func TestEmbeddedBrokerConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) (sinks.Sink, <-chan sinktest.Delivery) {
			b := testbus.Start(t)
			ch := make(chan sinktest.Delivery, 10000)
			in := b.Subscribe(t, "sinktest/#")
			go func() {
				for m := range in {
					ch <- sinktest.Delivery{Dest: m.Topic, Payload: []byte(m.Payload)}
				}
			}()
			return brokerSink{b}, ch
		},
		Dest:       mqttDest,
		MaxPayload: 4 << 20,
	})
}

// TestJetStreamTellsAMessageTooLargeForTheStream: a message over the
// stream's max_msg_size can never be stored, so it fails with bus.ErrInvalid
// (the router drops and counts it) instead of stalling an outbox for good.
func TestJetStreamTellsAMessageTooLargeForTheStream(t *testing.T) {
	srv := testnats.Start(t)
	js := testnats.JetStream(t, srv.URL())
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "SINKTEST", Subjects: []string{"sinktest.>"}, MaxMsgSize: 64}); err != nil {
		t.Fatal(err)
	}
	cfg := natsConfig(natssink.TypeJetStream, srv.URL())
	cfg.Stream.Create = false // the stream above, with its limit
	s, err := natssink.NewNATS("js", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	testkit.Eventually(t, s.Ready, "the sink to be ready")
	if err := s.Publish(context.Background(), bus.Message{Topic: "sinktest.small", Payload: []byte("x")}); err != nil {
		t.Fatalf("a small message: %v", err)
	}
	err = s.Publish(context.Background(), bus.Message{Topic: "sinktest.large", Payload: make([]byte, 1024)})
	if !errors.Is(err, bus.ErrInvalid) || errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("a message over max_msg_size: %v, want bus.ErrInvalid only", err)
	}

	// In a batch, the one message that can never be stored must not cost
	// the others: they are stored, and the error says how many were refused,
	// so the router drops that one alone.
	batch := []bus.Message{
		{Topic: "sinktest.a", Payload: []byte("a")},
		{Topic: "sinktest.large", Payload: make([]byte, 1024)},
		{Topic: "sinktest.b", Payload: []byte("b")},
		{Topic: "sinktest.c", Payload: []byte("c")},
	}
	err = s.Publish(context.Background(), batch...)
	var rej *bus.Rejected
	if !errors.As(err, &rej) || rej.Count != 1 || errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("a batch with one message over max_msg_size: %v, want a *bus.Rejected of 1", err)
	}
	st, err := js.Stream(context.Background(), "SINKTEST")
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"sinktest.a", "sinktest.b", "sinktest.c"} {
		if _, err := st.GetLastMsgForSubject(context.Background(), subject); err != nil {
			t.Errorf("%s was not stored beside the refused message: %v", subject, err)
		}
	}
}

// TestJetStreamRecreatesAStreamLostInARestart: a server that comes back
// without the stream (memory storage here; a lost volume in life) gets it
// again from a sink with stream.create, and the sink is not ready until
// then, instead of failing every publish while it says it is ready.
func TestJetStreamRecreatesAStreamLostInARestart(t *testing.T) {
	srv := testnats.Start(t)
	cfg := natsConfig(natssink.TypeJetStream, srv.URL())
	cfg.Stream.Storage = "memory"
	s, err := natssink.NewNATS("js", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		testkit.Eventually(t, ok, "%s", what)
	}
	waitFor("the sink to be ready", s.Ready)
	if err := s.Publish(context.Background(), bus.Message{Topic: "sinktest.before", Payload: []byte("1")}); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	srv.Stop()
	waitFor("the sink to see the server go", func() bool { return !s.Ready() })
	srv.Restart()
	waitFor("the sink to be ready again", s.Ready)
	if err := s.Publish(context.Background(), bus.Message{Topic: "sinktest.after", Payload: []byte("2")}); err != nil {
		t.Fatalf("after a restart that lost the stream: %v", err)
	}
	st, err := sinktestStream(t, srv.URL())
	if err != nil {
		t.Fatalf("the stream was not made again: %v", err)
	}
	if _, err := st.GetLastMsgForSubject(context.Background(), "sinktest.after"); err != nil {
		t.Errorf("the message published after the restart is not stored: %v", err)
	}
}

// TestJetStreamMakesALostStreamWithoutAPublish: a publish that finds no
// stream makes the sink not ready, and the sink makes the stream again on
// its own. Nothing else would: the router publishes only to a ready sink,
// and no reconnection comes when the connection stayed up (in a cluster,
// while the stream's leader is elected after a node was lost).
func TestJetStreamMakesALostStreamWithoutAPublish(t *testing.T) {
	srv := testnats.Start(t)
	cfg := natsConfig(natssink.TypeJetStream, srv.URL())
	cfg.ConfirmTimeout = time.Second // how long the publish below waits for no stream
	s, err := natssink.NewNATS("js", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	testkit.Eventually(t, s.Ready, "the sink to be ready")

	js := testnats.JetStream(t, srv.URL())
	if err := js.DeleteStream(context.Background(), "SINKTEST"); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(context.Background(), bus.Message{Topic: "sinktest.lost", Payload: []byte("1")}); !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("a publish to a deleted stream: %v, want bus.ErrUnavailable", err)
	}
	testkit.Eventually(t, s.Ready, "the sink to be ready again, with no publish to make it try")
	if _, err := js.Stream(context.Background(), "SINKTEST"); err != nil {
		t.Fatalf("ready, but the stream was not made again: %v", err)
	}
	if err := s.Publish(context.Background(), bus.Message{Topic: "sinktest.after", Payload: []byte("2")}); err != nil {
		t.Fatalf("after the stream was made again: %v", err)
	}
}

// TestMQTTPacketSizeAgainstMosquitto: mosquitto takes a PUBLISH of
// exactly max_packet_size as the sink counts it (the whole packet, as MQTT 5
// defines Maximum Packet Size), and ends the connection of a client that
// sends a larger one, which is why the sink never sends one. mosquitto
// leaves the 1 to 4 bytes of the length field out of its count, so the
// first packet it refuses is that much larger than the limit: the sink errs
// on the side of refusing.
func TestMQTTPacketSizeAgainstMosquitto(t *testing.T) {
	const limit = 4096
	broker := testkit.StartMosquitto(t, fmt.Sprintf("max_packet_size %d", limit))
	topic := "sinktest/size"
	for i, packet := range []int{limit, limit + 1 + 2} { // 2: the length field of a packet that size
		lost := make(chan struct{}, 1)
		c := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID(fmt.Sprint("raw-", i)).
			SetAutoReconnect(false).SetConnectionLostHandler(func(paho.Client, error) { lost <- struct{}{} }))
		if tok := c.Connect(); !tok.WaitTimeout(testkit.Timeout) || tok.Error() != nil {
			t.Fatalf("connect: %v", tok.Error())
		}
		size := packet - mqttsink.PublishPacketSize(topic, 0)
		for mqttsink.PublishPacketSize(topic, size) > packet { // the length field grew
			size--
		}
		if got := mqttsink.PublishPacketSize(topic, size); got != packet {
			t.Fatalf("a packet of %d bytes, want %d", got, packet)
		}
		tok := c.Publish(topic, 1, false, make([]byte, size))
		if packet == limit {
			if !tok.WaitTimeout(testkit.Timeout) || tok.Error() != nil {
				t.Fatalf("a packet of exactly max_packet_size: %v", tok.Error())
			}
			c.Disconnect(100)
			continue
		}
		select {
		case <-lost:
		case <-time.After(testkit.Timeout):
			t.Fatalf("mosquitto took a packet of %d bytes, over max_packet_size %d", packet, limit)
		}
	}
}

// TestNATSLimits: before it connects a NATS sink assumes max_payload from
// its config; once connected, the server's; for JetStream, the stream's
// max_msg_size when smaller.
func TestNATSLimits(t *testing.T) {
	srv := testnats.Start(t, smallPayload)
	cfg := natsConfig(natssink.TypeNATS, "nats://127.0.0.1:1") // nothing listens there
	cfg.MaxPayload = 3 * bytesize.MiB
	s, err := natssink.NewNATS("core", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if lim := s.Limit(); lim.Bytes != 3<<20 || lim.From != "sinks.core.max_payload" {
		t.Errorf("before connecting: %+v", lim)
	}
	m := bus.NewMessage("chef", "run-1/run_start", "sinktest.a", []byte("xyz"), time.Now())
	m.Headers[bus.HeaderSource] = " chef " // nats.go trims values
	want := 3 + len("NATS/1.0\r\n\r\n") + len("Nats-Msg-Id: run-1/run_start\r\n") + len("Firehose-Source: chef\r\n") +
		len("Firehose-Received-At: \r\n") + len(m.Headers[bus.HeaderReceivedAt])
	if got := s.MessageSize(&m); got != want {
		t.Errorf("MessageSize %d, want %d", got, want)
	}

	js, err := natssink.NewNATS("js", func() natssink.Config {
		c := natsConfig(natssink.TypeJetStream, srv.URL())
		c.Stream.Create = false
		return c
	}(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close(context.Background())
	<-js.LimitKnown()
	if lim := js.Limit(); lim.Bytes != 256<<10 || lim.From != "the NATS server's max_payload" {
		t.Errorf("connected, no stream: %+v", lim)
	}
	jsc := testnats.JetStream(t, srv.URL())
	if _, err := jsc.CreateStream(context.Background(), jetstream.StreamConfig{Name: "SINKTEST", Subjects: []string{"sinktest.>"}, MaxMsgSize: 1000}); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // the sink reads the stream's limit when it connects again
	testkit.Eventually(t, func() bool { return js.Limit().Bytes == 1000 }, "the sink to read the stream's max_msg_size")
	if lim := js.Limit(); !strings.Contains(lim.From, "max_msg_size of JetStream stream SINKTEST") {
		t.Errorf("stream limit: %+v", lim)
	}
}

// TestSinksSayWhyTheyCannotConnect is issue 16's row 5 for each kind of
// sink: with a wrong password, the server's refusal is logged (once, not
// per attempt) and is what NotReadyReason says.
func TestSinksSayWhyTheyCannotConnect(t *testing.T) {
	t.Run("mqtt", func(t *testing.T) {
		mosq := testkit.StartMosquittoWithPassword(t, "bridge", "right")
		cfg := *mqttsink.NewConfig()
		cfg.URL, cfg.ClientID = mosq.URL(), "wrong-password"
		cfg.Username, cfg.Password = "bridge", "wrong"
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		var logs testkit.SyncBuffer
		s, err := mqttsink.New("out", cfg, t.TempDir(), zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		wantRefused(t, s, &logs, "not Authorized")
	})
	for _, typ := range []string{natssink.TypeNATS, natssink.TypeJetStream} {
		t.Run(typ, func(t *testing.T) {
			srv := testnats.Start(t, func(o *server.Options) { o.Username, o.Password = "bridge", "right" })
			cfg := natsConfig(typ, srv.URL())
			cfg.Username, cfg.Password = "bridge", "wrong"
			var logs testkit.SyncBuffer
			s, err := natssink.NewNATS("out", cfg, zerolog.New(&logs))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			wantRefused(t, s, &logs, "Authorization Violation")
		})
	}
}

// wantRefused waits for the sink to report reason, and checks it was
// logged at warn, once: the sink retries every second or so, and the same
// reason is logged again only after a minute.
func wantRefused(t *testing.T, s sinks.Sink, logs *testkit.SyncBuffer, reason string) {
	t.Helper()
	testkit.Eventually(t, func() bool { return strings.Contains(s.NotReadyReason(), reason) },
		"NotReadyReason to say %q", reason)
	testkit.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `"level":"warn"`) && strings.Contains(logs.String(), reason)
	},
		"a warning with the reason; the log is:\n%s", logs)
	if s.Ready() {
		t.Fatal("ready with a wrong password")
	}
	if n := strings.Count(logs.String(), "cannot connect"); n != 1 {
		t.Errorf("%d lines about the refusal, want 1:\n%s", n, logs)
	}
}

// TestJetStreamConcurrentPublishers: publishers whose batches share the
// sink's ack window (far smaller than what they publish together) each get
// their own answers, whichever of them takes an ack from the inbox, and
// every message they were told is stored is in the stream, once.
func TestJetStreamConcurrentPublishers(t *testing.T) {
	srv := testnats.Start(t)
	cfg := natsConfig(natssink.TypeJetStream, srv.URL())
	cfg.MaxPending = 16
	s, err := natssink.NewNATS("js", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	testkit.Eventually(t, s.Ready, "the sink to be ready")
	const publishers, batches = 8, 40
	errs := make(chan error, publishers)
	total := 0
	for p := range publishers {
		for b := range batches {
			total += 1 + (p+b)%23
		}
	}
	for p := range publishers {
		go func() {
			for b := range batches {
				batch := make([]bus.Message, 1+(p+b)%23) // some over the window, alone
				for i := range batch {
					batch[i] = bus.NewMessage("test", fmt.Sprintf("%d-%d-%d", p, b, i), fmt.Sprintf("sinktest.p%d", p), []byte("x"), time.Now())
				}
				if err := s.Publish(context.Background(), batch...); err != nil {
					errs <- fmt.Errorf("publisher %d, batch %d: %w", p, b, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range publishers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st, err := sinktestStream(t, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil || info.State.Msgs != uint64(total) {
		t.Fatalf("stream holds %d messages (%v), want %d", info.State.Msgs, err, total)
	}
}
