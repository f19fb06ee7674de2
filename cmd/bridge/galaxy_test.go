package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestGalaxyBuildLeavesNoUntrackedFile: the README builds the Ansible
// collection from the repository's root, where ansible-galaxy writes its
// tarball; git ignores it, so the checkout stays clean.
func TestGalaxyBuildLeavesNoUntrackedFile(t *testing.T) {
	galaxy := testkit.RequireCommand(t, "ansible-galaxy")
	git := testkit.RequireCommand(t, "git")
	root := testkit.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	work := t.TempDir()
	args := strings.Fields(strings.TrimPrefix(cmdGalaxyBuild, "ansible-galaxy "))
	args[len(args)-1] = filepath.Join(root, args[len(args)-1])
	build := exec.Command(galaxy, args...)
	build.Dir = work
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdGalaxyBuild, err, out)
	}
	built, err := filepath.Glob(filepath.Join(work, "*"))
	if err != nil || len(built) != 1 {
		t.Fatalf("the build wrote %v (%v), want one tarball", built, err)
	}
	name := filepath.Base(built[0])
	if !strings.Contains(cmdGalaxyInstall, " "+name) {
		t.Errorf("the build wrote %s, which the README's %q does not install", name, cmdGalaxyInstall)
	}
	if out, err := exec.Command(git, "-C", root, "check-ignore", "-q", name).CombinedOutput(); err != nil {
		t.Fatalf("git does not ignore %s at the repository's root, where the README builds it: %v %s", name, err, out)
	}
}
