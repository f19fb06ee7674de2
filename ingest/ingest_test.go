package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/gerrit"
	"github.com/opsfirehose/firehose/adapters/launchpad"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// bridge is the part of a running bridge the relays talk to: the real
// gerrit and launchpad handlers on a real HTTP server, publishing to a real
// broker.
type bridge struct {
	bus *testbus.Bus
	mux *http.ServeMux
}

func newBridge(t *testing.T, tokens ...httpserver.Token) *bridge {
	t.Helper()
	b := &bridge{bus: testbus.Start(t), mux: http.NewServeMux()}
	g, err := gerrit.New(gerrit.DefaultConfig(), gerrit.Options{Publisher: b.bus, Logger: zerolog.Nop(), Tokens: httpserver.NewTokens(tokens)})
	if err != nil {
		t.Fatal(err)
	}
	g.Register(b.mux)
	l, err := launchpad.New(launchpad.DefaultConfig(), launchpad.Options{Publisher: b.bus, Logger: zerolog.Nop(), Tokens: httpserver.NewTokens(tokens)})
	if err != nil {
		t.Fatal(err)
	}
	l.Register(b.mux)
	return b
}

// serve starts the bridge's HTTP server, in front of wrap when given.
func (b *bridge) serve(t *testing.T, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	var h http.Handler = b.mux
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// refusingPort binds a loopback TCP socket without listening on it: a
// connection to addr is refused, as by a bridge that is down, and no other
// test can take the port, until listen makes the socket a listener.
func refusingPort(t *testing.T) (addr string, listen func() net.Listener) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "refusing port")
	t.Cleanup(func() { _ = f.Close() })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	return addr, func() net.Listener {
		if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
			t.Fatal(err)
		}
		ln, err := net.FileListener(f) // a copy of the socket: f is closed at cleanup
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
}

