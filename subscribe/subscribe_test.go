package subscribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
)

// testBroker is the embedded broker on loopback: plain TCP, and TLS with a
// throwaway CA; user "reader" may read chef/# only.
type testBroker struct {
	*broker.Broker
	tcp, tls string
	certs    testkit.TLSFiles
	password string // reader's, in a file
}

func startBroker(t *testing.T, anonymous bool) *testBroker {
	t.Helper()
	certs := testkit.TLS(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	b := testbus.Start(t, func(cfg *broker.Config) {
		cfg.AllowAnonymous = anonymous
		cfg.Listeners = append(cfg.Listeners, broker.ListenerConfig{
			Name: "mqtts", Type: broker.ListenerTCP, Address: "127.0.0.1:0", TLS: &tlsconfig.Files{CertFile: certs.CertFile, KeyFile: certs.KeyFile},
		})
		cfg.Users = []credentials.User{{Username: "reader", PasswordHash: string(hash), Subscribe: []string{"chef/#"}}}
	}).Broker
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &testBroker{Broker: b, tcp: "tcp://" + b.Addr("mqtt"), tls: "mqtts://" + b.Addr("mqtts"), certs: certs, password: pw}
}

func (b *testBroker) publish(t *testing.T, topic, payload string, retain bool) {
	t.Helper()
	if err := b.Publish(context.Background(), bus.Message{Topic: topic, Payload: []byte(payload), QoS: 1, Retain: retain}); err != nil {
		t.Fatal(err)
	}
}

// sub runs `bridge sub args...` in the background; wait returns its exit code.
func sub(t *testing.T, args ...string) (out, errOut *testkit.SyncBuffer, wait func() int) {
	t.Helper()
	out, errOut = &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- Run(ctx, args, out, errOut, nil) }()
	t.Cleanup(cancel)
	return out, errOut, func() int {
		select {
		case code := <-done:
			return code
		case <-time.After(testkit.WaitTimeout):
			cancel()
			t.Fatalf("bridge sub %v did not exit; stdout:\n%s\nstderr:\n%s", args, out, errOut)
			return -1
		}
	}
}

const status = `{"node_name":"web01","organization_name":"acme","status":"failure"}`

func TestLineFormatRetainedThenLive(t *testing.T) {
	b := startBroker(t, true)
	b.publish(t, "chef/acme/web01/status", "{\n  \"node_name\": \"web01\",\n  \"status\": \"failure\"\n}", true)
	out, errOut, wait := sub(t, "--url", b.tcp, "chef/+/+/status", "--count", "2", "--color", "never")
	testkit.Eventually(t, func() bool { return strings.Contains(out.String(), "web01") }, "the retained status")
	b.publish(t, "chef/acme/web02/status", `{"node_name":"web02","status":"success"}`, true)
	if code := wait(); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", out)
	}
	// time, topic, (retained), compact JSON
	f := strings.SplitN(lines[0], " ", 4)
	if len(f) != 4 || len(f[0]) != len("15:04:05.000") || f[1] != "chef/acme/web01/status" || f[2] != "(retained)" || f[3] != `{"node_name":"web01","status":"failure"}` {
		t.Errorf("retained line: %q", lines[0])
	}
	if !strings.HasSuffix(lines[1], ` chef/acme/web02/status {"node_name":"web02","status":"success"}`) {
		t.Errorf("live line: %q", lines[1])
	}
}

func TestColourOnlyWhenAsked(t *testing.T) {
	b := startBroker(t, true)
	b.publish(t, "chef/acme/web01/run/failure", status, true)
	out, _, wait := sub(t, "--url", b.tcp, "--count", "1", "--color", "always", "chef/#")
	if code := wait(); code != ExitOK {
		t.Fatal(code)
	}
	if !strings.Contains(out.String(), "\x1b[1;31mchef/acme/web01/run/failure\x1b[0m") {
		t.Errorf("a failure's topic in red: %q", out)
	}
	out, _, wait = sub(t, "--url", b.tcp, "--count", "1", "chef/#") // auto, and not a terminal
	if code := wait(); code != ExitOK || strings.Contains(out.String(), "\x1b[") {
		t.Errorf("colour when stdout is no terminal: %d %q", code, out)
	}
}

