package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/cli"
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
	env := cli.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs, Context: ctx,
		LookupEnv: func(string) (string, bool) { return "", false },
	}
	code = cli.Broker(env, []string{"run", "--config", path})
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
	if code == cli.ExitOK || !strings.Contains(stderr, "broker.mode") {
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
	if code != cli.ExitOK {
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