// script writes a shell script that plays one of runs per start of the
// command (the last one for every later start), and returns the --exec
// command and the directory where run N records its pid in pid.N.
func script(t *testing.T, runs ...string) (cmd, dir string) {
	t.Helper()
	dir = t.TempDir()
	var s strings.Builder
	s.WriteString("n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo $$ > pid.tmp; mv pid.tmp pid.$n\ncase $n in\n")
	for i, run := range runs {
		label := strconv.Itoa(i + 1)
		if i == len(runs)-1 {
			label = "*"
		}
		s.WriteString(label + ") " + run + ";;\n")
	}
	s.WriteString("esac\n")
	path := filepath.Join(dir, "stream.sh")
	if err := os.WriteFile(path, []byte(s.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return "cd '" + dir + "' && exec sh stream.sh", dir
}

func writeLines(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func testConfig(command string) gerritConfig {
	return gerritConfig{command: command, buffer: 100, batchMax: 10, batchBytes: 1 << 20, maxLine: 1 << 20,
		backoffMin: 5 * time.Millisecond, backoffMax: 50 * time.Millisecond, drainTimeout: testkit.Timeout}
}

func testClient(t *testing.T, url string, token string) *client {
	t.Helper()
	cf := clientFlags{url: url, token: token, timeout: testkit.Timeout}
	cl, err := cf.newClient(GerritPath)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// startRelay runs a relay until the test ends; stop cancels it and returns
// run's error.
func startRelay(t *testing.T, cfg gerritConfig, cl *client) (g *gerritRelay, logs *testkit.SyncBuffer, stop func() error) {
	t.Helper()
	logs = &testkit.SyncBuffer{}
	g = newGerritRelay(cfg, cl, zerolog.New(logs))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(2 * testkit.Timeout):
				t.Fatal("the relay did not stop")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return g, logs, stop
}

const (
	eventNova    = `{"type":"patchset-created","project":"openstack/nova","change":{"number":1}}`
	eventOctavia = `{"type":"comment-added","change":{"project":"openstack/octavia","number":2}}`
	eventTag     = `{"type":"ref-updated","refUpdate":{"project":"openstack/nova","refName":"refs/tags/1.0"}}`
)

// TestGerritRelayRestartsAndSkipsBadLines runs a real command that prints
// events, a bad line and Gerrit's dropped-output notice, fails, prints more,
// exits, and then blocks; the relay restarts it each time and delivers
// every event once.
func TestGerritRelayRestartsAndSkipsBadLines(t *testing.T) {
	b := newBridge(t)
	sub := b.bus.Subscribe(t, "gerrit/#")
	srv := b.serve(t, nil)
	cmd, dir := script(t,
		"cat run1; echo 'Permission denied, please try again.' >&2; exit 255",
		"cat run2; exit 0",
		"exec sleep 600")
	writeLines(t, dir, "run1", eventNova, "this is not json", "", `{"type":"dropped-output"}`, eventOctavia)
	writeLines(t, dir, "run2", eventTag)
	g, logs, stop := startRelay(t, testConfig(cmd), testClient(t, srv.URL, ""))

	for _, want := range []testkit.Received{
		{Topic: "gerrit/openstack/nova/patchset-created", Payload: eventNova, QoS: 1},
		{Topic: "gerrit/openstack/octavia/comment-added", Payload: eventOctavia, QoS: 1},
		{Topic: "gerrit/openstack/nova/ref-updated", Payload: eventTag, QoS: 1},
	} {
		if got := testkit.Next(t, sub); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
	testkit.Eventually(t, func() bool { return g.stats.Starts.Load() == 3 }, "the third start")
	// The third run's pid, once its shell has written it (pid.N appears
	// whole: it is renamed into place).
	var pid int
	testkit.Eventually(t, func() bool {
		text, err := os.ReadFile(filepath.Join(dir, "pid.3"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(text)))
		return err == nil && pid > 0
	}, "the third run to write its pid")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the command (pid %d) is still running after the relay stopped: %v", pid, err)
	}
	s := &g.stats
	if s.Restarts.Load() != 2 || s.BadLines.Load() != 1 || s.DroppedOutput.Load() != 1 || s.Posted.Load() != 3 || s.Lost.Load() != 0 {
		t.Errorf("restarts=%d bad=%d dropped=%d posted=%d lost=%d", s.Restarts.Load(), s.BadLines.Load(),
			s.DroppedOutput.Load(), s.Posted.Load(), s.Lost.Load())
	}
	out := logs.String()
	for _, want := range []string{"gerrit stream command exited; restarting", "exit status 255", "Permission denied, please try again.",
		`"text":"this is not json"`, `"line":2`, "dropped events for this stream", `"ran_for_ms":`, `"restart_in_ms":`} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"error":"line 1`) {
		t.Errorf("a skipped line's log names two different line numbers:\n%s", out)
	}
	if strings.Count(out, "restarting") != 2 {
		t.Errorf("want 2 restarts logged:\n%s", out)
	}
}

// TestGerritRelayBridgeBusy answers 503 with Retry-After to the first post:
// the relay waits as told and posts again, and nothing is lost or doubled.
func TestGerritRelayBridgeBusy(t *testing.T) {
	b := newBridge(t)
	sub := b.bus.Subscribe(t, "gerrit/#")
	var posts atomic.Int32
	srv := b.serve(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if posts.Add(1) == 1 {
				httpserver.WriteRetry(w, http.StatusServiceUnavailable, time.Second, "a required sink is down")
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	cmd, dir := script(t, "cat events; exec sleep 600")
	writeLines(t, dir, "events", eventNova, eventOctavia)
	g, logs, _ := startRelay(t, testConfig(cmd), testClient(t, srv.URL, ""))
	got := []string{testkit.Next(t, sub).Payload, testkit.Next(t, sub).Payload}
	if got[0] != eventNova || got[1] != eventOctavia {
		t.Errorf("got %q", got)
	}
	b.bus.Barrier(t, sub, "gerrit/barrier/x")
	if g.stats.FailedPosts.Load() < 1 || !strings.Contains(logs.String(), `"retry_in_ms":1000`) {
		t.Errorf("failed posts %d; logs:\n%s", g.stats.FailedPosts.Load(), logs)
	}
}

// TestGerritRelayBridgeDown starts the relay before the bridge listens: the
// events wait in the buffer and go through once the bridge is up.
func TestGerritRelayBridgeDown(t *testing.T) {
	addr, listen := refusingPort(t)
	cmd, dir := script(t, "cat events; exec sleep 600")
	writeLines(t, dir, "events", eventNova, eventOctavia, eventTag)
	g, logs, _ := startRelay(t, testConfig(cmd), testClient(t, "http://"+addr, ""))
	testkit.Eventually(t, func() bool { return g.stats.FailedPosts.Load() >= 2 }, "a refused connection")
	if g.stats.Events.Load() != 3 || !strings.Contains(logs.String(), "the bridge is unreachable; retrying") {
		t.Fatalf("events %d; logs:\n%s", g.stats.Events.Load(), logs)
	}

	b := newBridge(t)
	sub := b.bus.Subscribe(t, "gerrit/#")
	srv := httptest.NewUnstartedServer(b.mux)
	srv.Listener.Close()
	srv.Listener = listen()
	srv.Start()
	t.Cleanup(srv.Close)
	for _, want := range []string{eventNova, eventOctavia, eventTag} {
		if got := testkit.Next(t, sub); got.Payload != want {
			t.Errorf("got %q, want %q", got.Payload, want)
		}
	}
	b.bus.Barrier(t, sub, "gerrit/barrier/x")
}

// TestGerritRelayDropsOnlyRefusedEvents sends an event the bridge refuses
// (its project cannot be a topic) among good ones.
func TestGerritRelayDropsOnlyRefusedEvents(t *testing.T) {
	b := newBridge(t)
	sub := b.bus.Subscribe(t, "gerrit/#")
	srv := b.serve(t, nil)
	huge := `{"type":"x","project":"a/` + strings.Repeat("b", 2000) + `"}`
	cmd, dir := script(t, "cat events; exec sleep 600")
	writeLines(t, dir, "events", eventNova, huge, eventOctavia, eventTag)
	g, logs, _ := startRelay(t, testConfig(cmd), testClient(t, srv.URL, ""))
	testkit.Eventually(t, func() bool { return g.stats.Posted.Load()+g.stats.Rejected.Load() == 4 }, "every event handled")
	got := b.bus.Collect(t, sub, "gerrit/barrier/x")
	if len(got) != 3 || got[0].Payload != eventNova || got[1].Payload != eventOctavia || got[2].Payload != eventTag {
		t.Errorf("got %+v", got)
	}
	if g.stats.Rejected.Load() != 1 || !strings.Contains(logs.String(), "the bridge refused an event; dropping it") {
		t.Errorf("rejected %d; logs:\n%s", g.stats.Rejected.Load(), logs)
	}
}

// TestGerritRelayToken re-reads --token-file after a 403, so a rotated
// token is picked up without a restart.
func TestGerritRelayToken(t *testing.T) {
	b := newBridge(t, httpserver.Token{Name: "relay", Token: "new-token"})
	sub := b.bus.Subscribe(t, "gerrit/#")
	srv := b.serve(t, nil)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cf := clientFlags{url: srv.URL, tokenFile: tokenFile, timeout: testkit.Timeout}
	cl, err := cf.newClient(GerritPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd, dir := script(t, "cat events; exec sleep 600")
	writeLines(t, dir, "events", eventNova)
	g, logs, _ := startRelay(t, testConfig(cmd), cl)
	testkit.Eventually(t, func() bool { return strings.Contains(logs.String(), "the bridge refused the token") }, "a refused token")
	if err := os.WriteFile(tokenFile, []byte("new-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Next(t, sub); got.Payload != eventNova {
		t.Errorf("got %+v", got)
	}
	testkit.Eventually(t, func() bool { return g.stats.Posted.Load() == 1 }, "the post counted")
}

// TestRunGerritLosesEventsOnlyAfterDrain runs the whole command line with
// no bridge at all: on SIGTERM it keeps trying for --drain-timeout, then
// says how many events it lost and exits 1.
func TestRunGerritLosesEventsOnlyAfterDrain(t *testing.T) {
	addr, _ := refusingPort(t) // no bridge, ever
	cmd, dir := script(t, "cat events; exec sleep 600")
	writeLines(t, dir, "events", eventNova, eventOctavia)
	stderr := &testkit.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"gerrit", "--exec", cmd, "--url", "http://" + addr, "--log-format", "json",
			"--backoff-min", "10ms", "--backoff-max", "20ms", "--drain-timeout", "50ms"}, nil, &testkit.SyncBuffer{}, stderr, nil)
	}()
	testkit.Eventually(t, func() bool { return strings.Contains(stderr.String(), "the bridge is unreachable") }, "a refused connection")
	cancel()
	select {
	case code := <-done:
		if code != ExitFailure || !strings.Contains(stderr.String(), `"lost":2`) {
			t.Errorf("exit %d:\n%s", code, stderr)
		}
	case <-time.After(2 * testkit.Timeout):
		t.Fatal("Run did not return")
	}
}

func TestReadLine(t *testing.T) {
	in := "short\n" + strings.Repeat("x", 100) + "\nlast without newline"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	var got []string
	var long []bool
	for {
		line, tooLong, err := readLine(br, nil, 50)
		if len(line) > 0 || tooLong {
			got, long = append(got, string(line)), append(long, tooLong)
		}
		if err != nil {
			break
		}
	}
	if len(got) != 3 || got[0] != "short" || !long[1] || got[1] != "" || got[2] != "last without newline" {
		t.Errorf("%q %v", got, long)
	}
	// A line of exactly max bytes is kept.
	line, tooLong, _ := readLine(bufio.NewReaderSize(strings.NewReader(strings.Repeat("y", 50)+"\n"), 16), nil, 50)
	if tooLong || len(line) != 50 {
		t.Errorf("%d bytes, tooLong=%v", len(line), tooLong)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"5":                             5 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Fri, 02 Jan 2026 03:04:35 GMT": 30 * time.Second,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":             "http://127.0.0.1:8080/gerrit/v1/events",
		"https://bridge.example.org/":       "https://bridge.example.org/gerrit/v1/events",
		"https://proxy.example.org/fh/in":   "https://proxy.example.org/fh/in",
		"ftp://x":                           "",
		"127.0.0.1:8080":                    "",
		"http://":                           "",
		"https://bridge.example.org:8443/?": "https://bridge.example.org:8443/gerrit/v1/events?",
	} {
		got, err := endpointURL(in, GerritPath)
		if (want == "") != (err != nil) || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
}

func TestRunUsage(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	_ = os.WriteFile(tokenFile, []byte("t"), 0o600)
	tests := []struct {
		args []string
		code int
		says string
	}{
		{nil, ExitUsage, "Usage"},
		{[]string{"help"}, ExitOK, ""},
		{[]string{"jenkins"}, ExitUsage, `unknown source "jenkins"`},
		{[]string{"gerrit"}, ExitUsage, "--exec is required"},
		{[]string{"gerrit", "--exec", "true", "--url", "localhost:8080"}, ExitUsage, "want http(s)://host:port"},
		{[]string{"gerrit", "--exec", "true", "--token", "a", "--token-file", tokenFile}, ExitUsage, "not both"},
		{[]string{"gerrit", "--exec", "true", "--backoff-min", "0s"}, ExitUsage, "--backoff-min"},
		{[]string{"gerrit", "--exec", "true", "--log-level", "loud"}, ExitUsage, "level"},
		{[]string{"gerrit", "--exec", "true", "extra"}, ExitUsage, "unexpected argument"},
		{[]string{"gerrit", "-h"}, ExitOK, "-exec"},
		{[]string{"launchpad", "--no-such-flag"}, ExitUsage, "no-such-flag"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr, nil)
		if code != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.says) {
			t.Errorf("%v: exit %d, want %d saying %q:\n%s%s", tt.args, code, tt.code, tt.says, stdout.String(), stderr.String())
		}
	}
	// A token from the environment is used, but never shown as a default.
	var stderr bytes.Buffer
	env := func(k string) (string, bool) { return map[string]string{EnvToken: "env-s3cret"}[k], k == EnvToken }
	if code := Run(context.Background(), []string{"gerrit", "-h"}, nil, &stderr, &stderr, env); code != ExitOK || strings.Contains(stderr.String(), "env-s3cret") {
		t.Errorf("exit %d, help shows the token:\n%s", code, stderr.String())
	}
}
