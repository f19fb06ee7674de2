package api

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden output files")

// fuelSetup creates the Fuel hierarchy: component "fuel" with the four data
// sources, and environment 1 with level nodes.
func (s *server) fuelSetup() {
	s.t.Helper()
	s.must(201, "POST", "/components", map[string]any{"name": "fuel", "resource_definitions": []any{
		map[string]any{"name": "astute"}, map[string]any{"name": "globals"},
		map[string]any{"name": "override/plugins"}, map[string]any{"name": "override/node"},
	}})
	s.must(201, "POST", "/environments", map[string]any{"id": 1, "components": []any{"fuel"}, "hierarchy_levels": []any{"nodes"}})
}

func topicsOf(msgs []testkit.Received) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Topic)
	}
	return out
}

// TestEventTopics: every write is published, after commit and before its
// answer, on topics that wildcard subscriptions can pick apart.
func TestEventTopics(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		all := s.bus.Subscribe(t, "configdb/#")
		astute := s.bus.Subscribe(t, "configdb/+/astute/#")
		node1 := s.bus.Subscribe(t, "configdb/1/+/+/nodes/node-1")

		s.fuelSetup()
		s.must(204, "PUT", "/environments/1/resources/astute/values", map[string]any{"deployment_id": 1})
		s.must(204, "PUT", "/environments/1/nodes/node-1/resources/astute/values", map[string]any{"fqdn": "node-1"})
		s.must(204, "PUT", "/environments/1/nodes/node-1/resources/astute/overrides/keys/set", [][]any{{"deployment_id", 2}})
		s.must(204, "PUT", "/environments/1/nodes/node-2/resources/globals/values", map[string]any{"g": 1})
		s.must(204, "PUT", "/environments/1/nodes/node-1/resources/override/plugins/overrides", map[string]any{"p": 1})
		s.must(204, "PATCH", "/environments/1/nodes/node-1/resources/astute/values/keys/delete", [][]any{{"fqdn"}})
		// Refused writes publish nothing.
		s.must(409, "PUT", "/environments/1/nodes/node-1/resources/astute/values/keys/delete", [][]any{{"fqdn"}})
		s.must(404, "PUT", "/environments/1/racks/r/resources/astute/values", map[string]any{})
		s.must(204, "PUT", "/environments/1", map[string]any{"hierarchy_levels": []any{"nodes"}})
		s.must(204, "PUT", "/components/1", map[string]any{"name": "fuel9"})
		s.must(204, "DELETE", "/environments/1", nil)

		got := topicsOf(s.bus.Collect(t, all, "configdb/barrier"))
		want := []string{
			"configdb/components/1/created",
			"configdb/1/environment/created",
			"configdb/1/astute/values",
			"configdb/1/astute/values/nodes/node-1",
			"configdb/1/astute/overrides/nodes/node-1",
			"configdb/1/globals/values/nodes/node-2",
			"configdb/1/override%2Fplugins/overrides/nodes/node-1",
			"configdb/1/astute/values/nodes/node-1",
			"configdb/1/environment/updated",
			"configdb/components/1/updated",
			"configdb/1/environment/deleted",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("topics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if got := topicsOf(s.bus.Collect(t, astute, "configdb/x/astute/barrier")); len(got) != 4 {
			t.Fatalf("configdb/+/astute/# got %v", got)
		}
		got = topicsOf(s.bus.Collect(t, node1, "configdb/1/barrier/x/nodes/node-1"))
		if len(got) != 4 || got[3] != "configdb/1/astute/values/nodes/node-1" {
			t.Fatalf("configdb/1/+/+/nodes/node-1 got %v", got)
		}
	})
}

// TestEventGolden compares the events of a scripted session, payloads
// included, with testdata/events/<case>/output.txt (go test -update rewrites
// it), on both databases. Each line of requests.txt is "METHOD PATH [JSON
// BODY]".
func TestEventGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/events/*")
	if err != nil || len(dirs) == 0 {
		t.Fatal("no golden cases", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			eachDB(t, func(t *testing.T, dsn string) {
				s := startServer(t, dsn, serverOptions{})
				ch := s.bus.Subscribe(t, "#")
				script, err := os.ReadFile(filepath.Join(dir, "requests.txt"))
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(bytes.NewReader(script))
				for sc.Scan() {
					line := strings.TrimSpace(sc.Text())
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					parts := strings.SplitN(line, " ", 3)
					var body any
					if len(parts) == 3 {
						body = parts[2]
					}
					if r := s.do(parts[0], parts[1], body); r.status >= 300 {
						t.Logf("%s: %d %s", line, r.status, r.body)
					}
				}
				var out strings.Builder
				for _, m := range s.bus.Collect(t, ch, "golden/barrier") {
					out.WriteString(m.Topic + "\t" + map[bool]string{true: "retained", false: "-"}[m.Retained] + "\t" + m.Payload + "\n")
				}
				golden := filepath.Join(dir, "output.txt")
				if *update {
					if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatal(err)
				}
				if out.String() != string(want) {
					t.Fatalf("events differ from %s (go test -update rewrites it):\n%s", golden, out.String())
				}
			})
		})
	}
}
