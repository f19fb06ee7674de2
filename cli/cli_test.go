package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/app/brokeronly"
	"github.com/opsfirehose/firehose/cli/clicore"
	"github.com/opsfirehose/firehose/internal/testkit"
)

type run struct {
	code           int
	stdout, stderr *testkit.SyncBuffer
}

func invoke(ctx context.Context, cmd func(clicore.Env, []string) int, stdin string, vars map[string]string, args ...string) run {
	r := run{stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}}
	env := clicore.Env{
		Stdin:  strings.NewReader(stdin),
		Stdout: r.stdout,
		Stderr: r.stderr,
		LookupEnv: func(k string) (string, bool) {
			v, ok := vars[k]
			return v, ok
		},
		Context: ctx,
	}
	r.code = cmd(env, args)
	return r
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheck(t *testing.T) {
	r := invoke(context.Background(), Bridge, "", nil, "check")
	if r.code != clicore.ExitOK || r.stdout.String() != "bridge: config OK (built-in defaults)\n" {
		t.Fatalf("check without config: %d %q %q", r.code, r.stdout, r.stderr)
	}
	bad := writeFile(t, "broker:\n  listeners:\n    - adress: :1883\n")
	r = invoke(context.Background(), Bridge, "", nil, "check", "--config", bad)
	if r.code != clicore.ExitUsage || !strings.Contains(r.stderr.String(), `broker.listeners[0].adress: unknown key (did you mean "address"?)`) {
		t.Fatalf("check of a bad config: %d %q", r.code, r.stderr)
	}
	// A valid config that promises more than a route can keep is warned
	// about on stderr; it is still OK.
	routed := writeFile(t, "sinks:\n  js: {type: nats, urls: [nats://127.0.0.1:4222]}\nroutes:\n  - {name: all, filters: [\"#\"], sink: js}\n")
	r = invoke(context.Background(), Bridge, "", nil, "check", "--config", routed)
	if r.code != clicore.ExitOK || !strings.Contains(r.stdout.String(), "config OK") ||
		!strings.Contains(r.stderr.String(), "bridge: warning: chef.max_body: 32MiB is over the 1MiB limit of required route all") {
		t.Fatalf("check of a routed config: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// $FIREHOSE_CONFIG stands in for --config.
	r = invoke(context.Background(), brokeronly.Broker, "", map[string]string{"FIREHOSE_CONFIG": bad}, "check")
	if r.code != clicore.ExitUsage {
		t.Fatalf("FIREHOSE_CONFIG ignored: %d %q", r.code, r.stderr)
	}
}

func TestRunRefusesABadConfigBeforeStartingAnything(t *testing.T) {
	bad := writeFile(t, "http:\n  address: 0.0.0.0:0\nbroker:\n  listeners: [{address: '127.0.0.1:0'}]\n")
	r := invoke(context.Background(), Bridge, "", nil, "--config", bad)
	if r.code != clicore.ExitUsage || !strings.Contains(r.stderr.String(), "http.allow_unauthenticated") {
		t.Fatalf("%d %q", r.code, r.stderr)
	}
	if strings.Contains(r.stderr.String(), "listener up") {
		t.Fatal("something started despite the bad config")
	}
}

func TestPasswd(t *testing.T) {
	r := invoke(context.Background(), Bridge, "s3cret\n", nil, "passwd", "--cost", "4")
	if r.code != clicore.ExitOK {
		t.Fatalf("%d %q", r.code, r.stderr)
	}
	hash := strings.TrimSpace(r.stdout.String())
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte("s3cret")); err != nil {
		t.Fatalf("printed hash %q does not verify: %v", hash, err)
	}
	if r := invoke(context.Background(), brokeronly.Broker, "", nil, "passwd"); r.code != clicore.ExitUsage {
		t.Fatalf("empty password accepted: %d", r.code)
	}
}

func TestUnknownCommand(t *testing.T) {
	r := invoke(context.Background(), Bridge, "", nil, "frobnicate")
	if r.code != clicore.ExitUsage || !strings.Contains(r.stderr.String(), `unknown command "frobnicate"`) {
		t.Fatalf("%d %q", r.code, r.stderr)
	}
}

// TestRunStopsOnCancel runs both commands until they log readiness, then
// cancels them as SIGTERM does and expects a clean exit.
func TestRunStopsOnCancel(t *testing.T) {
	cfg := writeFile(t, "log: {format: json}\nhttp: {address: '127.0.0.1:0'}\nbroker:\n  listeners: [{address: '127.0.0.1:0'}]\n"+
		"data_dir: "+t.TempDir()+"\n")
	for name, cmd := range map[string]func(clicore.Env, []string) int{"bridge": Bridge, "broker": brokeronly.Broker} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan run, 1)
			stderr := &testkit.SyncBuffer{}
			go func() {
				r := run{stdout: &testkit.SyncBuffer{}, stderr: stderr}
				r.code = cmd(clicore.Env{Stdin: strings.NewReader(""), Stdout: r.stdout, Stderr: stderr, LookupEnv: func(string) (string, bool) { return "", false }, Context: ctx}, []string{"run", "-c", cfg})
				done <- r
			}()
			testkit.Eventually(t, func() bool { return strings.Contains(stderr.String(), name+` ready"`) }, "%s to log readiness", name)
			cancel()
			select {
			case r := <-done:
				if r.code != clicore.ExitOK {
					t.Fatalf("exit %d: %s", r.code, stderr)
				}
			case <-time.After(testkit.Timeout):
				t.Fatal("did not stop after cancel")
			}
		})
	}
}

// TestPasswdFromDevNullPromptsNothing: /dev/null is a character device but
// no terminal, so passwd asks nobody for a password there; it finds none.
func TestPasswdFromDevNullPromptsNothing(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var stdout, stderr testkit.SyncBuffer
	code := Bridge(clicore.Env{Stdin: null, Stdout: &stdout, Stderr: &stderr, Context: context.Background()}, []string{"passwd"})
	if code != clicore.ExitUsage || strings.Contains(stderr.String(), "Password") || !strings.Contains(stderr.String(), "empty password") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
