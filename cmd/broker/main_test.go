package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opsfirehose/firehose/app/brokeronly"
	"github.com/opsfirehose/firehose/cli/clicore"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// runBroker runs cmd/broker's command line in-process with config as its
// file and a context that is already cancelled, as if SIGTERM came at once:
// a config it accepts starts and stops cleanly, one it refuses never starts.
func runBroker(t *testing.T, config string) (code int, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errs bytes.Buffer
	env := clicore.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs, Context: ctx,
		LookupEnv: func(string) (string, bool) { return "", false },
	}
	code = brokeronly.Broker(env, []string{"run", "--config", path})
	return code, errs.String()
}

// onLoopback keeps every listener on a port the kernel chooses.
const onLoopback = "log: {format: json}\nhttp: {address: '127.0.0.1:0'}\n"

func TestExternalModeIsRefused(t *testing.T) {
	code, stderr := runBroker(t, onLoopback+`broker:
  mode: external
  external: {url: "tcp://127.0.0.1:1"}
  listeners: [{address: '127.0.0.1:0'}]
`)
	if code == clicore.ExitOK || !strings.Contains(stderr, "broker.mode") {
		t.Fatalf("exit %d, stderr:\n%s\nwant a failure naming broker.mode", code, stderr)
	}
	if strings.Contains(stderr, "broker ready") {
		t.Fatalf("the broker started:\n%s", stderr)
	}
}

func TestBridgeOnlySectionsAreNamedInAWarning(t *testing.T) {
	code, stderr := runBroker(t, onLoopback+`broker:
  listeners: [{address: '127.0.0.1:0'}]
routes: []
sinks: {}
ansible: {enabled: false}
`)
	if code != clicore.ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	var warning string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "bridge-only") {
			warning = line
		}
	}
	if !strings.Contains(warning, `"ignored":["sinks","routes","ansible"]`) {
		t.Fatalf("no warning naming sinks, routes and ansible in:\n%s", stderr)
	}
}

// TestClaimedLengthsCostNothing is issue 12's attack 1 on the real binary:
// eight CONNECTs claiming 256 MiB each, over TCP and over WebSocket, are
// closed at once and allocate next to nothing (the Go runtime's cumulative
// allocation counter, read from /metrics, grows by less than 16 MiB).
func TestClaimedLengthsCostNothing(t *testing.T) {
	bin := testkit.BuildBinary(t, "./cmd/broker")
	mqttAddr, wsAddr, httpAddr := testkit.FreePort(t), testkit.FreePort(t), testkit.FreePort(t)
	path := filepath.Join(t.TempDir(), "broker.yaml")
	config := fmt.Sprintf("log: {format: json}\nhttp: {address: %q}\nbroker:\n  listeners:\n"+
		"    - {name: mqtt, type: tcp, address: %q}\n    - {name: ws, type: websocket, address: %q}\n", httpAddr, mqttAddr, wsAddr)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testkit.Start(t, "", bin, "--config", path)
	testkit.WaitHTTP(t, p, "http://"+httpAddr+"/readyz")

	allocated := func() float64 {
		t.Helper()
		resp, err := http.Get("http://" + httpAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		s := bufio.NewScanner(resp.Body)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "go_memstats_alloc_bytes_total "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatal("no go_memstats_alloc_bytes_total in /metrics")
		return 0
	}
	claim := []byte("\x10\xff\xff\xff\x7f\x00\x04MQTT")
	before := allocated()
	var conns []net.Conn
	for range 8 {
		c, err := net.Dial("tcp", mqttAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(claim); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range 8 {
		ws, _, err := (&websocket.Dialer{Subprotocols: []string{"mqtt"}}).Dial("ws://"+wsAddr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if err := ws.WriteMessage(websocket.BinaryMessage, claim); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, ws.NetConn())
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(testkit.Timeout))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("connection %d: the broker kept it open: %v", i, err)
		}
	}
	if grew := allocated() - before; grew > 16<<20 {
		t.Fatalf("16 CONNECTs claiming 256 MiB made cmd/broker allocate %.0f MiB", grew/(1<<20))
	}
}
