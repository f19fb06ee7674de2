package router_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestImportsNoMQTTLibrary keeps the routing core free of MQTT libraries:
// the MQTT inputs that hand it messages (mqttin) import them; the router
// takes bus.Messages. mochi-mqtt may not be among its dependencies at all.
// paho is reached through one package only, sinks, whose MQTT sink is one
// of the sinks the router delivers to; nothing else the router imports may
// bring it in. (Its tests may use MQTT clients; the package may not.)
func TestImportsNoMQTTLibrary(t *testing.T) {
	const self, sinksPkg = "github.com/opsfirehose/firehose/router", "github.com/opsfirehose/firehose/sinks"
	goCmd := testkit.RequireCommand(t, "go")
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	if _, ok := imports[self]; !ok || imports[sinksPkg] == nil {
		t.Fatalf("go list -deps lists neither the router nor sinks:\n%s", out)
	}
	mqtt := func(pkg string) bool {
		return strings.HasPrefix(pkg, "github.com/mochi-mqtt/") || strings.HasPrefix(pkg, "github.com/eclipse/paho")
	}
	for pkg := range imports {
		if strings.HasPrefix(pkg, "github.com/mochi-mqtt/") {
			t.Errorf("the router depends on %s; the embedded broker's hook belongs in mqttin", pkg)
		}
	}
	// Every package reachable from the router without passing through sinks.
	seen := map[string]string{self: ""} // package -> a package that imports it
	for queue := []string{self}; len(queue) > 0; queue = queue[1:] {
		for _, imp := range imports[queue[0]] {
			if _, ok := seen[imp]; ok || imp == sinksPkg {
				continue
			}
			seen[imp] = queue[0]
			if mqtt(imp) {
				t.Errorf("the router depends on %s, imported by %s; MQTT belongs in mqttin, which hands the router its messages", imp, queue[0])
				continue
			}
			queue = append(queue, imp)
		}
	}
}
