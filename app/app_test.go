package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// testConfig is the default config on loopback ports chosen by the kernel,
// with its state (ConfigDB's SQLite file, outboxes) in a temporary directory.
func testConfig(t testing.TB) config.Config {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.Broker.Listeners = []broker.ListenerConfig{
		{Name: "mqtt", Type: broker.ListenerTCP, Address: "127.0.0.1:0"},
		{Name: "ws", Type: broker.ListenerWebSocket, Address: "127.0.0.1:0"},
	}
	return cfg
}

func startBridge(t *testing.T, cfg config.Config) *Bridge {
	t.Helper()
	b, err := New(t.Context(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	b := startBridge(t, testConfig(t))
	base := "http://" + b.HTTPAddr()

	if code, body := testkit.Get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	code, body := testkit.Get(t, base+"/readyz")
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || code != 200 || ready.Checks["broker"] != "ok" {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	if code, body := testkit.Get(t, base+"/nope"); code != 404 || !strings.Contains(body, `"error":"no such endpoint: /nope"`) {
		t.Fatalf("unknown path: %d %s", code, body)
	}

	// A subscriber and a message, so the broker metrics have something to count.
	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	ch := sub.Subscribe("#", 1)
	if err := b.Broker().Publish(context.Background(), busMessage("test/metrics")); err != nil {
		t.Fatal(err)
	}
	testkit.Next(t, ch)

	// The counters move after the delivery and the answer, which the client
	// may see first (messages_sent_total lagged so once at load 20).
	wants := []string{
		"firehose_broker_clients_connected 1",
		"firehose_broker_messages_received_total 1",
		"firehose_broker_messages_sent_total 1",
		`firehose_broker_messages_dropped_total{reason="slow_subscriber"} 0`,
		`firehose_http_requests_total{code="200",route="GET /healthz"} 1`,
		`firehose_http_requests_total{code="200",route="GET /readyz"} 1`,
		`firehose_http_requests_total{code="404",route="unmatched"} 1`,
		"go_goroutines ",
	}
	testkit.EventuallyContains(t, base+"/metrics", wants...)
}

func TestReadyzFailsOnceTheBrokerIsClosed(t *testing.T) {
	b := startBridge(t, testConfig(t))
	_ = b.Broker().Close(context.Background())
	code, body := testkit.Get(t, "http://"+b.HTTPAddr()+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"broker":"not running"`) {
		t.Fatalf("/readyz with the broker closed: %d %s", code, body)
	}
}

// closeProbe is a mochi hook that calls onClose when the broker closes,
// after its listeners and clients are closed, before its stores are.
type closeProbe struct {
	mqtt.HookBase
	onClose func()
}

func (h *closeProbe) ID() string           { return "test-close-probe" }
func (h *closeProbe) Provides(b byte) bool { return b == mqtt.OnStopped }
func (h *closeProbe) OnStopped()           { h.onClose() }

// probeHTTPAtBrokerClose adds a closeProbe to br that reports, once, whether
// httpAddr still accepted TCP connections when the broker began closing.
func probeHTTPAtBrokerClose(t *testing.T, br *broker.Broker, httpAddr string) <-chan bool {
	t.Helper()
	accepting := make(chan bool, 1)
	err := br.AddHook(&closeProbe{onClose: func() {
		conn, err := net.DialTimeout("tcp", httpAddr, testkit.Timeout)
		if err == nil {
			conn.Close()
		}
		select {
		case accepting <- err == nil:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return accepting
}

func TestShutdownIsOrderedIdempotentAndReleasesPorts(t *testing.T) {
	cfg := testConfig(t)
	b, err := New(t.Context(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	httpAddr, mqttAddr := b.HTTPAddr(), b.Broker().Addr("mqtt")
	httpAtBrokerClose := probeHTTPAtBrokerClose(t, b.Broker(), httpAddr)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, _ := testkit.Get(t, "http://"+httpAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz before shutdown: %d", code)
	}
	lost := testkit.NewSignal()
	testkit.Connect(t, "tcp://"+mqttAddr, testkit.ClientOptions{OnLost: lost.Fire})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Pipeline order: the HTTP intake had stopped accepting before the broker closed.
	select {
	case accepting := <-httpAtBrokerClose:
		if accepting {
			t.Fatal("the HTTP listener still accepted connections when the broker closed")
		}
	default:
		t.Fatal("the broker was not closed by Run")
	}
	if !lost.Wait() {
		t.Fatal("MQTT clients were not disconnected")
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Both ports are free again: a new bridge can bind the very same addresses.
	cfg.HTTP.Address = httpAddr
	cfg.Broker.Listeners = cfg.Broker.Listeners[:1]
	cfg.Broker.Listeners[0].Address = mqttAddr
	startBridge(t, cfg)
}

// stuckOnClose is a mochi hook whose OnStopped blocks until released: a
// broker that will not finish closing.
type stuckOnClose struct {
	mqtt.HookBase
	release chan struct{}
}

func (h *stuckOnClose) ID() string           { return "test-stuck-on-close" }
func (h *stuckOnClose) Provides(b byte) bool { return b == mqtt.OnStopped }
func (h *stuckOnClose) OnStopped()           { <-h.release }

func TestShutdownGivesUpOnAStuckStepAtShutdownTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 300 * time.Millisecond
	b, err := New(t.Context(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	stuck := &stuckOnClose{release: make(chan struct{})}
	t.Cleanup(func() { close(stuck.release) })
	if err := b.Broker().AddHook(stuck); err != nil {
		t.Fatal(err)
	}
	httpAddr := b.HTTPAddr()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	if code, _ := testkit.Get(t, "http://"+httpAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	start := time.Now()
	cancel()
	const slack = testkit.WaitTimeout // the stuck step would hold it forever; a busy machine only adds to the wait
	select {
	case err = <-done:
	case <-time.After(cfg.ShutdownTimeout + slack):
		t.Fatalf("Run still shutting down %v after the signal, with shutdown_timeout %v", time.Since(start), cfg.ShutdownTimeout)
	}
	if took := time.Since(start); took < cfg.ShutdownTimeout {
		t.Errorf("Run returned after %v, before shutdown_timeout %v, with a step still stuck", took, cfg.ShutdownTimeout)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "broker: gave up waiting") {
		t.Fatalf("Run: %v, want the broker step named as cut off at the deadline", err)
	}
	// The steps before the stuck one ran: the HTTP port is released.
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		t.Fatalf("HTTP port still held after shutdown: %v", err)
	}
	ln.Close()
}

func TestNewFailsCleanlyWhenAPortIsTaken(t *testing.T) {
	first := startBridge(t, testConfig(t))
	cfg := testConfig(t)
	cfg.HTTP.Address = first.HTTPAddr()
	_, err := New(t.Context(), cfg, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "http.address") {
		t.Fatalf("err = %v, want one naming http.address", err)
	}
}

// TestTwoBridgesOnOneDataDirectory: the second bridge stops before it
// opens any store, with one error that names the directory, the holder and
// what to set, and leaves the first one's directory as it was; once the
// first is closed, the directory is free again.
func TestTwoBridgesOnOneDataDirectory(t *testing.T) {
	cfg := sinkConfig(t, coreSink("nats://127.0.0.1:1")) // a required route's outbox in the directory too
	first, err := New(t.Context(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	second := testConfig(t)
	second.DataDir, second.Routes, second.Sinks = cfg.DataDir, cfg.Routes, cfg.Sinks
	_, err = New(t.Context(), second, zerolog.Nop())
	want := fmt.Sprintf("another bridge uses the data directory %s (pid %d); set data_dir or FIREHOSE_DATA_DIR to give this bridge its own", cfg.DataDir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("the second bridge: %v\nwant: %s", err, want)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := New(t.Context(), second, zerolog.Nop())
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	_ = again.Close(context.Background())
}

func busMessage(topic string) bus.Message {
	return bus.Message{Topic: topic, Payload: []byte("x"), QoS: 1}
}
