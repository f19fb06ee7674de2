package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

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
	b, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	return b
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	b := startBridge(t, testConfig(t))
	base := "http://" + b.HTTPAddr()

	if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	code, body := get(t, base+"/readyz")
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || code != 200 || ready.Checks["broker"] != "ok" {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	if code, body := get(t, base+"/nope"); code != 404 || !strings.Contains(body, `"error":"no such endpoint: /nope"`) {
		t.Fatalf("unknown path: %d %s", code, body)
	}

	// A subscriber and a message, so the broker metrics have something to count.
	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	ch := sub.Subscribe("#", 1)
	if err := b.Broker().Publish(context.Background(), busMessage("test/metrics")); err != nil {
		t.Fatal(err)
	}
	testkit.Next(t, ch)

	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{
		"firehose_broker_clients_connected 1",
		"firehose_broker_messages_received_total 1",
		"firehose_broker_messages_sent_total 1",
		`firehose_broker_messages_dropped_total{reason="slow_subscriber"} 0`,
		`firehose_http_requests_total{code="200",route="GET /healthz"} 1`,
		`firehose_http_requests_total{code="200",route="GET /readyz"} 1`,
		`firehose_http_requests_total{code="404",route="unmatched"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestReadyzFailsOnceTheBrokerIsClosed(t *testing.T) {
	b := startBridge(t, testConfig(t))
	_ = b.Broker().Close()
	code, body := get(t, "http://"+b.HTTPAddr()+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"broker":"not running"`) {
		t.Fatalf("/readyz with the broker closed: %d %s", code, body)
	}
}

func TestShutdownIsOrderedIdempotentAndReleasesPorts(t *testing.T) {
	cfg := testConfig(t)
	b := startBridge(t, cfg)
	httpAddr, mqttAddr := b.HTTPAddr(), b.Broker().Addr("mqtt")
	lost := testkit.NewSignal()
	testkit.Connect(t, "tcp://"+mqttAddr, testkit.ClientOptions{OnLost: lost.Fire})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !lost.Wait() {
		t.Fatal("MQTT clients were not disconnected")
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	// Both ports are free again: a new bridge can bind the very same addresses.
	cfg.HTTP.Address = httpAddr
	cfg.Broker.Listeners = cfg.Broker.Listeners[:1]
	cfg.Broker.Listeners[0].Address = mqttAddr
	startBridge(t, cfg)
}

func TestNewFailsCleanlyWhenAPortIsTaken(t *testing.T) {
	first := startBridge(t, testConfig(t))
	cfg := testConfig(t)
	cfg.HTTP.Address = first.HTTPAddr()
	_, err := New(cfg, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "http.address") {
		t.Fatalf("err = %v, want one naming http.address", err)
	}
}

func busMessage(topic string) bus.Message {
	return bus.Message{Topic: topic, Payload: []byte("x"), QoS: 1}
}