func TestJSONFormatForJq(t *testing.T) {
	b := startBroker(t, true)
	b.publish(t, "chef/acme/web01/status", status, true)
	b.publish(t, "gerrit/openstack/nova/comment-added", "not json", true)
	b.publish(t, "launchpad/x/bug/1", "\xff\xfe", true)
	out, errOut, wait := sub(t, "--url", b.tcp, "--format", "json", "--retained-only", "chef/#", "gerrit/#", "launchpad/#")
	if code := wait(); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", line, err)
		}
		got[m["topic"].(string)] = m
	}
	if len(got) != 3 {
		t.Fatalf("want 3 messages, got:\n%s", out)
	}
	c := got["chef/acme/web01/status"]
	if c["retained"] != true || c["qos"] != float64(0) || c["payload"].(map[string]any)["node_name"] != "web01" || c["time"] == nil {
		t.Errorf("chef: %v", c)
	}
	if got["gerrit/openstack/nova/comment-added"]["text"] != "not json" {
		t.Errorf("text payload: %v", got["gerrit/openstack/nova/comment-added"])
	}
	if got["launchpad/x/bug/1"]["base64"] != "//4=" {
		t.Errorf("binary payload: %v", got["launchpad/x/bug/1"])
	}
}

func TestPrettyAndRaw(t *testing.T) {
	b := startBroker(t, true)
	b.publish(t, "chef/acme/web01/status", status, true)
	out, _, wait := sub(t, "--url", b.tcp, "--format", "pretty", "--count", "1", "--color", "never", "chef/#")
	if code := wait(); code != ExitOK || !strings.Contains(out.String(), "chef/acme/web01/status (retained)\n{\n  \"node_name\": \"web01\",\n") {
		t.Errorf("pretty: %d %q", code, out)
	}
	out, _, wait = sub(t, "--url", b.tcp, "--format", "raw", "--count", "1", "chef/#")
	if code := wait(); code != ExitOK || out.String() != status+"\n" {
		t.Errorf("raw: %d %q", code, out)
	}
}

func TestNoRetainedSkipsLastValues(t *testing.T) {
	b := startBroker(t, true)
	b.publish(t, "chef/acme/old/status", status, true)
	out, errOut, wait := sub(t, "--url", b.tcp, "--no-retained", "--count", "1", "--qos", "1", "--color", "never", "chef/#")
	// The retained one is delivered (and skipped) right after SUBACK; keep
	// publishing until the live one gets through.
	testkit.Eventually(t, func() bool {
		b.publish(t, "chef/acme/new/run/start", `{"n":1}`, false)
		return strings.Contains(out.String(), "new")
	}, "a live message")
	if code := wait(); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out.String(), "old") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("--no-retained printed %q", out)
	}
}

func TestUnreachableBrokerExitsNonZero(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, errOut, wait := sub(t, "--url", addr, "#")
	if code := wait(); code != ExitError {
		t.Fatalf("exit %d, want %d", code, ExitError)
	}
	want := "bridge sub: cannot connect to tcp://" + addr + ": "
	if !strings.HasPrefix(errOut.String(), want) || !strings.Contains(errOut.String(), "connection refused") || !strings.Contains(errOut.String(), "is the bridge running?") {
		t.Errorf("stderr %q, want it to start %q and say why", errOut, want)
	}
}

