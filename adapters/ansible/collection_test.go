package ansible

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestCollection builds the collection with ansible-galaxy, installs it into
// a collections path of its own, and runs a playbook with the callback
// enabled by its FQCN only (no ANSIBLE_CALLBACK_PLUGINS): the events reach
// the bus.
func TestCollection(t *testing.T) {
	galaxy := testkit.RequireCommand(t, "ansible-galaxy")
	playbook := testkit.RequireCommand(t, "ansible-playbook")
	tmp := t.TempDir()
	build := exec.Command(galaxy, "collection", "build", "collection", "--output-path", tmp)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("ansible-galaxy collection build: %v\n%s", err, out)
	}
	tarballs, _ := filepath.Glob(filepath.Join(tmp, "opsfirehose-firehose-*.tar.gz"))
	if len(tarballs) != 1 {
		t.Fatalf("built %v", tarballs)
	}
	collections := filepath.Join(tmp, "collections")
	install := exec.Command(galaxy, "collection", "install", tarballs[0], "-p", collections)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("ansible-galaxy collection install: %v\n%s", err, out)
	}

	in := startIntake(t, DefaultConfig())
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	r := runAnsible(t, playbook, examples, []string{"-i", "localhost,", "-c", "local", "hello-playbook.yml"},
		"ANSIBLE_COLLECTIONS_PATH="+collections,
		"ANSIBLE_CALLBACKS_ENABLED="+CollectionFQCN,
		"FIREHOSE_URL="+strings.TrimSuffix(in.url, Path), "FIREHOSE_TOKEN="+testToken)
	if r.code != 0 || strings.Contains(r.output, "firehose:") || strings.Contains(r.output, "WARNING") {
		t.Fatalf("exit %d:\n%s", r.code, r.output)
	}
	var kinds []string
	for _, m := range in.bus.Collect(t, in.sub, barrier) {
		kinds = append(kinds, regexp.MustCompile(`^ansible/playbook/[^/]+/`).ReplaceAllString(m.Topic, ""))
	}
	want := "action/start task/localhost/OK task/localhost/OK stats/localhost action/finish/OK"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("published %v, want %s", kinds, want)
	}
}
