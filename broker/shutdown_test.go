package broker

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestShutdownClosesMQTT311ClientsPlainly: 3.1.1 has no server DISCONNECT,
// so a 3.1.1 client sees the connection end with nothing before it, while
// an MQTT 5 client gets DISCONNECT 0x8B "server shutting down".
func TestShutdownClosesMQTT311ClientsPlainly(t *testing.T) {
	b, _ := start(t, testConfig())
	old := testkit.DialRaw(t, b.Addr("mqtt"))
	if ack := old.Connect(4, testkit.ConnectOptions{ClientID: "sub311", Clean: true}); ack.ReasonCode != 0 {
		t.Fatalf("3.1.1 CONNACK %#x", ack.ReasonCode)
	}
	old.Subscribe(1, "chef/#", 1)
	v5 := testkit.Dial5(t, b.Addr("mqtt"), "", "")
	v5.Subscribe(1, "chef/#", 1)

	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := old.NextErr()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the 3.1.1 client read %v, want EOF and no DISCONNECT before it", err)
	}
	got := v5.WaitClosed()
	if len(got) != 1 || got[0].FixedHeader.Type != packets.Disconnect || got[0].ReasonCode != packets.ErrServerShuttingDown.Code {
		t.Fatalf("the MQTT 5 client got %+v, want one DISCONNECT 0x8B", got)
	}
}

// TestSessionTakeoverClosesMQTT311ClientsPlainly: the same holds when a
// 3.1.1 client's session is taken over by a new connection of its owner.
func TestSessionTakeoverClosesMQTT311ClientsPlainly(t *testing.T) {
	b, _ := start(t, testConfig())
	first := testkit.DialRaw(t, b.Addr("mqtt"))
	first.Connect(4, testkit.ConnectOptions{ClientID: "watcher"})
	second := testkit.DialRaw(t, b.Addr("mqtt"))
	second.Connect(4, testkit.ConnectOptions{ClientID: "watcher"})
	if _, err := first.NextErr(); !errors.Is(err, io.EOF) {
		t.Fatalf("the client taken over read %v, want EOF and no DISCONNECT before it", err)
	}
}

// TestMosquittoSubOutlivesARestart is issue 26's report: mosquitto_sub
// (3.1.1 by default) ended with "A network protocol error occurred" when the
// broker stopped. Now it reconnects to the restarted broker, resubscribes
// and prints what is published after the restart.
func TestMosquittoSubOutlivesARestart(t *testing.T) {
	subBin := testkit.RequireCommand(t, "mosquitto_sub")
	cfg := testConfig()
	cfg.Listeners[0].Address = testkit.FreePort(t)
	b, _ := start(t, cfg)
	host, port, _ := net.SplitHostPort(b.Addr("mqtt"))
	sub := exec.Command(subBin, "-h", host, "-p", port, "-t", "demo/#", "-C", "1", "-v")
	out, stderr := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	sub.Stdout, sub.Stderr = out, stderr
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = sub.Wait(); close(exited) }()
	t.Cleanup(func() { _ = sub.Process.Kill(); <-exited })
	testkit.Eventually(t, func() bool { return atomic.LoadInt64(&b.server.Info.Subscriptions) > 0 }, "mosquitto_sub to subscribe")
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	again, err := New(cfg, Options{Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Close(context.Background()) })
	testkit.Eventually(t, func() bool {
		select {
		case <-exited:
			return true // it failed: said below
		default:
		}
		return atomic.LoadInt64(&again.server.Info.Subscriptions) > 0
	}, "mosquitto_sub to subscribe again")
	if err := again.Publish(context.Background(), bus.Message{Topic: "demo/after", Payload: []byte("restarted"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	testkit.Next(t, exited)
	if waitErr != nil {
		t.Fatalf("mosquitto_sub: %v; stderr: %s", waitErr, stderr.String())
	}
	if got := strings.TrimSpace(out.String()); got != "demo/after restarted" {
		t.Fatalf("mosquitto_sub printed %q (stderr %q)", got, stderr.String())
	}
}