func TestTLSAndCredentials(t *testing.T) {
	b := startBroker(t, false)
	b.publish(t, "chef/acme/web01/status", status, true)
	b.publish(t, "ansible/playbook/1/action/start", `{}`, true)

	out, errOut, wait := sub(t, "--url", b.tls, "--ca-file", b.certs.CAFile, "--username", "reader", "--password-file", b.password, "--count", "1", "chef/#")
	if code := wait(); code != ExitOK || !strings.Contains(out.String(), "chef/acme/web01/status") {
		t.Fatalf("reader over TLS: exit %d, out %q, err %q", code, out, errOut)
	}

	_, errOut, wait = sub(t, "--url", b.tls, "--ca-file", b.certs.CAFile, "--username", "reader", "--password-file", b.password, "ansible/#")
	if code := wait(); code != ExitError || !strings.Contains(errOut.String(), `refused the subscription to "ansible/#" (user reader may not read it)`) {
		t.Errorf("outside the reader's ACL: exit %d, %q", code, errOut)
	}

	_, errOut, wait = sub(t, "--url", b.tls, "--ca-file", b.certs.CAFile, "chef/#")
	if code := wait(); code != ExitError || !strings.Contains(errOut.String(), "anonymous") {
		t.Errorf("anonymous on a broker that refuses them: exit %d, %q", code, errOut)
	}

	_, errOut, wait = sub(t, "--url", b.tls, "chef/#") // the system roots do not know the test CA
	if code := wait(); code != ExitError || !strings.Contains(errOut.String(), "--ca-file") {
		t.Errorf("unknown CA: exit %d, %q", code, errOut)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--format", "yaml"},
		{"--qos", "3"},
		{"a/#/b"},
		{"--retained-only", "--no-retained"},
		{"--url", "http://x:1"},
		{"--password", "x"},
		{"--nope"},
	} {
		var out, errOut bytes.Buffer
		if code := Run(context.Background(), args, &out, &errOut, nil); code != ExitUsage || !strings.HasPrefix(errOut.String(), "bridge sub: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), []string{"--help"}, &out, &errOut, nil); code != ExitOK || !strings.Contains(errOut.String(), "--retained-only") {
		t.Errorf("--help: %d %q", code, errOut.String())
	}
}

// TestSurvivesABrokerRestart: bridge sub reconnects when the bridge
// restarts, says so on stderr, subscribes again and prints what is
// published after the restart. --count counts across the connections, and
// the retained status the new broker sends again, unchanged, is not
// printed (nor counted) twice.
func TestSurvivesABrokerRestart(t *testing.T) {
	addr := testkit.FreePort(t)
	onAddr := func(cfg *broker.Config) { cfg.Listeners[0].Address = addr }
	first := testbus.Start(t, onAddr)
	retained := bus.Message{Topic: "chef/acme/web01/status", Payload: []byte(status), QoS: 1, Retain: true}
	if err := first.Publish(context.Background(), retained); err != nil {
		t.Fatal(err)
	}
	out, errOut, wait := sub(t, "--url", "tcp://"+addr, "--count", "3", "--color", "never", "chef/#")
	testkit.Eventually(t, func() bool { return strings.Contains(out.String(), "web01/status") }, "the retained status")
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() bool { return strings.Contains(errOut.String(), "lost the connection") }, "bridge sub to notice the restart")

	second := testbus.Start(t, onAddr)
	if err := second.Publish(context.Background(), retained); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() bool { return strings.Contains(errOut.String(), "subscribed again") }, "bridge sub to subscribe again; stderr: %s", errOut)
	for _, node := range []string{"web02", "web03"} {
		if err := second.Publish(context.Background(), bus.Message{Topic: "chef/acme/" + node + "/run/start", Payload: []byte(`{"n":1}`), QoS: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if code := wait(); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "web01/status (retained)") || !strings.Contains(lines[1], "web02/run/start") || !strings.Contains(lines[2], "web03/run/start") {
		t.Fatalf("want the retained status once, then both runs after the restart; got:\n%s", out)
	}
	if want := "bridge sub: lost the connection to tcp://" + addr + ": EOF; reconnecting\n"; !strings.HasPrefix(errOut.String(), want) {
		t.Errorf("stderr %q, want it to start %q", errOut, want)
	}
}

// TestRetainedOnlyAcrossAReconnect feeds print two connections' messages as
// a broker sends them: the retained ones again after the reconnect. With
// --retained-only, each retained value is printed once, a changed one
// again, and the first live message still ends it.
func TestRetainedOnlyAcrossAReconnect(t *testing.T) {
	var out bytes.Buffer
	p := printer{w: &out, format: "raw"}
	o := options{retainedOnly: true}
	seen := &progress{retained: map[string]uint64{}}
	msg := func(topic, payload string, retained bool) received {
		return received{topic: topic, payload: []byte(payload), retained: retained}
	}
	first := make(chan received, 4)
	first <- msg("chef/a/web01/status", "1", true)
	first <- msg("chef/a/web02/status", "1", true)
	lost := make(chan error, 1)
	go func() {
		// The drop comes once both were printed: print takes messages in order.
		for len(first) > 0 {
			runtime.Gosched()
		}
		lost <- io.EOF
	}()
	if err := seen.print(context.Background(), o, &p, first, lost); !errors.As(err, new(errLost)) {
		t.Fatalf("the first connection: %v, want it lost", err)
	}
	second := make(chan received, 4)
	second <- msg("chef/a/web01/status", "1", true) // unchanged
	second <- msg("chef/a/web02/status", "2", true) // changed while we were away
	second <- msg("chef/a/web03/run/start", "live", false)
	if err := seen.print(context.Background(), o, &p, second, make(chan error)); err != nil {
		t.Fatalf("the second connection: %v", err)
	}
	if got := out.String(); got != "1\n1\n2\n" {
		t.Fatalf("printed %q, want each retained value once and the changed one again", got)
	}
}
