package chef

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// specData is the normal attribute data of spec 003 ("Whitelist Attributes").
const specData = `{"filesystem":{"/dev/disk0s2":{"size":"10mb"},"map - autohome":{"size":"10mb"}},` +
	`"network":{"interfaces":{"eth0":{"mtu":1500},"eth1":{"mtu":9000}}}}`

func TestAllowSpecExamples(t *testing.T) {
	tests := []struct {
		name  string
		paths []attrPath
		want  string
	}{
		{"spec: normal_attribute_whitelist ['network/interfaces/'] keeps network, drops filesystem",
			[]attrPath{splitPath("network/interfaces/")}, `{"network":{"interfaces":{"eth0":{"mtu":1500},"eth1":{"mtu":9000}}}}`},
		{"spec: an empty whitelist saves nothing", []attrPath{}, `{}`},
		{"spec: an array for keys containing /", []attrPath{{"filesystem", "/dev/disk0s2"}},
			`{"filesystem":{"/dev/disk0s2":{"size":"10mb"}}}`},
		{"spec: ['network/interfaces/eth0']", []attrPath{splitPath("network/interfaces/eth0")},
			`{"network":{"interfaces":{"eth0":{"mtu":1500}}}}`},
		// The spec's example for default_attribute_whitelist does not exist in
		// this data: chef-client still creates the objects on the way.
		{"spec: 'filesystem/dev/disk0s2/size' misses but keeps filesystem", []attrPath{splitPath("filesystem/dev/disk0s2/size")},
			`{"filesystem":{}}`},
		{"spec: [['filesystem','/dev/diskos2']] (sic) misses", []attrPath{{"filesystem", "/dev/diskos2"}}, `{"filesystem":{}}`},
		{"spec: 'map - autohome/size' is not top level", []attrPath{splitPath("map - autohome/size")}, `{}`},
		{"a missing top-level key adds nothing", []attrPath{splitPath("nope/x")}, `{}`},
		{"paths merge", []attrPath{splitPath("network/interfaces/eth1"), splitPath("network/interfaces/eth0")},
			`{"network":{"interfaces":{"eth1":{"mtu":9000},"eth0":{"mtu":1500}}}}`},
		{"the order is the list's", []attrPath{splitPath("network"), splitPath("filesystem/map - autohome")},
			`{"network":{"interfaces":{"eth0":{"mtu":1500},"eth1":{"mtu":9000}}},"filesystem":{"map - autohome":{"size":"10mb"}}}`},
		{"whole then part: the whole stays", []attrPath{splitPath("network"), splitPath("network/interfaces/eth0")},
			`{"network":{"interfaces":{"eth0":{"mtu":1500},"eth1":{"mtu":9000}}}}`},
		{"part then whole: the whole replaces it, in place", []attrPath{splitPath("network/interfaces/eth0"), splitPath("filesystem"), splitPath("network")},
			`{"network":{"interfaces":{"eth0":{"mtu":1500},"eth1":{"mtu":9000}}},"filesystem":{"/dev/disk0s2":{"size":"10mb"},"map - autohome":{"size":"10mb"}}}`},
		{"a leading / is dropped", []attrPath{splitPath("/network/interfaces/eth0")}, `{"network":{"interfaces":{"eth0":{"mtu":1500}}}}`},
		// chef-client raises here; the keys on the way are kept, as for a missing key.
		{"through a leaf: treated as missing", []attrPath{splitPath("network/interfaces/eth0/mtu/x")},
			`{"network":{"interfaces":{"eth0":{"mtu":{}}}}}`},
		{"empty paths are ignored", []attrPath{splitPath(""), splitPath("/"), {}}, `{}`},
	}
	for _, tt := range tests {
		got := allow([]byte(specData), tt.paths)
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	if got := allow([]byte(`[1,2]`), []attrPath{{"a"}}); string(got) != `{}` {
		t.Errorf("allow on a non-object: %s", got)
	}
}

func TestBlockExamples(t *testing.T) {
	tests := []struct {
		name  string
		paths []attrPath
		want  string
	}{
		{"a subtree and an array path", []attrPath{splitPath("network/interfaces/eth0"), {"filesystem", "/dev/disk0s2"}},
			`{"filesystem":{"map - autohome":{"size":"10mb"}},"network":{"interfaces":{"eth1":{"mtu":9000}}}}`},
		{"a whole key", []attrPath{splitPath("network")}, `{"filesystem":{"/dev/disk0s2":{"size":"10mb"},"map - autohome":{"size":"10mb"}}}`},
		{"missing paths change nothing", []attrPath{splitPath("network/nope"), splitPath("nope/x"), splitPath("network/interfaces/eth0/mtu/x")},
			`{"filesystem":{"/dev/disk0s2":{"size":"10mb"},"map - autohome":{"size":"10mb"}},"network":{"interfaces":{"eth0":{"mtu":1500},"eth1":{"mtu":9000}}}}`},
	}
	for _, tt := range tests {
		got := block([]byte(specData), newBlockTrie(tt.paths))
		if string(compact(t, got)) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	got := block([]byte(`{"a":{"s":1,"k":2},"a":{"s":3},"b":null,"c":false}`), newBlockTrie([]attrPath{{"a", "s"}, {"b", "x"}, {"c", "y"}}))
	if string(got) != `{"a":{"k":2},"a":{},"b":null,"c":false}` {
		t.Errorf("duplicates: %s", got)
	}
}

func compact(t *testing.T, b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	// json.Marshal sorts keys; re-order the expected strings the same way by
	// comparing through it.
	return out
}

// Levels are filtered independently: an automatic allow list leaves the
// other levels whole (spec 003's warning).
func TestLevelsAreIndependent(t *testing.T) {
	cfg := withValidationOff(DefaultConfig()) // the body below is not a full converge
	y := `
automatic_attribute_whitelist: ["network/interfaces/eth0"]
blocked_override_attributes: [["filesystem", "/dev/disk0s2"]]
`
	if err := strictyaml.Decode([]byte(y), &cfg, strictyaml.Options{}); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, cfg, nil)
	node := `{"name":"n","automatic":` + specData + `,"default":` + specData + `,"normal":` + specData + `,"override":` + specData + `}`
	body := `{"message_type":"run_converge","node_name":"n","organization_name":"o","run_id":"r","status":"success","node":` + node + `}`
	_, msgs, err := h.messages([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Node map[string]any `json:"node"`
	}
	if err := json.Unmarshal(msgs[0].Payload, &got); err != nil {
		t.Fatalf("%v: %s", err, msgs[0].Payload)
	}
	var full map[string]any
	_ = json.Unmarshal([]byte(specData), &full)
	want := map[string]any{
		"name":      "n",
		"automatic": map[string]any{"network": map[string]any{"interfaces": map[string]any{"eth0": map[string]any{"mtu": 1500.0}}}},
		"default":   full,
		"normal":    full,
		"override": map[string]any{
			"filesystem": map[string]any{"map - autohome": map[string]any{"size": "10mb"}},
			"network":    full["network"],
		},
	}
	if !reflect.DeepEqual(got.Node, want) {
		t.Fatalf("node:\n%v\nwant\n%v", got.Node, want)
	}
}

func withValidationOff(cfg Config) Config {
	_ = cfg.Validation.UnmarshalText([]byte("off"))
	return cfg
}

func TestRedact(t *testing.T) {
	r := &redactor{keys: regexp.MustCompile(`(?i)(?:password)|(?:token)|(?:secret)|(?:key)`)}
	in := `{"db": {"Password": "x", "host": "h", "list": [{"api_token": 1}, "password"]}, "ssh_keys": {"a": "b"}, "pass\u0077ord": "escaped", "port": 1}`
	got := string(r.value(nil, []byte(in)))
	want := `{"db":{"Password":"*redacted*","host":"h","list":[{"api_token":"*redacted*"},"password"]},"ssh_keys":"*redacted*","pass\u0077ord":"*redacted*","port":1}`
	if got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	res := `{"before":{"token":"a"},"after":{"secret":{"x":1}},"delta":"-a\n+b","name":"password_file"}`
	if got := string((&redactor{keys: r.keys, dropDelta: true}).resource([]byte(res))); got !=
		`{"before":{"token":"*redacted*"},"after":{"secret":"*redacted*"},"delta":"*redacted*","name":"password_file"}` {
		t.Fatalf("resource: %s", got)
	}
	if got := string((&redactor{dropDelta: true}).resource([]byte(`{"delta":"","after":{"token":1}}`))); got != `{"delta":"","after":{"token":1}}` {
		t.Fatalf("drop_delta alone: %s", got)
	}
}

func TestConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	y := `
topic_prefix: "chef/+"
max_body: 0
validation: strict
resource_statuses: [updated, done]
allowed_automatic_attributes: [fqdn]
automatic_attribute_whitelist: [fqdn]
blocked_default_attributes: [5, [a, 7], "/", [], ""]
redact:
  enabled: true
  patterns: ["pass(", ""]
tokens:
  - name: x
`
	cfg = DefaultConfig()
	err := strictyaml.Decode([]byte(y), &cfg, strictyaml.Options{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"topic_prefix:", "max_body: must be positive", `resource_statuses[1]: "done" is not a resource status`,
		"automatic_attribute_whitelist: automatic_attribute_whitelist is the deprecated name of allowed_automatic_attributes",
		"blocked_default_attributes[0]: expected a path", "blocked_default_attributes[1][1]: expected a key",
		`blocked_default_attributes[2]: "/" names no attribute`, "blocked_default_attributes[3]: [] names no attribute",
		`blocked_default_attributes[4]: "" names no attribute`,
		"redact.patterns: patterns[0]", "tokens[0].token: required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if cfg.Validation.String() != "strict" {
		t.Errorf("validation %v", cfg.Validation)
	}

	// The deprecated names work alone, and [] differs from absent.
	cfg = DefaultConfig()
	if err := strictyaml.Decode([]byte("normal_attribute_whitelist: []\noverride_attribute_blacklist: [a/b]\n"), &cfg, strictyaml.Options{}); err != nil {
		t.Fatal(err)
	}
	rules, problems := cfg.Attributes.rules()
	if len(problems) != 0 || !rules["normal"].allowSet || len(rules["normal"].allow) != 0 ||
		!reflect.DeepEqual(rules["override"].block, []attrPath{{"a", "b"}}) || len(rules) != 2 {
		t.Fatalf("%+v %v", rules, problems)
	}
}

func TestSplitPath(t *testing.T) {
	for in, want := range map[string]attrPath{
		"network/interfaces/": {"network", "interfaces"},
		"/a/b":                {"a", "b"},
		"//a":                 {"", "a"},
		"a//b":                {"a", "", "b"},
		"":                    {},
		"/":                   {},
		"a///":                {"a"},
	} {
		if got := splitPath(in); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("splitPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// refAllow is chef-client's AttributeAllowlist.filter on decoded data, with
// the same choices where Ruby would raise: a reference for the raw version.
func refAllow(data any, paths []attrPath) any {
	type node struct {
		whole any
		isSet bool
		keys  []string
		kids  map[string]*node
	}
	root := &node{kids: map[string]*node{}}
	child := func(n *node, k string) *node {
		if c, ok := n.kids[k]; ok {
			return c
		}
		c := &node{kids: map[string]*node{}}
		n.kids[k] = c
		n.keys = append(n.keys, k)
		return c
	}
	for _, p := range paths {
		if len(p) == 0 {
			continue
		}
		all, sel, ok := data, root, true
		for _, part := range p[:len(p)-1] {
			m, isMap := all.(map[string]any)
			v, has := m[part]
			if !isMap || !has {
				ok = false
				break
			}
			sel = child(sel, part)
			if sel.isSet {
				ok = false
				break
			}
			all = v
		}
		if !ok {
			continue
		}
		if m, isMap := all.(map[string]any); isMap {
			if v, has := m[p[len(p)-1]]; has {
				c := child(sel, p[len(p)-1])
				c.whole, c.isSet, c.keys, c.kids = v, true, nil, map[string]*node{}
			}
		}
	}
	var render func(n *node) any
	render = func(n *node) any {
		if n.isSet {
			return n.whole
		}
		out := map[string]any{}
		for _, k := range n.keys {
			out[k] = render(n.kids[k])
		}
		return out
	}
	return render(root)
}

// refBlock is chef-client's AttributeBlocklist.filter on decoded data.
func refBlock(data any, paths []attrPath) any {
	for _, p := range paths {
		if len(p) == 0 {
			continue
		}
		ref, ok := data.(map[string]any)
		for _, part := range p[:len(p)-1] {
			if !ok {
				break
			}
			v := ref[part]
			if v == nil || v == false {
				ok = false
				break
			}
			ref, ok = v.(map[string]any)
		}
		if ok {
			delete(ref, p[len(p)-1])
		}
	}
	return data
}

func FuzzAttributeFilter(f *testing.F) {
	f.Add([]byte(specData), "network/interfaces/eth0", "filesystem", "/dev/disk0s2", true)
	f.Add([]byte(`{"a":{"b":1},"a":{"c":2},"d\u0065":[1]}`), "a/c", "de", "", false)
	f.Add([]byte(`{"a":null,"b":false,"c":{"d":{"e":"f"}}}`), "a/x", "c/d/e", "c", true)
	f.Fuzz(func(t *testing.T, data []byte, p1, p2, key string, asArray bool) {
		var decoded any
		if json.Unmarshal(data, &decoded) != nil {
			return
		}
		paths := []attrPath{splitPath(p1), splitPath(p2)}
		if asArray {
			paths = append(paths, attrPath{key, p1})
		}
		got := allow(data, paths)
		var gotV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("allow gave invalid JSON %q: %v", got, err)
		}
		if want := refAllow(decoded, paths); !reflect.DeepEqual(gotV, want) {
			t.Fatalf("allow(%s, %q):\n got %v\nwant %v", data, paths, gotV, want)
		}
		got = block(data, newBlockTrie(paths))
		gotV = nil
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("block gave invalid JSON %q: %v", got, err)
		}
		var fresh any
		_ = json.Unmarshal(data, &fresh)
		if want := refBlock(fresh, paths); !reflect.DeepEqual(gotV, want) {
			t.Fatalf("block(%s, %q):\n got %v\nwant %v", data, paths, gotV, want)
		}
	})
}

func FuzzRedact(f *testing.F) {
	f.Add([]byte(`{"db":{"password":"x","list":[{"token":1}]},"ok":1}`), "password")
	f.Add([]byte(`[{"a\u0062":{"c":null}}]`), "ab")
	f.Fuzz(func(t *testing.T, data []byte, pattern string) {
		re, err := regexp.Compile("(?i)" + regexp.QuoteMeta(pattern))
		if err != nil || pattern == "" || !json.Valid(data) {
			return
		}
		r := &redactor{keys: re}
		got := r.value(nil, data)
		var v any
		if err := json.Unmarshal(got, &v); err != nil {
			t.Fatalf("redacted %s to invalid JSON %q", data, got)
		}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					if re.MatchString(k) && x != Redacted {
						t.Fatalf("key %q kept its value %v in %s", k, x, got)
					}
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(v)
	})
}

// exampleSection returns the chef: section of the repository's
// config.example.yaml, from "chef:" to the next line at column 0.
func exampleSection(t *testing.T) string {
	t.Helper()
	y, err := os.ReadFile(filepath.Join("..", "..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	starts := regexp.MustCompile(`(?m)^chef:[ \t]*$`).FindAllIndex(y, -1)
	if len(starts) != 1 {
		t.Fatalf("config.example.yaml has %d chef: sections, want 1", len(starts))
	}
	section := string(y[starts[0][0]:])
	if end := regexp.MustCompile(`\n[^\s]`).FindStringIndex(section[len("chef:"):]); end != nil {
		section = section[:len("chef:")+end[0]+1]
	}
	return section
}

// TestExampleConfig: the chef: section of config.example.yaml sets the
// defaults, and its commented public bus profile is the 08 golden case's
// config.
func TestExampleConfig(t *testing.T) {
	y := exampleSection(t)
	var file struct {
		Chef Config `yaml:"chef"`
	}
	file.Chef = DefaultConfig()
	if err := strictyaml.Decode([]byte(y), &file, strictyaml.Options{}); err != nil {
		t.Fatalf("config.example.yaml, chef: section: %v", err)
	}
	if !reflect.DeepEqual(file.Chef, DefaultConfig()) {
		t.Errorf("the example's values are not the defaults:\n%+v\n%+v", file.Chef, DefaultConfig())
	}
	// Uncomment the profile and compare it with the golden case's config.
	_, profile, found := strings.Cut(y, "Replace the lists and redact above with:\n  #\n")
	if !found {
		t.Fatal("config.example.yaml's chef: section has no public bus profile")
	}
	profile = regexp.MustCompile(`(?m)^  # ?`).ReplaceAllString(profile, "")
	profile = regexp.MustCompile(`(?m)\s+#.*$`).ReplaceAllString(profile, "")
	var fromExample, golden Config
	fromExample, golden = DefaultConfig(), DefaultConfig()
	if err := strictyaml.Decode([]byte(profile), &fromExample, strictyaml.Options{}); err != nil {
		t.Fatalf("profile:\n%s\n%v", profile, err)
	}
	g, err := os.ReadFile("testdata/08_public_bus_profile/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := strictyaml.Decode(g, &golden, strictyaml.Options{}); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(golden, DefaultConfig()) {
		t.Fatal("the golden profile is the defaults: nothing is compared")
	}
	if !reflect.DeepEqual(fromExample, golden) {
		t.Errorf("config.example.yaml's public bus profile differs from testdata/08_public_bus_profile/config.yaml:\n%+v\n%+v", fromExample, golden)
	}
}

// TestFixturesMirrorShared: each golden case named after a shared fixture
// (../shared/fixtures/chef/<name>.json, the real payloads) has it as its
// input.json, byte for byte, and every shared fixture has its case. Outside
// a checkout with ../shared the test skips, except under CI=true.
func TestFixturesMirrorShared(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared")
	if _, err := os.Stat(shared); err != nil {
		testkit.Unavailable(t, "%s is absent: %v", shared, err)
	}
	fixtures, err := filepath.Glob(filepath.Join(shared, "fixtures", "chef", "*.json"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no shared Chef fixtures in %s: %v", shared, err)
	}
	for _, f := range fixtures {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("testdata", name, "input.json"))
		if err != nil {
			t.Errorf("shared fixture %s has no golden case: %v", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/%s/input.json differs from %s; copy it again (cp %s testdata/%s/input.json)", name, f, f, name)
		}
	}
}

// TestPublicBusProfile: with the profile, no secret of the 08 input reaches
// any message, and the node keeps what a dashboard needs.
func TestPublicBusProfile(t *testing.T) {
	for _, c := range goldenCases(t) {
		if c.name != "08_public_bus_profile" {
			continue
		}
		h := newTestHandler(t, c.cfg, nil)
		_, msgs, err := h.messages(c.input)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			for _, secret := range []string{"hunter", "tok-123", "BEGIN KEY", "ketchup", "AAAAB3", "10.0.0.7", "/bin/sh", "password="} {
				if strings.Contains(string(m.Payload), secret) {
					t.Errorf("%s carries %q", m.Topic, secret)
				}
			}
		}
		var run struct {
			Node json.RawMessage `json:"node"`
		}
		if err := json.Unmarshal(msgs[0].Payload, &run); err != nil {
			t.Fatal(err)
		}
		want := `{"name":"app03.example.org","chef_environment":"production","json_class":"Chef::Node","chef_type":"node",` +
			`"automatic":{"fqdn":"app03.example.org","platform":"debian","platform_version":"12.5","chef_packages":{"chef":{"version":"18.4.12"}}},` +
			`"default":{},"normal":{"tags":["web"]},"override":{},"run_list":[]}`
		var got bytes.Buffer
		if err := json.Compact(&got, run.Node); err != nil || got.String() != want {
			t.Errorf("node:\n got %s\nwant %s", got.String(), want)
		}
		return
	}
	t.Fatal("no 08_public_bus_profile case")
}

// TestShadowedDuplicatesAreDropped: a body may repeat "node" or "resources";
// a decoder takes the last, which is the one filtered. With filtering or
// redaction configured the earlier copies are dropped, so that their
// secrets are not published; without, the body is published as received.
func TestShadowedDuplicatesAreDropped(t *testing.T) {
	var c goldenCase
	for _, gc := range goldenCases(t) {
		if gc.name == "08_public_bus_profile" {
			c = gc
		}
	}
	if c.input == nil {
		t.Fatal("no 08_public_bus_profile case")
	}
	const dups = `"node": {"normal": {"db_password": "dup-hunter2"}, "automatic": {"ipaddress": "10.9.9.9"}},` + "\n  " +
		`"resources": [{"type": "file", "name": "/etc/app.conf", "status": "updated", "before": {"password": "dup-res-secret"}}],` + "\n  "
	first := bytes.IndexByte(c.input, '"') // the first member's key
	body := append(append(append([]byte{}, c.input[:first]...), dups...), c.input[first:]...)
	secrets := []string{"dup-hunter2", "10.9.9.9", "dup-res-secret"}

	h := newTestHandler(t, c.cfg, nil)
	_, want, err := h.messages(c.input)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := h.messages(body)
	if err != nil {
		t.Fatal(err)
	}
	// Cutting the earlier copies gives back the fixture's messages exactly.
	if g, w := goldenLines(got), goldenLines(want); g != w {
		t.Errorf("with duplicates prepended:\n%s\nwant:\n%s", g, w)
	}
	for _, m := range got {
		for _, s := range secrets {
			if strings.Contains(string(m.Payload), s) {
				t.Errorf("%s carries %q from a shadowed member", m.Topic, s)
			}
		}
	}

	// The last copy is null: the fixture's node, secrets and all, is the
	// shadowed one now, and goes.
	end := bytes.LastIndexByte(c.input, '}')
	nulled := append(append(append([]byte{}, c.input[:end]...), `, "node": null`...), c.input[end:]...)
	_, got, err = h.messages(nulled)
	if err != nil {
		t.Fatal(err)
	}
	var run map[string]json.RawMessage
	if err := json.Unmarshal(got[0].Payload, &run); err != nil || string(run["node"]) != "null" {
		t.Fatalf("node = %s (%v)", run["node"], err)
	}
	for _, s := range []string{"hunter", "tok-123", "10.0.0.7", `"name": "app03.example.org"`} {
		if strings.Contains(string(got[0].Payload), s) {
			t.Errorf("the run message carries %q from the shadowed node", s)
		}
	}

	// Nothing configured: the body is published as received, without a copy.
	_, got, err = newTestHandler(t, DefaultConfig(), nil).messages(body)
	if err != nil {
		t.Fatal(err)
	}
	if p := got[0].Payload; len(p) != len(body) || &p[0] != &body[0] {
		t.Error("without filtering the run message is not the body itself")
	}
}
