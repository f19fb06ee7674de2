package router_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestImportsNoClientLibrary keeps the routing core free of MQTT and NATS
// libraries: the MQTT inputs that hand it messages (mqttin) import them,
// and so do the sinks (sinks/mqtt, sinks/nats), which app hands the router
// as sinks.Sinks that address their messages themselves; the router takes
// bus.Messages. Neither mochi-mqtt, paho nor nats.go may be among its
// dependencies, directly or through any package it imports. (Its tests may
// use them; the package may not.)
func TestImportsNoClientLibrary(t *testing.T) {
	const self = "github.com/opsfirehose/firehose/router"
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
	if _, ok := imports[self]; !ok || imports["github.com/opsfirehose/firehose/sinks"] == nil {
		t.Fatalf("go list -deps lists neither the router nor sinks:\n%s", out)
	}
	// Every package reachable from the router, with one package that imports it.
	seen := map[string]string{self: ""}
	for queue := []string{self}; len(queue) > 0; queue = queue[1:] {
		for _, imp := range imports[queue[0]] {
			if _, ok := seen[imp]; ok {
				continue
			}
			seen[imp] = queue[0]
			if strings.HasPrefix(imp, "github.com/mochi-mqtt/") || strings.HasPrefix(imp, "github.com/eclipse/paho") ||
				strings.HasPrefix(imp, "github.com/nats-io/") {
				t.Errorf("the router depends on %s, imported by %s; MQTT belongs in mqttin (inputs) and sinks/mqtt (the MQTT sink), NATS in sinks/nats", imp, queue[0])
				continue
			}
			queue = append(queue, imp)
		}
	}
}
