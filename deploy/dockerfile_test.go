package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestDockerfile checks what can be checked without a Docker engine (none
// runs here): the instructions an operator relies on, and the HEALTHCHECK
// command run against a real bridge built by the same script the image's
// build stage runs.
func TestDockerfile(t *testing.T) {
	root := testkit.ModuleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines.
	df := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(b), " ")
	instr := func(name string) []string {
		var out []string
		for _, line := range strings.Split(df, "\n") {
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				out = append(out, rest)
			}
		}
		return out
	}
	expose := strings.Fields(strings.Join(instr("EXPOSE"), " "))
	for _, port := range []string{"1883", "8883", "8083", "8080"} {
		if !strings.Contains(" "+strings.Join(expose, " ")+" ", " "+port+" ") {
			t.Errorf("EXPOSE %v lacks %s", expose, port)
		}
	}
	labels := strings.Join(instr("LABEL"), " ")
	for _, l := range []string{"title", "source", "licenses", "version", "revision", "description"} {
		if !strings.Contains(labels, "org.opencontainers.image."+l+"=") {
			t.Errorf("no org.opencontainers.image.%s label", l)
		}
	}
	if !strings.Contains(strings.Join(instr("RUN"), "\n"), "scripts/build.sh") {
		t.Error("the build stage does not build with scripts/build.sh, which stamps the version")
	}
	hc := instr("HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("HEALTHCHECK: %q", hc)
	}
	_, cmdJSON, ok := strings.Cut(hc[0], "CMD ")
	var args []string
	if !ok || json.Unmarshal([]byte(cmdJSON), &args) != nil || len(args) < 2 || args[0] != "/firehose/bridge" || args[1] != "health" {
		t.Fatalf("HEALTHCHECK is not CMD [\"/firehose/bridge\", \"health\", ...]: %q", hc[0])
	}

	bin := t.TempDir()
	build := exec.Command("scripts/build.sh", bin)
	build.Dir = root
	build.Env = append(os.Environ(), "VERSION=v0.0.1-dockertest")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build.sh: %v\n%s", err, out)
	}
	bridge := filepath.Join(bin, "firehose")
	httpAddr := testkit.FreePort(t)
	env := []string{"FIREHOSE_HTTP_ADDRESS=" + httpAddr}
	healthcheck := func() (int, string) {
		cmd := exec.Command(bridge, args[1:]...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := healthcheck(); code == 0 {
		t.Fatalf("healthy with no bridge running: %s", out)
	}
	p := testkit.Start(t, t.TempDir(), "env", append(env, bridge, "--mqtt-address", testkit.FreePort(t), "--ws-address", "")...)
	testkit.WaitHTTP(t, p, "http://"+httpAddr+"/healthz")
	if code, out := healthcheck(); code != 0 || !strings.Contains(out, "/healthz 200") {
		t.Fatalf("HEALTHCHECK against a running bridge: %d %s", code, out)
	}
	if !strings.Contains(p.Output(), `v0.0.1-dockertest`) {
		t.Errorf("the bridge scripts/build.sh made does not log its stamped version:\n%s", p.Output())
	}
	_ = p.Stop()
}
