package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// TestKilledBridgeLosesNothingFromItsOutbox: with NATS down, MQTT publishers
// get their PUBACKs once messages are in the outbox; the bridge is killed
// with SIGKILL, NATS comes back, the bridge restarts, and every message
// reaches the stream.
func TestKilledBridgeLosesNothingFromItsOutbox(t *testing.T) {
	bin := testkit.BuildBinary(t, "./cmd/bridge")
	srv := testnats.Start(t)
	mqttAddr, httpAddr := testkit.FreePort(t), testkit.FreePort(t)
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
log: {level: debug, format: json}
data_dir: %s
http: {address: "%s"}
broker:
  listeners: [{name: mqtt, address: "%s"}]
  users: [{username: pub, password_hash: "%s", publish: ["#"]}]
sinks:
  js:
    type: jetstream
    urls: [%s]
    confirm_timeout: 1s
    stream: {name: FIREHOSE, create: true, subjects: ["firehose.>"]}
routes:
  - {name: all, filters: ["#"], sink: js}
`, filepath.Join(dir, "data"), httpAddr, mqttAddr, hash, srv.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *testkit.Process {
		p := testkit.Start(t, "", bin, "--config", cfg)
		testkit.WaitHTTP(t, p, "http://"+httpAddr+"/healthz")
		return p
	}
	p := start()
	testkit.WaitHTTP(t, p, "http://"+httpAddr+"/readyz") // the stream exists
	srv.Stop()

	const n = 500
	pub := testkit.Connect(t, "tcp://"+mqttAddr, testkit.ClientOptions{Username: "pub", Password: "pw"})
	for i := 0; i < n; i++ {
		if err := pub.Publish(fmt.Sprintf("events/%d", i), 1, false, fmt.Sprint(i)); err != nil {
			t.Fatalf("publish %d: %v\n%s", i, err, p.Output())
		}
	}
	pub.Disconnect(0)
	p.Kill()

	srv.Restart()
	start()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var msgs uint64
	testkit.Eventually(t, func() bool {
		st, err := js.Stream(context.Background(), "FIREHOSE")
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		if err == nil {
			msgs = info.State.Msgs
		}
		return msgs >= n
	}, "the outbox replayed after the restart (%d messages in the stream)", n)
	if msgs != n {
		t.Fatalf("stream holds %d messages, want %d", msgs, n)
	}
}

// TestKilledBridgeKeepsTheFleet: with the default persistence (under
// data_dir), every retained status a publisher got its PUBACK for is there
// after a SIGKILL, for a late QoS 1 subscriber.
func TestKilledBridgeKeepsTheFleet(t *testing.T) {
	bin := testkit.BuildBinary(t, "./cmd/bridge")
	mqttAddr, httpAddr := testkit.FreePort(t), testkit.FreePort(t)
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
data_dir: %s
http: {address: "%s"}
broker:
  listeners: [{name: mqtt, address: "%s"}]
  users: [{username: pub, password_hash: "%s", publish: ["chef/#"]}]
`, filepath.Join(dir, "data"), httpAddr, mqttAddr, hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *testkit.Process {
		p := testkit.Start(t, "", bin, "--config", cfg)
		testkit.WaitHTTP(t, p, "http://"+httpAddr+"/readyz")
		return p
	}
	p := start()
	const n = 2000
	pub := testkit.Connect(t, "tcp://"+mqttAddr, testkit.ClientOptions{Username: "pub", Password: "pw"})
	for i := range n {
		if err := pub.Publish(fmt.Sprintf("chef/o/n%d/status", i), 1, true, fmt.Sprint(i)); err != nil {
			t.Fatalf("publish %d: %v\n%s", i, err, p.Output())
		}
	}
	p.Kill() // no clean stop: what was acked must be on disk already

	p = start()
	sub := testkit.Connect(t, "tcp://"+mqttAddr, testkit.ClientOptions{})
	msgs := sub.Subscribe("chef/+/+/status", 1)
	seen := map[string]bool{}
	for len(seen) < n {
		m := testkit.Next(t, msgs)
		if !m.Retained {
			t.Fatalf("%s came without Retain", m.Topic)
		}
		seen[m.Topic] = true
	}
}
