package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksOnlyTheBroker keeps cmd/broker free of what only the bridge
// runs: the adapters and what they pull in (SQLite and pgx through
// ConfigDB, JSON Schema through the Chef payloads), and NATS, which only
// the bridge's sinks speak. A new import that brings one back fails here,
// naming it.
func TestLinksOnlyTheBroker(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"modernc.org/sqlite", "github.com/jackc/pgx", "jsonschema", "github.com/nats-io/", "github.com/opsfirehose/firehose/adapters/"}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || deps[len(deps)-1] != "github.com/opsfirehose/firehose/cmd/broker" {
		t.Fatalf("go list -deps gave no dependency list:\n%s", out)
	}
	for _, pkg := range deps {
		for _, f := range forbidden {
			if strings.Contains(pkg, f) {
				t.Errorf("cmd/broker links %s (matches %q)", pkg, f)
			}
		}
	}
}
