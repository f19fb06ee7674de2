package brokeronly

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/config/configcore"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/testkit"
)

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

// brokerOnlyConfig is cmd/broker's config as a file gives it: MQTT and HTTP
// on loopback ports chosen by the kernel, plus extra top-level YAML.
func brokerOnlyConfig(t *testing.T, extra string) Config {
	t.Helper()
	cfg := Default()
	doc := "http: {address: '127.0.0.1:0'}\nbroker:\n  listeners: [{name: mqtt, address: '127.0.0.1:0'}]\n" + extra
	if err := Parse([]byte(doc), &cfg, configcore.Options{LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestBrokerOnlyServesHealthReadinessAndMetrics(t *testing.T) {
	s, err := New(brokerOnlyConfig(t, ""), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	httpAtBrokerClose := probeHTTPAtBrokerClose(t, s.Broker(), s.HTTPAddr())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	base := "http://" + s.HTTPAddr()

	if code, body := testkit.Get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := testkit.Get(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"broker":"ok"`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	sub := testkit.Connect(t, "tcp://"+s.Broker().Addr("mqtt"), testkit.ClientOptions{})
	ch := sub.Subscribe("#", 1)
	if err := s.Broker().Publish(context.Background(), bus.Message{Topic: "test/metrics", Payload: []byte("x"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	testkit.Next(t, ch)
	// The counters move after the delivery and the answer, which the client
	// may see first.
	wants := []string{
		"firehose_broker_clients_connected 1",
		"firehose_broker_messages_sent_total 1",
		`firehose_broker_messages_dropped_total{reason="slow_subscriber"} 0`,
		`firehose_http_requests_total{code="200",route="GET /healthz"} 1`,
		"go_goroutines ",
	}
	testkit.EventuallyContains(t, base+"/metrics", wants...)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case accepting := <-httpAtBrokerClose:
		if accepting {
			t.Fatal("the HTTP listener still accepted connections when the broker closed")
		}
	default:
		t.Fatal("the broker was not closed by Run")
	}
}

func TestBrokerOnlyHTTPAddress(t *testing.T) {
	if DefaultHTTPAddress == httpserver.DefaultConfig().Address {
		t.Fatalf("cmd/broker's default HTTP address %s is the bridge's", DefaultHTTPAddress)
	}
	noFile := Default()
	if got := noFile.HTTP.Address; got != DefaultHTTPAddress {
		t.Errorf("no config: %s, want %s", got, DefaultHTTPAddress)
	}
	other := Default()
	if err := Parse([]byte("http: {read_timeout: 5s}\n"), &other, configcore.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := other.HTTP; got.Address != DefaultHTTPAddress || got.ReadTimeout != 5*time.Second {
		t.Errorf("http without address: %+v, want %s and the file's read_timeout", got, DefaultHTTPAddress)
	}
	given := brokerOnlyConfig(t, "")
	if got := given.HTTP.Address; got != "127.0.0.1:0" {
		t.Errorf("http.address given: %s, want 127.0.0.1:0", got)
	}
}

func TestBrokerOnlyRefusesExternalMode(t *testing.T) {
	cfg := brokerOnlyConfig(t, "")
	cfg.Broker.Mode = broker.ModeExternal
	cfg.Broker.External = &broker.External{URL: "tcp://127.0.0.1:1", ClientID: "x", ShareGroup: "firehose", ConfirmTimeout: time.Second}
	s, err := New(cfg, zerolog.Nop())
	if err == nil {
		_ = s.Close(context.Background())
		t.Fatal("cmd/broker accepted broker.mode external")
	}
	if !strings.Contains(err.Error(), "broker.mode") {
		t.Fatalf("err = %v, want one naming broker.mode", err)
	}
}

func TestBrokerOnlyWarnsAboutBridgeOnlySettings(t *testing.T) {
	for _, tt := range []struct {
		extra, want string
	}{
		{"", ""},
		{"routes: []\nchef: {enabled: false}\ndata_dir: " + t.TempDir() + "\n", `"ignored":["routes","data_dir","chef"]`},
	} {
		var logs bytes.Buffer
		s, err := New(brokerOnlyConfig(t, tt.extra), zerolog.New(&logs).Level(zerolog.WarnLevel))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := logs.String()
		switch {
		case tt.want == "" && strings.Contains(got, "ignored"):
			t.Errorf("a broker-only config warned: %s", got)
		case tt.want != "" && (!strings.Contains(got, tt.want) || !strings.Contains(got, `"level":"warn"`)):
			t.Errorf("config with %q logged %s, want a warning with %s", tt.extra, got, tt.want)
		}
	}
}
