package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// The token chef-client is configured with (data_collector.token).
const chefTestToken = "dc-e2e-token"

// chefCase is one golden case of adapters/chef: the body chef-client (or
// Chef Infra Server) sends, the chef: config it needs when not the
// default, and the messages it produces, one "topic<TAB>retained<TAB>
// payload-or-sha256" line each.
type chefCase struct {
	name   string
	input  []byte
	config []byte // the case's config.yaml, nil for the defaults
	want   []chefLine
}

type chefLine struct {
	topic    string
	retained bool
	payload  string // as payloadOrDigest renders it
}

func chefCases(t *testing.T) []chefCase {
	t.Helper()
	inputs, err := filepath.Glob("../adapters/chef/testdata/*/input.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no Chef fixtures: %v", err)
	}
	var cases []chefCase
	for _, in := range inputs {
		dir := filepath.Dir(in)
		c := chefCase{name: filepath.Base(dir)}
		if c.input, err = os.ReadFile(in); err != nil {
			t.Fatal(err)
		}
		if y, err := os.ReadFile(filepath.Join(dir, "config.yaml")); err == nil {
			c.config = y
		}
		out, err := os.ReadFile(filepath.Join(dir, "output.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			// topic, retained, payload, and a compliance summary the
			// payload's digest stands for.
			f := strings.Split(line, "\t")
			if len(f) < 3 {
				t.Fatalf("%s/output.txt: bad line %q", dir, line)
			}
			c.want = append(c.want, chefLine{topic: f[0], retained: f[1] == "true", payload: f[2]})
		}
		cases = append(cases, c)
	}
	return cases
}

