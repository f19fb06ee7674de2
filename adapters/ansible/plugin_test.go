package ansible

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// ansiblePython is the interpreter ansible-playbook runs on (from its #!
// line), the one that can import ansible and so the plugin.
func ansiblePython(t *testing.T) string {
	t.Helper()
	bin := testkit.RequireCommand(t, "ansible-playbook")
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		t.Fatalf("%s has no #! line", bin)
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		t.Fatalf("%s: empty #! line", bin)
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		return testkit.RequireCommand(t, fields[1])
	}
	return fields[0]
}

// TestPluginUnit runs the plugin's Python unit tests (testdata/plugin_test.py):
// truncation, censoring, hooks that never raise, and the sender's batching,
// retries, 413 splitting, full queue and flush deadline against real local
// HTTP servers.
func TestPluginUnit(t *testing.T) {
	python := ansiblePython(t)
	plugins, err := filepath.Abs("callback_plugins")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-m", "unittest", "-v", "plugin_test")
	cmd.Dir = "testdata"
	cmd.Env = append(os.Environ(), "PYTHONPATH="+plugins, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python unit tests failed: %v", err)
	}
}
