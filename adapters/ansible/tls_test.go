package ansible

import (
	"crypto/tls"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestPluginTLS runs a one-task playbook against the intake behind HTTPS
// with a throwaway CA: the plugin's ca_file option makes it trust the
// bridge; without it the certificate is refused, nothing is published and
// the run ends with the one warning; validate_certs=false trusts anything.
func TestPluginTLS(t *testing.T) {
	bin := testkit.RequireCommand(t, "ansible-playbook")
	files := testkit.TLS(t)
	in := startIntake(t, DefaultConfig())
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(in.http.Config.Handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	// The refused handshakes of "unknown CA" are expected.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	plugins, err := filepath.Abs("callback_plugins")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"inventory.ini": "local ansible_connection=local ansible_python_interpreter=\"{{ ansible_playbook_python }}\"\n",
		"play.yml":      "- name: tls play\n  hosts: all\n  gather_facts: false\n  tasks:\n    - name: ping\n      ansible.builtin.ping:\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(t *testing.T, env ...string) playbookRun {
		t.Helper()
		env = append([]string{
			"ANSIBLE_CALLBACK_PLUGINS=" + plugins, "ANSIBLE_CALLBACKS_ENABLED=firehose",
			"FIREHOSE_URL=" + srv.URL + Path, "FIREHOSE_TOKEN=" + testToken, "FIREHOSE_FLUSH_TIMEOUT=1",
		}, env...)
		r := runAnsible(t, bin, dir, []string{"-i", "inventory.ini", "play.yml"}, env...)
		if r.code != 0 {
			t.Fatalf("exit %d:\n%s", r.code, r.output)
		}
		return r
	}
	// start, the ping, stats and finish
	const events = 4

	for _, tc := range []struct{ name, env string }{
		{"ca_file", "FIREHOSE_CA_FILE=" + files.CAFile},
		{"validate_certs off", "FIREHOSE_VALIDATE_CERTS=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.env)
			if strings.Contains(r.output, "firehose") {
				t.Fatalf("the plugin warned:\n%s", r.output)
			}
			got := in.bus.Collect(t, in.sub, barrier)
			if len(got) != events || !strings.HasSuffix(got[1].Topic, "/task/local/OK") {
				t.Fatalf("got %d messages: %v", len(got), got)
			}
		})
	}
	t.Run("unknown CA", func(t *testing.T) {
		r := run(t)
		if !strings.Contains(r.output, "firehose: 4 event(s) were not delivered") ||
			!strings.Contains(r.output, "CERTIFICATE_VERIFY_FAILED") {
			t.Fatalf("want the one warning naming the certificate failure:\n%s", r.output)
		}
		in.bus.Barrier(t, in.sub, barrier)
	})
}