// payloadOrDigest renders a payload as the golden files do: itself when short
// and printable, else its sha256.
func payloadOrDigest(p []byte) string {
	if len(p) <= 2048 && utf8.Valid(p) && !bytes.ContainsAny(p, "\n\t") {
		return string(p)
	}
	sum := sha256.Sum256(p)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// chefBridge starts the whole bridge with a chef: section that takes only
// chefTestToken; section is YAML applied over the defaults, or nil.
func chefBridge(t *testing.T, section []byte) *Bridge {
	t.Helper()
	cfg := testConfig(t)
	// The golden outputs are those of one run of each node, without the
	// rollout's first-run events (TestChefTeamsThroughTheBridge has them).
	cfg.Chef.Rollout.Enabled = false
	if section != nil {
		if err := strictyaml.Decode(section, &cfg.Chef, strictyaml.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Chef.Tokens = []httpserver.Token{{Name: "chef-clients", Token: chefTestToken}}
	if err := config.Parse(nil, &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	return startBridge(t, cfg)
}

// noRedirect fails on a redirect, as chef-client does on a redirected POST.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
	return errors.New("redirected")
}}

// postAsChef POSTs body with the headers chef-client's data collector sends;
// token "" sends none. It returns the status and the decoded JSON answer.
func postAsChef(t *testing.T, url string, body []byte, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "Chef Infra Client/18.4.12 (ruby-3.1.4-p223; ohai-18.3.0; x86_64-linux; +https://chef.io)")
	req.Header.Set("x-data-collector-auth", "version=1.0")
	if token != "" {
		req.Header.Set("x-data-collector-token", token)
	}
	resp, raw := testkit.Do(t, noRedirect, req)
	var answer map[string]any
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("POST %s: %d, the answer is not JSON: %q", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, answer
}

// collect reads ch up to the barrier message, which the caller has published
// after everything it expects.
func collect(t *testing.T, ch <-chan testkit.Received, barrier string) []testkit.Received {
	t.Helper()
	var got []testkit.Received
	for {
		m := testkit.Next(t, ch)
		if m.Topic == barrier {
			return got
		}
		got = append(got, m)
	}
}

// TestChefEndToEnd posts every Chef fixture to the real bridge the way
// chef-client does, and checks what real MQTT subscribers with the wildcard
// filters users use receive over TCP; the status summaries are retained.
func TestChefEndToEnd(t *testing.T) {
	b := chefBridge(t, nil)
	mqtt := "tcp://" + b.Broker().Addr("mqtt")
	// One client per filter, so that each channel holds exactly what its
	// filter matches. chef/# checks that nothing else is published.
	filters := []struct {
		filter, barrier string
		match           func(topic string) bool
	}{
		{"chef/#", "chef/barrier", func(string) bool { return true }},
		{"chef/+/+/run/#", "chef/b/b/run/barrier", levelIs(3, "run")},
		{"chef/+/+/status", "chef/b/b/status", levelIs(3, "status")},
		{"chef/+/+/resource/#", "chef/b/b/resource/barrier", levelIs(3, "resource")},
		{"chef/+/action/#", "chef/b/action/barrier", levelIs(2, "action")},
		{"chef/+/+/liveness", "chef/b/b/liveness", levelIs(3, "liveness")},
		{"chef/+/+/compliance/#", "chef/b/b/compliance/barrier", levelIs(3, "compliance")},
	}
	subs := make([]<-chan testkit.Received, len(filters))
	for i, f := range filters {
		subs[i] = testkit.Connect(t, mqtt, testkit.ClientOptions{}).Subscribe(f.filter, 1)
	}

	var want []chefLine
	retained := map[string]chefLine{} // the last retained message per topic
	for i, c := range chefCases(t) {
		url := "http://" + b.HTTPAddr() + "/data-collector/v0/"
		if i%2 == 1 {
			url = strings.TrimSuffix(url, "/") // chef-client posts to server_url as configured
		}
		code, answer := postAsChef(t, url, c.input, chefTestToken)
		if code != http.StatusOK || answer["status"] != "ok" || answer["messages"] != float64(len(c.want)) {
			t.Fatalf("%s: %d %v, want 200 with %d messages", c.name, code, answer, len(c.want))
		}
		for _, l := range c.want {
			if c.config != nil {
				// Published with the default config, not the case's: the
				// topics are the same, the payloads are checked below.
				l.payload = ""
			}
			want = append(want, l)
			if l.retained {
				retained[l.topic] = l
			}
		}
	}
	if len(retained) < 2 {
		t.Fatalf("the fixtures give %d retained status topics; expected several", len(retained))
	}

	for i, f := range filters {
		if err := b.Publisher().Publish(t.Context(), busMessage(f.barrier)); err != nil {
			t.Fatal(err)
		}
		var wantLines, gotLines []string
		for _, l := range want {
			if f.match(l.topic) {
				wantLines = append(wantLines, l.topic+"\t"+l.payload)
			}
		}
		if len(wantLines) == 0 {
			t.Errorf("%s: no fixture publishes there", f.filter)
		}
		got := collect(t, subs[i], f.barrier)
		for j, m := range got {
			p := payloadOrDigest([]byte(m.Payload))
			if j < len(wantLines) && strings.HasSuffix(wantLines[j], "\t") {
				p = ""
			}
			gotLines = append(gotLines, m.Topic+"\t"+p)
		}
		if strings.Join(gotLines, "\n") != strings.Join(wantLines, "\n") {
			t.Errorf("%s received:\n%s\nwant:\n%s", f.filter, strings.Join(gotLines, "\n"), strings.Join(wantLines, "\n"))
		}
	}

	// A dashboard that subscribes now gets every node's last status at once.
	late := testkit.Connect(t, mqtt, testkit.ClientOptions{}).Subscribe("chef/+/+/status", 1)
	for range len(retained) { // deletes below must not shorten the loop
		m := testkit.Next(t, late)
		w, ok := retained[m.Topic]
		if !ok || !m.Retained {
			t.Errorf("late subscriber got %s (retained %v), not a retained status", m.Topic, m.Retained)
			continue
		}
		if w.payload != "" && payloadOrDigest([]byte(m.Payload)) != w.payload {
			t.Errorf("%s: retained %s, want %s", m.Topic, m.Payload, w.payload)
		}
		delete(retained, m.Topic)
	}
	if len(retained) != 0 {
		t.Errorf("no retained status on %v", retained)
	}
}

// levelIs matches topics whose level i (from 0) is word.
func levelIs(i int, word string) func(string) bool {
	return func(topic string) bool {
		levels := strings.Split(topic, "/")
		return len(levels) > i && levels[i] == word
	}
}

// TestChefEndToEndWithItsConfig runs each fixture that has a config of its
// own (the public bus profile) through a bridge configured with it, and
// checks every payload a subscriber receives.
func TestChefEndToEndWithItsConfig(t *testing.T) {
	n := 0
	for _, c := range chefCases(t) {
		if c.config == nil {
			continue
		}
		n++
		t.Run(c.name, func(t *testing.T) {
			b := chefBridge(t, c.config)
			all := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{}).Subscribe("chef/#", 1)
			if code, answer := postAsChef(t, "http://"+b.HTTPAddr()+"/data-collector/v0/", c.input, chefTestToken); code != http.StatusOK {
				t.Fatalf("%d %v", code, answer)
			}
			if err := b.Publisher().Publish(t.Context(), busMessage("chef/barrier")); err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, m := range collect(t, all, "chef/barrier") {
				got = append(got, m.Topic+"\t"+payloadOrDigest([]byte(m.Payload)))
			}
			for _, l := range c.want {
				want = append(want, l.topic+"\t"+l.payload)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("received:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	if n == 0 {
		t.Skip("no Chef fixture has a config of its own")
	}
}

// TestChefTokensThroughTheBridge: with a chef token configured, a missing
// token is 401 and a wrong one 403, each with a JSON error, and nothing
// reaches the bus.
func TestChefTokensThroughTheBridge(t *testing.T) {
	b := chefBridge(t, nil)
	all := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{}).Subscribe("#", 1)
	start, err := os.ReadFile("../adapters/chef/testdata/01_run_start_chef12_ubuntu/input.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, token string
		code        int
		error       string
	}{
		{"missing token", "", http.StatusUnauthorized, "missing token"},
		{"wrong token", "not-" + chefTestToken, http.StatusForbidden, "invalid token"},
	} {
		for _, path := range []string{"/data-collector/v0/", "/data-collector/v0"} {
			code, answer := postAsChef(t, "http://"+b.HTTPAddr()+path, start, tt.token)
			msg, _ := answer["error"].(string)
			if code != tt.code || !strings.Contains(msg, tt.error) {
				t.Errorf("%s on %s: %d %v, want %d with an error containing %q", tt.name, path, code, answer, tt.code, tt.error)
			}
		}
	}
	// The right token is accepted, so the refusals above were about the token.
	if code, answer := postAsChef(t, "http://"+b.HTTPAddr()+"/data-collector/v0/", start, chefTestToken); code != http.StatusOK {
		t.Fatalf("the configured token: %d %v", code, answer)
	}
	if m := testkit.Next(t, all); m.Topic != "chef/chef/chefdk-ubuntu-16.04-tester-91bc78/run/start" {
		t.Errorf("a refused request published %s", m.Topic)
	}
	if err := b.Publisher().Publish(t.Context(), busMessage("end/marker")); err != nil {
		t.Fatal(err)
	}
	if m := testkit.Next(t, all); m.Topic != "end/marker" {
		t.Errorf("an extra message was published: %s", m.Topic)
	}
}

// TestChefTeamsThroughTheBridge: with teams owning cookbooks through
// Policyfile lock files, a failure reaches the owning team's topic, every
// cookbook of a node's first run gets its rollout event, and the retained
// tallies come back after the bridge restarts on the same data directory,
// from a broker that kept nothing.
func TestChefTeamsThroughTheBridge(t *testing.T) {
	cfg := testConfig(t)
	cfg.Chef.Tokens = []httpserver.Token{{Name: "chef-clients", Token: chefTestToken}}
	section := []byte("owners:\n  teams:\n    desktop: {policies: [ChefDesktop]}\n    core: {policies: [base]}\n" +
		"  policy_locks: ../adapters/chef/testdata/teams/locks\n")
	if err := strictyaml.Decode(section, &cfg.Chef, strictyaml.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := config.Parse(nil, &cfg, config.Options{}); err != nil {
		t.Fatal(err)
	}
	converge, err := os.ReadFile("../adapters/chef/testdata/03_run_converge_failure_chef15_policyfile_macos/input.json")
	if err != nil {
		t.Fatal(err)
	}

	b := startBridge(t, cfg)
	mqtt := "tcp://" + b.Broker().Addr("mqtt")
	team := testkit.Connect(t, mqtt, testkit.ClientOptions{}).Subscribe("chef/+/team/core/#", 1)
	rollout := testkit.Connect(t, mqtt, testkit.ClientOptions{}).Subscribe("chef/+/cookbook/+/+/+", 1)
	tallies := testkit.Connect(t, mqtt, testkit.ClientOptions{}).Subscribe("chef/+/cookbook/+/versions", 1)
	if code, answer := postAsChef(t, "http://"+b.HTTPAddr()+"/data-collector/v0/", converge, chefTestToken); code != http.StatusOK {
		t.Fatalf("%d %v", code, answer)
	}
	if m := testkit.Next(t, team); m.Topic != "chef/chefit-development/team/core/failure/FVFWM0M8HV2J" ||
		!strings.Contains(m.Payload, `"cookbook":"chef-client"`) {
		t.Errorf("team failure %s %s", m.Topic, m.Payload)
	}
	seen := map[string]bool{}
	for range 4 {
		seen[testkit.Next(t, rollout).Topic] = true
	}
	for _, topic := range []string{"ChefDesktop/0.1.0", "chef-client/11.5.0", "cron/6.2.2", "logrotate/2.2.2"} {
		if !seen["chef/chefit-development/cookbook/"+topic+"/failure"] {
			t.Errorf("no rollout event for %s: %v", topic, seen)
		}
	}
	// The tallies follow within tally_interval.
	before := map[string]string{}
	for len(before) < 4 {
		m := testkit.Next(t, tallies)
		before[m.Topic] = m.Payload
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	b = startBridge(t, cfg)
	late := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{}).Subscribe("chef/+/cookbook/+/versions", 1)
	// A message published while the subscription is made may come twice
	// (retained and live): count topics, not messages.
	after := map[string]string{}
	for len(after) < len(before) {
		m := testkit.Next(t, late)
		after[m.Topic] = m.Payload
	}
	for topic, p := range before {
		if after[topic] != p {
			t.Errorf("after the restart, %s is %q; before, %s", topic, after[topic], p)
		}
	}
}
