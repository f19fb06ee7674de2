package ingest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/testkit"
)

func readMail(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "adapters", "launchpad", "testdata", name, "input.eml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pipe runs `bridge ingest launchpad` as an MTA would: the mail on stdin,
// the exit code and stderr read back.
func pipe(t *testing.T, mail string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	code := Run(ctx, append([]string{"launchpad"}, args...), strings.NewReader(mail), &stdout, &stderr, lookup)
	return code, stdout.String(), stderr.String()
}

func TestLaunchpadPipe(t *testing.T) {
	b := newBridge(t, httpserver.Token{Name: "mta", Token: "s3cret"})
	sub := b.bus.Subscribe(t, "launchpad/#")
	srv := b.serve(t, nil)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bug := readMail(t, "bug_new")

	// Delivered: exit 0, and nothing printed, since an MTA would mail it back.
	code, stdout, stderr := pipe(t, bug, nil, "--url", srv.URL, "--token-file", tokenFile)
	if code != ExitOK || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if got := testkit.Next(t, sub); got.Topic != "launchpad/octavia/bug/1680938" {
		t.Errorf("published %+v", got)
	}
	// The same from the environment, as an aliases entry might set it; by
	// hand (--verbose, as on a terminal) it says where the mail went.
	code, stdout, stderr = pipe(t, bug, map[string]string{EnvURL: srv.URL, EnvToken: "s3cret"}, "--verbose")
	if code != ExitOK || stdout != "bridge ingest launchpad: the bridge at "+srv.URL+LaunchpadPath+" published the mail on launchpad/octavia/bug/1680938\n" {
		t.Fatalf("exit %d: %q %s", code, stdout, stderr)
	}
	testkit.Next(t, sub)

	tests := []struct {
		name string
		mail string
		args []string
		code int
		says string
	}{
		{"not from Launchpad: bounce", readMail(t, "not_launchpad"), []string{"--url", srv.URL, "--token", "s3cret"},
			ExitDataErr, "refused the mail (HTTP 400): X-Generated-By: is missing"},
		{"not a mail: bounce", "hello\n", []string{"--url", srv.URL, "--token", "s3cret"}, ExitDataErr, "HTTP 400"},
		{"wrong token: keep it queued", bug, []string{"--url", srv.URL, "--token", "old"}, ExitTempFail, "HTTP 403"},
		{"no token: keep it queued", bug, []string{"--url", srv.URL}, ExitTempFail, "HTTP 401"},
		{"launchpad not enabled: keep it queued", bug, []string{"--url", srv.URL + "/nope", "--token", "s3cret"}, ExitTempFail, "HTTP 404"},
		{"bridge down: keep it queued", bug, []string{"--url", "http://" + testkit.FreePort(t), "--token", "s3cret"}, ExitTempFail, "unreachable"},
		{"unreadable token file: keep it queued", bug, []string{"--url", srv.URL, "--token-file", "/nonexistent/token"}, ExitTempFail, "--token-file"},
		{"bad flag: usage", bug, []string{"--url", srv.URL, "--tokn", "x"}, ExitUsage, "flag provided but not defined"},
	}
	for _, tt := range tests {
		code, stdout, stderr := pipe(t, tt.mail, nil, tt.args...)
		if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.says) {
			t.Errorf("%s: exit %d, want %d; stderr %q", tt.name, code, tt.code, stderr)
		}
	}
	b.bus.Barrier(t, sub, "launchpad/barrier")
}

// TestLaunchpadPipeBusy: a bridge that cannot make the mail safe answers
// 503, and the MTA is told to retry.
func TestLaunchpadPipeBusy(t *testing.T) {
	b := newBridge(t)
	srv := b.serve(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			httpserver.WriteRetry(w, http.StatusTooManyRequests, 2*time.Second, "the bus is overloaded; retry later")
		})
	})
	code, _, stderr := pipe(t, readMail(t, "bug_new"), nil, "--url", srv.URL)
	if code != ExitTempFail || !strings.Contains(stderr, "HTTP 429") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	// A closed broker gives the real handler's 503.
	if err := b.bus.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv = b.serve(t, nil)
	code, _, stderr = pipe(t, readMail(t, "bug_new"), nil, "--url", srv.URL)
	if code != ExitTempFail || !strings.Contains(stderr, "HTTP 503") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
