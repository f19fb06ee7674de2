package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/gobuild"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// The command line as an operator meets it: the built binaries, stamped
// with a version the way scripts/build.sh stamps them.

const stamped = "v9.8.7-test"

func buildStamped(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := gobuild.Command(context.Background(), testkit.ModuleRoot(t), pkg, out,
		"-X github.com/opsfirehose/firehose/internal/buildinfo.version="+stamped+
			" -X github.com/opsfirehose/firehose/internal/buildinfo.commit=0123456789abcdef")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// runBin runs a binary with extra environment variables and returns its
// exit code and combined output.
func runBin(t *testing.T, dir string, env []string, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestCommandLine(t *testing.T) {
	bridge := buildStamped(t, "./cmd/bridge")
	broker := buildStamped(t, "./cmd/broker")
	dir := t.TempDir()

	t.Run("--help lists every subcommand", func(t *testing.T) {
		for bin, cmds := range map[string][]string{
			bridge: {"run", "check", "health", "passwd", "version", "ingest", "ansible-plugin", "configdb (config)", "help"},
			broker: {"run", "check", "health", "passwd", "version", "help"},
		} {
			for _, arg := range []string{"--help", "-h", "help"} {
				code, out := runBin(t, dir, nil, bin, arg)
				if code != 0 {
					t.Fatalf("%s %s: exit %d\n%s", bin, arg, code, out)
				}
				for _, c := range cmds {
					if !strings.Contains(out, "\n  "+c+" ") {
						t.Errorf("%s %s does not list %q:\n%s", filepath.Base(bin), arg, c, out)
					}
				}
				for _, f := range []string{"-config", "-http-address", "-mqtt-address", "-ws-address", "--version"} {
					if !strings.Contains(out, f) {
						t.Errorf("%s %s does not list %s", filepath.Base(bin), arg, f)
					}
				}
			}
		}
		code, out := runBin(t, dir, nil, bridge, "help", "env")
		if code != 0 || !strings.Contains(out, "FIREHOSE_HTTP_ADDRESS") || !strings.Contains(out, "FIREHOSE_CONFIGDB_DSN_FILE") {
			t.Fatalf("help env: %d\n%s", code, out)
		}
	})

	t.Run("--version and version", func(t *testing.T) {
		for _, bin := range []string{bridge, broker} {
			for _, arg := range []string{"--version", "version"} {
				code, out := runBin(t, dir, nil, bin, arg)
				want := filepath.Base(bin) + " " + stamped + " (commit 0123456789ab, go"
				if code != 0 || !strings.HasPrefix(out, want) {
					t.Errorf("%s %s: %d %q, want %q...", filepath.Base(bin), arg, code, out, want)
				}
			}
		}
	})

	t.Run("an unknown command or flag is a usage error", func(t *testing.T) {
		if code, out := runBin(t, dir, nil, bridge, "frobnicate"); code != 2 || !strings.Contains(out, `unknown command "frobnicate"`) {
			t.Fatalf("%d %s", code, out)
		}
		if code, out := runBin(t, dir, nil, bridge, "--port", "1"); code != 2 || !strings.Contains(out, "-port") {
			t.Fatalf("%d %s", code, out)
		}
	})

	t.Run("flags and FIREHOSE_* variables move the listeners; health finds them", func(t *testing.T) {
		httpAddr, mqttAddr, wsAddr := testkit.FreePort(t), testkit.FreePort(t), testkit.FreePort(t)
		p := testkit.Start(t, dir, "env", "FIREHOSE_DATA_DIR="+t.TempDir(), "FIREHOSE_WS_ADDRESS="+wsAddr, "FIREHOSE_LOG_FORMAT=json",
			bridge, "--http-address", httpAddr, "--mqtt-address", mqttAddr)
		testkit.WaitHTTP(t, p, "http://"+httpAddr+"/healthz")
		testkit.WaitTCP(t, p, mqttAddr)
		testkit.WaitTCP(t, p, wsAddr)
		c := testkit.Connect(t, "tcp://"+mqttAddr, testkit.ClientOptions{})
		sys := c.Subscribe("$SYS/broker/version", 0)
		if got := testkit.Next(t, sys).Payload; got != "firehose "+stamped {
			t.Errorf("$SYS/broker/version %q", got)
		}
		c.Disconnect(0)

		code, out := runBin(t, dir, nil, bridge, "health", "--http-address", httpAddr)
		if code != 0 || !strings.Contains(out, "http://"+httpAddr+"/healthz 200") {
			t.Errorf("health: %d %s", code, out)
		}
		code, out = runBin(t, dir, []string{"FIREHOSE_HTTP_ADDRESS=" + httpAddr}, bridge, "health", "--ready")
		if code != 0 || !strings.Contains(out, "/readyz 200") {
			t.Errorf("health --ready with FIREHOSE_HTTP_ADDRESS: %d %s", code, out)
		}
		code, out = runBin(t, dir, nil, bridge, "health", "--url", "http://"+httpAddr)
		if code != 0 {
			t.Errorf("health --url: %d %s", code, out)
		}

		_, metrics := testkit.Get(t, "http://"+httpAddr+"/metrics")
		if !strings.Contains(metrics, `firehose_build_info{goversion="go`) || !strings.Contains(metrics, `version="`+stamped+`"} 1`) {
			t.Errorf("no firehose_build_info with the version in /metrics")
		}
		if err := p.Stop(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Output())
		}
		if !strings.Contains(p.Output(), `"version":"`+stamped+`"`) || !strings.Contains(p.Output(), `"message":"starting bridge"`) {
			t.Errorf("the start-up log does not give the version:\n%s", p.Output())
		}

		// Nothing listens there now: health fails.
		if code, out := runBin(t, dir, nil, bridge, "health", "--http-address", httpAddr); code != 1 {
			t.Errorf("health of a stopped bridge: %d %s", code, out)
		}
	})

	t.Run("flags win over variables, variables over the file", func(t *testing.T) {
		fileAddr, envAddr, flagAddr := testkit.FreePort(t), testkit.FreePort(t), testkit.FreePort(t)
		cfg := filepath.Join(t.TempDir(), "broker.yaml")
		if err := os.WriteFile(cfg, []byte("http: {address: '"+fileAddr+"'}\nbroker:\n  listeners: [{name: mqtt, address: '127.0.0.1:0'}]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"FIREHOSE_HTTP_ADDRESS=" + envAddr}
		p := testkit.Start(t, dir, "env", append(env, broker, "--config", cfg, "--ws-address", "")...)
		testkit.WaitHTTP(t, p, "http://"+envAddr+"/healthz")
		if code, out := runBin(t, dir, env, broker, "health", "--config", cfg); code != 0 {
			t.Errorf("broker health with the same settings: %d %s", code, out)
		}
		_ = p.Stop()

		p = testkit.Start(t, dir, "env", append(env, broker, "--config", cfg, "--http-address", flagAddr)...)
		testkit.WaitHTTP(t, p, "http://"+flagAddr+"/healthz")
		_ = p.Stop()
	})

	t.Run("a bad override is named in the error", func(t *testing.T) {
		code, out := runBin(t, dir, []string{"FIREHOSE_SHUTDOWN_TIMEOUT=soon"}, bridge, "check")
		if code != 2 || !strings.Contains(out, "shutdown_timeout (from FIREHOSE_SHUTDOWN_TIMEOUT)") {
			t.Errorf("%d %s", code, out)
		}
		code, out = runBin(t, dir, nil, bridge, "check", "--mqtt-address", "nowhere")
		if code != 2 || !strings.Contains(out, "(from --mqtt-address)") {
			t.Errorf("%d %s", code, out)
		}
		// A FIREHOSE_ variable that is no key (the ingest relay's) is not an override.
		code, out = runBin(t, dir, []string{"FIREHOSE_URL=http://x", "FIREHOSE_TOKEN=t"}, bridge, "check")
		if code != 0 {
			t.Errorf("%d %s", code, out)
		}
	})

	t.Run("ansible-plugin puts the plugin where ANSIBLE_CALLBACK_PLUGINS finds it", func(t *testing.T) {
		home := t.TempDir()
		code, out := runBin(t, dir, []string{"HOME=" + home, "XDG_DATA_HOME="}, bridge, "ansible-plugin")
		want := filepath.Join(home, ".local/share/firehose/ansible/callback_plugins")
		if code != 0 || strings.TrimSpace(out) != want {
			t.Fatalf("%d %q, want %s", code, out, want)
		}
		got, err := os.ReadFile(filepath.Join(want, "firehose.py"))
		if err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(filepath.Join(testkit.ModuleRoot(t), "adapters/ansible/collection/plugins/callback/firehose.py"))
		if err != nil || string(got) != string(src) {
			t.Fatalf("the written plugin differs from the collection's (%v)", err)
		}
		other := filepath.Join(t.TempDir(), "my plugins")
		code, out = runBin(t, dir, nil, bridge, "ansible-plugin", "--dir", other, "--env")
		if code != 0 || !strings.Contains(out, "export ANSIBLE_CALLBACK_PLUGINS='"+other+"'\nexport ANSIBLE_CALLBACKS_ENABLED=firehose\n") {
			t.Fatalf("%d %q", code, out)
		}
	})

	t.Run("config.example.yaml passes check as its header says", func(t *testing.T) {
		example := filepath.Join(testkit.ModuleRoot(t), "config.example.yaml")
		code, out := runBin(t, dir, nil, bridge, "check", "--syntax-only", "--config", example)
		if code != 0 || !strings.Contains(out, "config syntax OK") {
			t.Fatalf("%d %s", code, out)
		}
		// Without --syntax-only, each problem of this machine (no secrets,
		// no certificates) is reported once.
		_, out = runBin(t, dir, nil, bridge, "check", "--config", example)
		seen := map[string]bool{}
		for _, line := range strings.Split(out, "\n")[1:] {
			key, _, _ := strings.Cut(strings.TrimSpace(line), ": ")
			if key == "" {
				continue
			}
			base := strings.TrimSuffix(key, "_file")
			if seen[base] {
				t.Errorf("%s is reported twice:\n%s", base, out)
			}
			seen[base] = true
		}
	})
}
