package chef

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

// teamsConfig reads a chef section from testdata/teams, its policy_locks
// relative to that directory.
func teamsConfig(t testing.TB, file string) Config {
	t.Helper()
	cfg := DefaultConfig()
	y, err := os.ReadFile(filepath.Join("testdata", "teams", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := strictyaml.Decode(y, &cfg, strictyaml.Options{}); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if p := cfg.Owners.PolicyLocks; p != "" && !filepath.IsAbs(p) {
		cfg.Owners.PolicyLocks = filepath.Join("testdata", "teams", p)
	}
	return cfg
}

// newTeamsHandler is a handler with cfg and, when dataDir is not empty, the
// rollout store there; it publishes to pub.
func newTeamsHandler(t testing.TB, cfg Config, dataDir string, pub bus.Publisher) *Handler {
	t.Helper()
	if pub == nil {
		pub = refusingPublisher{}
	}
	h, err := New(cfg, Options{Options: intake.Options{Publisher: pub, Logger: zerolog.Nop(), Now: func() time.Time { return fixedNow }}, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTeamsGolden: a failure goes to the team that owns the failing cookbook,
// found from the failed resource or, for a compile-time failure, from the
// backtrace; policy ownership comes from lock files with an included
// policy.
func TestTeamsGolden(t *testing.T) {
	cases := []struct{ name, config, input string }{
		{"failed_resource", "failed_resource.yaml", "testdata/27_run_converge_failed_resource_chef_delivery/input.json"},
		{"compile_failure_policies", "policies.yaml", "testdata/03_run_converge_failure_chef15_policyfile_macos/input.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newTeamsHandler(t, teamsConfig(t, c.config), "", nil)
			_, msgs, err := h.messages(readFixture(t, c.input))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "teams", c.name+".txt"), goldenLines(msgs))
		})
	}
}

// TestRolloutGolden: one node's runs, then another's, then a restart, with
// the real payloads of a Policyfile fleet (cases 03 and Automate's
// desktop-report-3). Rollout events come on a node's first run and when a
// version changes, never when none does; the retained tallies survive a
// restart.
func TestRolloutGolden(t *testing.T) {
	cfg := teamsConfig(t, "policies.yaml")
	dir := t.TempDir()
	first := readFixture(t, "testdata/03_run_converge_failure_chef15_policyfile_macos/input.json")
	other := readFixture(t, "testdata/teams/desktop-report-3.json")
	// The same node's next runs: a new run id, then chef-client 11.6.0.
	next := replaceAll(t, first, `1a3a47dc-82d0-4869-97b4-a49b47b9c10a`, `2b4b58ed-93e1-4970-88c5-b5ac58d20d1b`, 2)
	upgraded := replaceAll(t, next, `"version": "11.5.0"`, `"version": "11.6.0"`, 2)

	var out strings.Builder
	step := func(h *Handler, name string, body []byte) {
		t.Helper()
		_, msgs, err := h.messages(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out.WriteString("== " + name + "\n")
		for _, line := range strings.SplitAfter(goldenLines(msgs), "\n") {
			// The run, its resources and status are the other golden
			// tests'; here what teams and rollouts add.
			if strings.Contains(line, "/cookbook/") || strings.Contains(line, "/team/") {
				out.WriteString(line)
			}
		}
	}
	tallies := func(h *Handler, name string) string {
		t.Helper()
		b := testbus.Start(t)
		h.Pub = b
		h.publishTallies(t.Context())
		// A team that subscribes late sees where each rollout stands. The
		// broker sends retained messages after the subscription, unordered
		// with live ones: count them in.
		_, _, n, _ := h.rollout.stats()
		sub := b.Subscribe(t, "chef/+/cookbook/+/versions")
		var lines []string
		for range n {
			m := testkit.Next(t, sub)
			if !m.Retained {
				t.Errorf("%s is not retained", m.Topic)
			}
			lines = append(lines, m.Topic+"\t"+m.Payload+"\n")
		}
		slices.Sort(lines)
		out.WriteString("== " + name + "\n" + strings.Join(lines, ""))
		return strings.Join(lines, "")
	}

	h := newTeamsHandler(t, cfg, dir, nil)
	step(h, "FVFWM0M8HV2J, its first run: every cookbook, chef-client failing and blamed on core", first)
	step(h, "FVFWM0M8HV2J, its next run with the same versions: no rollout event (the failure still goes to core)", next)
	step(h, "FVFWM0M8HV2J, with chef-client 11.6.0: one event", upgraded)
	step(h, "LAPTOP-03J74NE1 (another org), its first run", other)
	before := tallies(h, "the tallies, to a late subscriber")
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	h = newTeamsHandler(t, cfg, dir, nil)
	if after := tallies(h, "after a restart, from a fresh broker"); after != before {
		t.Errorf("the tallies changed across a restart:\n%s\nbefore:\n%s", after, before)
	}
	step(h, "LAPTOP-03J74NE1 again, after the restart: no rollout event", other)
	golden(t, filepath.Join("testdata", "teams", "rollout.txt"), out.String())
}

func replaceAll(t *testing.T, b []byte, old, new string, n int) []byte {
	t.Helper()
	if c := bytes.Count(b, []byte(old)); c != n {
		t.Fatalf("%q is in the fixture %d times, not %d", old, c, n)
	}
	return bytes.ReplaceAll(b, []byte(old), []byte(new))
}

// The team failure, rollout and tally payloads decode into their types, and
// the status summary keeps every field it had.
func TestTeamPayloads(t *testing.T) {
	h := newTeamsHandler(t, teamsConfig(t, "policies.yaml"), t.TempDir(), nil)
	_, msgs, err := h.messages(readFixture(t, "testdata/03_run_converge_failure_chef15_policyfile_macos/input.json"))
	if err != nil {
		t.Fatal(err)
	}
	var team chefpayload.TeamFailure
	var events []chefpayload.RolloutEvent
	var status map[string]any
	for _, m := range msgs {
		switch {
		case strings.Contains(m.Topic, "/team/"):
			if err := json.Unmarshal(m.Payload, &team); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(m.Topic, "/cookbook/"):
			var e chefpayload.RolloutEvent
			if err := json.Unmarshal(m.Payload, &e); err != nil {
				t.Fatal(err)
			}
			events = append(events, e)
		case strings.HasSuffix(m.Topic, "/status"):
			if err := json.Unmarshal(m.Payload, &status); err != nil {
				t.Fatal(err)
			}
		}
	}
	if team.Team != "core" || team.Cookbook != "chef-client" || *team.CookbookVersion != "11.5.0" || team.BlamedBy != "backtrace" ||
		*team.PolicyName != "ChefDesktop" || *team.PolicyGroup != "client_group" || *team.ErrorClass != "NoMethodError" ||
		team.RunID != "1a3a47dc-82d0-4869-97b4-a49b47b9c10a" || team.NodeName != "FVFWM0M8HV2J" {
		t.Errorf("team failure %+v", team)
	}
	if len(events) != 4 {
		t.Fatalf("%d rollout events", len(events))
	}
	for _, e := range events {
		if e.Failing != (e.Cookbook == "chef-client") || e.Status != "failure" || e.PreviousVersion != nil || e.Owner == nil {
			t.Errorf("event %+v", e)
		}
	}
	for _, field := range []string{"node_name", "organization_name", "run_id", "status", "start_time", "end_time", "duration_ms",
		"total_resource_count", "updated_resource_count", "failed_resource_count", "policy_name", "policy_group", "chef_version",
		"entity_uuid", "error_class", "error_message", "failed_cookbook", "owner"} {
		if _, ok := status[field]; !ok {
			t.Errorf("status has no %s", field)
		}
	}
	if status["owner"] != "core" {
		t.Errorf("status owner %v", status["owner"])
	}
	// The run's own body gains the same two members.
	var run map[string]json.RawMessage
	if err := json.Unmarshal(msgs[0].Payload, &run); err != nil {
		t.Fatal(err)
	}
	if string(run[chefpayload.OwnerKey]) != `"core"` || !strings.Contains(string(run[chefpayload.FailedCookbookKey]), `"chef-client"`) {
		t.Errorf("run body: owner %s, failed_cookbook %s", run[chefpayload.OwnerKey], run[chefpayload.FailedCookbookKey])
	}
}

// A run whose messages were not published leaves the node as it was, so
// that chef-client's retry gets the rollout events.
func TestRolloutWaitsForThePublish(t *testing.T) {
	dir := t.TempDir()
	converge := readFixture(t, "testdata/03_run_converge_failure_chef15_policyfile_macos/input.json")
	down := startBridgeWith(t, DefaultConfig(), dir)
	if err := down.bus.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, body := postLikeChef(t, down.srv.URL+Path, converge, "x"); code != http.StatusServiceUnavailable {
		t.Fatalf("with the broker down: %d %s", code, body)
	}
	if err := down.h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	up := startBridgeWith(t, DefaultConfig(), dir)
	sub := up.bus.Subscribe(t, "chef/+/cookbook/+/+/+")
	if code, body := postLikeChef(t, up.srv.URL+Path, converge, "x"); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if got := up.bus.Collect(t, sub, "chef/barrier/cookbook/x/y/z"); len(got) != 4 {
		t.Fatalf("%d rollout events on the retry, want 4 (a first run of 4 cookbooks)", len(got))
	}
	// Published now: the same run again is silent.
	if code, body := postLikeChef(t, up.srv.URL+Path, converge, "x"); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if got := up.bus.Collect(t, sub, "chef/barrier/cookbook/x/y/z"); len(got) != 0 {
		t.Fatalf("%d rollout events for an unchanged run", len(got))
	}
}

// BenchmarkConvergeTeams is the adapter's cost per converge (fixture 02,
// parsed and turned into its messages, not published) today and with teams
// and the rollout, for a node whose runs change no version: the added cost
// is reading the cookbook versions and comparing their digest.
//
//	go test ./adapters/chef -run '^$' -bench ConvergeTeams -count 6
func BenchmarkConvergeTeams(b *testing.B) {
	body := readFixture(b, "testdata/02_run_converge_success_chef12_ubuntu/input.json")
	for _, c := range []struct {
		name    string
		cfg     Config
		dataDir string
	}{
		{"today", DefaultConfig(), ""},
		{"teams", teamsConfig(b, "policies.yaml"), b.TempDir()},
	} {
		h := newTeamsHandler(b, c.cfg, c.dataDir, nil)
		if _, _, err := h.messages(body); err != nil { // the node's first run
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := h.messages(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRolloutUnchanged is what the rollout adds to a converge that
// changes no version (fixture 02's 34 cookbooks): hashing them as written
// and looking the node's digest up. Compare it with
// BenchmarkConvergeTeams/today, the whole converge.
func BenchmarkRolloutUnchanged(b *testing.B) {
	body := readFixture(b, "testdata/02_run_converge_success_chef12_ubuntu/input.json")
	h := newTeamsHandler(b, teamsConfig(b, "policies.yaml"), b.TempDir(), nil)
	msg, _, err := h.messages(body) // the node's first run
	if err != nil {
		b.Fatal(err)
	}
	c := msg.(*chefpayload.RunConverge)
	b.ReportAllocs()
	for b.Loop() {
		if ch, err := h.rollout.observeRun(c); ch != nil || err != nil {
			b.Fatalf("%v %v", ch, err)
		}
	}
}
