package chef

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsfirehose/firehose/payloads"
)

// fixture reads one of the real payloads, kept with the adapter's golden cases.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "adapters", "chef", "testdata", name, "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parsers(t testing.TB) map[Validation]*Parser {
	t.Helper()
	out := map[Validation]*Parser{}
	for _, v := range []Validation{ValidationCompatible, ValidationStrict, ValidationOff} {
		p, err := NewParser(v)
		if err != nil {
			t.Fatal(err)
		}
		out[v] = p
	}
	return out
}

func TestClassify(t *testing.T) {
	tests := []struct {
		body string
		want Kind
		err  string
	}{
		{`{"message_type":"run_start"}`, KindRunStart, ""},
		{`{"message_type":"run_converge"}`, KindRunConverge, ""},
		{`{"message_type":"action"}`, KindAction, ""},
		// message_type wins over event_type and profiles, as in Automate.
		{`{"message_type":"action","event_type":"node_ping","profiles":[]}`, KindAction, ""},
		{`{"event_type":"node_ping","profiles":[]}`, KindLiveness, ""},
		// An unknown message_type falls through to the next rules.
		{`{"message_type":"bogus","event_type":"node_ping"}`, KindLiveness, ""},
		{`{"message_type":"bogus","profiles":null}`, KindCompliance, ""},
		{`{"type":"inspec_report","profiles":[]}`, KindCompliance, ""},
		{`{"event_type":"node_pong"}`, KindUnknown, "unknown message type"},
		{`{"message_type":5}`, KindUnknown, "unknown message type"},
		{`{}`, KindUnknown, "unknown message type"},
		// The last duplicate key wins, as when the body is decoded.
		{`{"message_type":"run_start","message_type":"action"}`, KindAction, ""},
		{`{"message_typ\u0065":"run_start"}`, KindRunStart, ""},
		{``, KindUnknown, "empty body"},
		{`   `, KindUnknown, "empty body"},
		{`[{"message_type":"run_start"}]`, KindUnknown, "must be a JSON object"},
		{`{"message_type":"run_start"`, KindUnknown, "invalid JSON at byte 27"},
		{`{"message_type":"run_start"} {}`, KindUnknown, "after the top-level value"},
	}
	for _, tt := range tests {
		got, err := Classify([]byte(tt.body))
		if got != tt.want {
			t.Errorf("Classify(%s) = %v, want %v", tt.body, got, tt.want)
		}
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("Classify(%s) error = %v, want %q", tt.body, err, tt.err)
		}
	}
}

// A run_converge that the strict schema accepts; the tests below break it
// one deviation at a time.
const strictConverge = `{
 "chef_server_fqdn": "chef.example.org", "entity_uuid": "05309d34-fb13-4587-8dc7-948807e50090",
 "id": "b3bbae70-1e93-4ffe-8499-9559601631fa", "end_time": "2024-03-05T10:01:00Z",
 "expanded_run_list": {"id": "x", "run_list": []}, "message_type": "run_converge", "message_version": "1.1.0",
 "node": {"name": "web01", "automatic": {"chef_packages": {"chef": {"version": "18.4.12"}}}},
 "node_name": "web01", "organization_name": "ops",
 "resources": [{"after": {}, "before": {}, "delta": "", "duration": "5", "id": "r", "ignore_failure": false,
   "name": "r", "result": "create", "status": "updated", "type": "file", "cookbook_name": "base", "cookbook_version": "1.0.0"}],
 "run_id": "b3bbae70-1e93-4ffe-8499-9559601631fa", "run_list": ["recipe[base]"], "source": "chef_client",
 "start_time": "2024-03-05T10:00:00Z", "status": "success", "total_resource_count": 1, "updated_resource_count": 1
}`

func mutate(t testing.TB, base string, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func resource0(m map[string]any) map[string]any {
	return m["resources"].([]any)[0].(map[string]any)
}

// Every deviation the fixtures README lists: compatible accepts it, strict
// refuses it and names the field.
func TestDeviations(t *testing.T) {
	p := parsers(t)
	if _, err := p[ValidationStrict].Parse([]byte(strictConverge)); err != nil {
		t.Fatalf("the base converge must be strictly valid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		field  string
	}{
		{"entity_uuid null after an early failure", func(m map[string]any) { m["entity_uuid"] = nil }, "entity_uuid"},
		{"entity_uuid as 32 hex digits under Habitat", func(m map[string]any) { m["entity_uuid"] = "05309d34fb1345878dc7948807e50090" }, "entity_uuid"},
		{"cookbook_version null", func(m map[string]any) { resource0(m)["cookbook_version"] = nil }, "resources[0].cookbook_version"},
		{"cookbook_name null", func(m map[string]any) { resource0(m)["cookbook_name"] = nil }, "resources[0].cookbook_name"},
		{"delta null", func(m map[string]any) { resource0(m)["delta"] = nil }, "resources[0].delta"},
		{"ignore_failure quiet", func(m map[string]any) { resource0(m)["ignore_failure"] = "quiet" }, "resources[0].ignore_failure"},
		{"before null", func(m map[string]any) { resource0(m)["before"] = nil }, "resources[0].before"},
		{"node null after an early failure", func(m map[string]any) { m["node"] = nil }, "node"},
		{"run_list null", func(m map[string]any) { m["run_list"] = nil }, "run_list"},
		{"expanded_run_list null", func(m map[string]any) { m["expanded_run_list"] = nil }, "expanded_run_list"},
		{"error null", func(m map[string]any) { m["error"] = nil }, "error"},
		{"message_version bumped", func(m map[string]any) { m["message_version"] = "1.2.0" }, "message_version"},
	}
	for _, tt := range tests {
		body := mutate(t, strictConverge, tt.mutate)
		if _, err := p[ValidationCompatible].Parse(body); err != nil {
			t.Errorf("%s: compatible refused it: %v", tt.name, err)
		}
		_, err := p[ValidationStrict].Parse(body)
		var perr *payloads.FieldError
		if !errors.As(err, &perr) || perr.Field != tt.field {
			t.Errorf("%s: strict gave %#v, want an error on %s", tt.name, err, tt.field)
		}
	}
	// What breaks even the compatible schema: published with a warning
	// naming the field, refused by strict, silent with validation off.
	bad := []struct {
		name   string
		mutate func(m map[string]any)
		field  string
		reason string
	}{
		{"status of a resource outside the enum", func(m map[string]any) { resource0(m)["status"] = "done" }, "resources[0].status", ReasonEnum},
		{"ignore_failure a number", func(m map[string]any) { resource0(m)["ignore_failure"] = 1 }, "resources[0].ignore_failure", ReasonType},
		{"resource without its id", func(m map[string]any) { delete(resource0(m), "id") }, "resources[0].id", ReasonRequired},
		{"resource without ignore_failure", func(m map[string]any) { delete(resource0(m), "ignore_failure") }, "resources[0].ignore_failure", ReasonRequired},
		{"entity_uuid not a uuid", func(m map[string]any) { m["entity_uuid"] = "web01" }, "entity_uuid", ReasonPattern},
		{"negative count", func(m map[string]any) { m["total_resource_count"] = -1 }, "total_resource_count", ReasonSchema},
		{"missing end_time", func(m map[string]any) { delete(m, "end_time") }, "end_time", ReasonRequired},
		{"node an array", func(m map[string]any) { m["node"] = []any{} }, "node", ReasonType},
		{"source chef_delivery", func(m map[string]any) { m["source"] = "chef_delivery" }, "source", ReasonEnum},
		{"missing organization_name, which is null", func(m map[string]any) { delete(m, "organization_name") }, "organization_name", ReasonType},
		{"node_name against Chef's rule", func(m map[string]any) { m["node_name"] = "web 01" }, "node_name", ReasonNodeName},
	}
	for _, tt := range bad {
		body := mutate(t, strictConverge, tt.mutate)
		m, err := p[ValidationCompatible].Parse(body)
		if err != nil {
			t.Errorf("%s: compatible refused it: %v", tt.name, err)
			continue
		}
		if w := m.Warnings(); len(w) != 1 || w[0].Field != tt.field || w[0].Reason != tt.reason || w[0].Msg == "" {
			t.Errorf("%s: compatible warned %+v, want one %s warning on %s", tt.name, w, tt.reason, tt.field)
		}
		_, err = p[ValidationStrict].Parse(body)
		var perr *payloads.FieldError
		if !errors.As(err, &perr) || perr.Field != tt.field {
			t.Errorf("%s: strict gave %v, want an error on %s", tt.name, err, tt.field)
		}
		if m, err := p[ValidationOff].Parse(body); err != nil || m.Warnings() != nil {
			t.Errorf("%s: off gave %v, warnings %v", tt.name, err, m.Warnings())
		}
	}
	// Every problem is listed, sorted by field.
	body := mutate(t, strictConverge, func(m map[string]any) {
		m["source"] = "chef_delivery"
		delete(m, "chef_server_fqdn")
		delete(resource0(m), "ignore_failure")
		m["node_name"] = "web(1)"
	})
	m, err := p[ValidationCompatible].Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, w := range m.Warnings() {
		fields = append(fields, w.Field)
	}
	if got := strings.Join(fields, " "); got != "chef_server_fqdn node_name resources[0].ignore_failure source" {
		t.Errorf("warnings on %s", got)
	}
}

func TestActionDeviations(t *testing.T) {
	p := parsers(t)
	body := fixture(t, "05_action_node_delete_chef_server")
	if _, err := p[ValidationCompatible].Parse(body); err != nil {
		t.Fatalf("compatible refused Chef Infra Server's action: %v", err)
	}
	if _, err := p[ValidationStrict].Parse(body); err == nil {
		t.Fatal("strict accepted an action the RFC does not allow (version 0.1.1, data a string, no entity_uuid)")
	}
	for _, et := range []string{"key", "policy", "cookbook_artifact_version"} {
		b := mutate(t, string(body), func(m map[string]any) { m["entity_type"] = et })
		if _, err := p[ValidationCompatible].Parse(b); err != nil {
			t.Errorf("entity_type %s: %v", et, err)
		}
	}
	b := mutate(t, string(body), func(m map[string]any) { m["entity_type"] = "spaceship" })
	if m, err := p[ValidationCompatible].Parse(b); err != nil || len(m.Warnings()) != 1 || m.Warnings()[0].Field != "entity_type" {
		t.Errorf("unknown entity_type: %v %v", err, m)
	}
	if _, err := p[ValidationStrict].Parse(b); err == nil {
		t.Error("unknown entity_type: strict accepted it")
	}
}

// What topics are built from is required whatever the mode; strict also
// refuses what compatible only warns of.
func TestTopicFields(t *testing.T) {
	liveness := `{"event_type":"node_ping","node_name":"db01","organization_name":"ops"}`
	report := `{"profiles":[],"node_name":"db01","node_uuid":"0c8f6f40-6b0a-4b8e-8d0f-2d3b0a4e5f61","end_time":"2024-03-05T10:31:02Z"}`
	action := string(fixture(t, "05_action_node_delete_chef_server"))
	const everyMode, strictOnly = true, false
	tests := []struct {
		base   string
		mutate func(m map[string]any)
		field  string
		msg    string
		refuse bool // in every mode, or only in strict
	}{
		{strictConverge, func(m map[string]any) { delete(m, "node_name") }, "node_name", "missing node_name", everyMode},
		{strictConverge, func(m map[string]any) { m["node_name"] = nil }, "node_name", "missing node_name", everyMode},
		{strictConverge, func(m map[string]any) { m["node_name"] = "" }, "node_name", "node_name is empty", everyMode},
		{strictConverge, func(m map[string]any) { m["node_name"] = 7 }, "node_name", "node_name must be a string, got a number", everyMode},
		{strictConverge, func(m map[string]any) { m["status"] = true }, "status", "status must be a string, got a boolean", everyMode},
		{strictConverge, func(m map[string]any) { m["status"] = "aborted" }, "status", `status must be "success" or "failure"`, everyMode},
		{strictConverge, func(m map[string]any) { m["node_name"] = "web 01" }, "node_name", "does not follow Chef's rule", strictOnly},
		{strictConverge, func(m map[string]any) { m["node_name"] = "web/01" }, "node_name", "does not follow Chef's rule", strictOnly},
		{strictConverge, func(m map[string]any) { m["node_name"] = "wéb01" }, "node_name", "does not follow Chef's rule", strictOnly},
		{strictConverge, func(m map[string]any) { delete(m, "organization_name") }, "organization_name", "missing organization_name", strictOnly},
		{strictConverge, func(m map[string]any) { delete(m, "run_id") }, "run_id", "missing run_id", strictOnly},
		{action, func(m map[string]any) { delete(m, "task") }, "task", "missing task", everyMode},
		{action, func(m map[string]any) { m["entity_type"] = "" }, "entity_type", "entity_type is empty", everyMode},
		{action, func(m map[string]any) { m["task"] = []any{} }, "task", "task must be a string, got an array", everyMode},
		{action, func(m map[string]any) { delete(m, "entity_name") }, "entity_name", "missing entity_name", strictOnly},
		{action, func(m map[string]any) { m["organization_name"] = 1 }, "organization_name", "must be a string or null", strictOnly},
		{liveness, func(m map[string]any) { delete(m, "node_name") }, "node_name", "missing node_name", everyMode},
		{liveness, func(m map[string]any) { m["node_name"] = "db01\n" }, "node_name", "does not follow Chef's rule", strictOnly},
		{liveness, func(m map[string]any) { m["organization_name"] = 5 }, "organization_name", "must be a string or null", strictOnly},
		{report, func(m map[string]any) { m["node_name"] = "My Compliant Node" }, "node_name", "does not follow Chef's rule", strictOnly},
		{report, func(m map[string]any) { m["profiles"] = "x" }, "profiles", "profiles must be an array", strictOnly},
	}
	for mode, p := range parsers(t) {
		for _, tt := range tests {
			body := mutate(t, tt.base, tt.mutate)
			m, err := p.Parse(body)
			var perr *payloads.FieldError
			if tt.refuse || mode == ValidationStrict {
				if !errors.As(err, &perr) || perr.Field != tt.field || !strings.Contains(perr.Msg, tt.msg) {
					t.Errorf("%s: got %#v, want %s: %q", mode, err, tt.field, tt.msg)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s refused: %v", mode, body, err)
				continue
			}
			var on []string
			for _, w := range m.Warnings() {
				on = append(on, w.Field)
			}
			if mode == ValidationOff && on != nil || mode == ValidationCompatible && !slices.Contains(on, tt.field) {
				t.Errorf("%s: %s: warnings on %v, want one on %s", mode, body, on, tt.field)
			}
		}
	}
	for _, name := range []string{"web01.example.org", "WEB-01_a:b.c", "FVFWM0M8HV2J", "-"} {
		if !ValidNodeName(name) {
			t.Errorf("%q should be a valid node name", name)
		}
	}
}

// A missing organization_name is null everywhere: "" or nil in the message,
// which topics write as "_", and null to the compatible schema, which allows
// it in actions (Chef Infra Server's, outside an org) and not in runs.
func TestMissingOrganizationIsNull(t *testing.T) {
	p := parsers(t)[ValidationCompatible]
	warned := func(m Message) string {
		var out []string
		for _, w := range m.Warnings() {
			out = append(out, w.Field+" "+w.Reason)
		}
		return strings.Join(out, ",")
	}
	for _, body := range [][]byte{
		mutate(t, strictConverge, func(m map[string]any) { delete(m, "organization_name") }),
		mutate(t, strictConverge, func(m map[string]any) { m["organization_name"] = nil }),
	} {
		m, err := p.Parse(body)
		if err != nil || m.(*RunConverge).OrganizationName != "" || warned(m) != "organization_name schema_type" {
			t.Errorf("%s: %v %+v", body, err, m)
		}
	}
	action := string(fixture(t, "05_action_node_delete_chef_server"))
	for _, body := range [][]byte{
		mutate(t, action, func(m map[string]any) { delete(m, "organization_name") }),
		mutate(t, action, func(m map[string]any) { m["organization_name"] = nil }),
	} {
		m, err := p.Parse(body)
		if err != nil || m.(*Action).OrganizationName != nil || warned(m) != "" {
			t.Errorf("%s: %v %+v", body, err, m)
		}
	}
	// Strict keeps the RFC: the key is required.
	if _, err := parsers(t)[ValidationStrict].Parse(mutate(t, action, func(m map[string]any) { delete(m, "organization_name") })); err == nil {
		t.Error("strict accepted an action without organization_name")
	}
}

func TestParseFixtures(t *testing.T) {
	p := parsers(t)[ValidationCompatible]
	m, err := p.Parse(fixture(t, "02_run_converge_success_chef12_ubuntu"))
	if err != nil {
		t.Fatal(err)
	}
	c := m.(*RunConverge)
	if c.NodeName != "chefdk-ubuntu-16.04-tester-91bc78" || c.OrganizationName != "chef" || c.Status != "success" ||
		*c.ChefVersion != "12.21.3" || *c.TotalResourceCount != 354 || *c.UpdatedResourceCount != 13 ||
		c.PolicyName != nil || c.Error != nil || len(c.Resources) != 92 {
		t.Fatalf("%+v", c)
	}
	updated, noCookbook := 0, 0
	for i, r := range c.Resources {
		if r.Index != i || string(c.Body[r.Offset:r.Offset+len(r.Raw)]) != string(r.Raw) || !json.Valid(r.Raw) {
			t.Fatalf("resource %d: bad span", i)
		}
		if r.Status == "updated" {
			updated++
		}
		if r.CookbookName == "" {
			noCookbook++
		}
	}
	if updated != 13 || noCookbook != 13 {
		t.Fatalf("%d updated, %d without a cookbook", updated, noCookbook)
	}
	if string(c.Body[c.Node.Offset:c.Node.Offset+len(c.Node.Raw)]) != string(c.Node.Raw) {
		t.Fatal("node span")
	}

	m, err = p.Parse(fixture(t, "03_run_converge_failure_chef15_policyfile_macos"))
	if err != nil {
		t.Fatal(err)
	}
	c = m.(*RunConverge)
	if c.Status != "failure" || *c.PolicyName != "ChefDesktop" || *c.PolicyGroup != "client_group" ||
		*c.Error.Class != "NoMethodError" || *c.ChefVersion != "15.8.23" || len(c.Resources) != 0 {
		t.Fatalf("%+v", c)
	}

	m, err = p.Parse(fixture(t, "01_run_start_chef12_ubuntu"))
	if err != nil {
		t.Fatal(err)
	}
	if s := m.(*RunStart); s.RunID != "b3bbae70-1e93-4ffe-8499-9559601631fa" {
		t.Fatalf("%+v", s)
	}
	m, err = p.Parse(fixture(t, "05_action_node_delete_chef_server"))
	if err != nil {
		t.Fatal(err)
	}
	if a := m.(*Action); a.EntityType != "node" || a.Task != "delete" || *a.OrganizationName != "chef" ||
		a.ID != "0766e90f-fa48-44ed-acf4-fa9011758838" {
		t.Fatalf("%+v", a)
	}
}

// TestShadowed: earlier duplicates of "node" and "resources" are listed with
// the span that cuts each, key to next key; the last copy is the one used.
func TestShadowed(t *testing.T) {
	p := parsers(t)[ValidationOff]
	head := `{"message_type":"run_converge","node_name":"n","organization_name":"o","run_id":"r","status":"success",`
	tests := []struct {
		name, members string
		cut           []string
		cutBody       string
	}{
		{"none", `"node":{"a":1},"resources":[]}`, nil, ""},
		{"node twice", `"node":{"secret":1}, "x":1,"node" : {"a":2}}`, []string{`"node":{"secret":1}, `},
			head + `"x":1,"node" : {"a":2}}`},
		{"three of each, the last not an object",
			`"resources":[{"p":1}],"node":{"s":1},` + "\n" + `"node":[2],"resources":[{"p":2}],"node":null,"resources":{}}`,
			[]string{`"resources":[{"p":1}],`, `"node":{"s":1},` + "\n", `"node":[2],`, `"resources":[{"p":2}],`},
			head + `"node":null,"resources":{}}`},
		{"escaped keys count", `"no\u0064e":{"s":1},"node":{}}`, []string{`"no\u0064e":{"s":1},`}, head + `"node":{}}`},
	}
	for _, tt := range tests {
		body := []byte(head + tt.members)
		m, err := p.Parse(body)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		c := m.(*RunConverge)
		var cuts []string
		var rest []byte
		at := 0
		for _, s := range c.Shadowed {
			if string(body[s.Offset:s.Offset+len(s.Raw)]) != string(s.Raw) {
				t.Fatalf("%s: span %d does not locate %q", tt.name, s.Offset, s.Raw)
			}
			cuts = append(cuts, string(s.Raw))
			rest = append(rest, body[at:s.Offset]...)
			at = s.Offset + len(s.Raw)
		}
		rest = append(rest, body[at:]...)
		if strings.Join(cuts, "|") != strings.Join(tt.cut, "|") {
			t.Errorf("%s: shadowed %q, want %q", tt.name, cuts, tt.cut)
		}
		if tt.cut != nil && string(rest) != tt.cutBody {
			t.Errorf("%s: cut body %s, want %s", tt.name, rest, tt.cutBody)
		}
	}
}

func TestInvalidUTF8PassesThrough(t *testing.T) {
	body := []byte("{\"message_type\":\"run_start\",\"node_name\":\"web01\",\"organization_name\":\"ops\",\"run_id\":\"b3bbae70-1e93-4ffe-8499-9559601631fa\",\"chef_server_fqdn\":\"a\xffb\"}")
	m, err := parsers(t)[ValidationOff].Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.(*RunStart).Body) != string(body) {
		t.Fatal("body changed")
	}
}

// TestComplianceSummary follows each of Chef Automate's rules (see
// complianceSummary) with the smallest report that shows it.
func TestComplianceSummary(t *testing.T) {
	control := func(extra string, statuses ...string) string {
		var rs []string
		for _, s := range statuses {
			rs = append(rs, `{"status":"`+s+`"}`)
		}
		return `{"id":"c","results":[` + strings.Join(rs, ",") + `]` + extra + `}`
	}
	waiver := func(w string) string { return `,"waiver_data":` + w }
	profile := func(extra string, controls ...string) string {
		return `{"name":"p"` + extra + `,"controls":[` + strings.Join(controls, ",") + `]}`
	}
	list := func(ps ...string) string { return `[` + strings.Join(ps, ",") + `]` }
	tests := []struct {
		name, profiles, status string
		// want is "<verdict> <total>/<passed>/<skipped>/<failed>(<minor>,<major>,<critical>)/<waived>"
		want string
	}{
		{"no profiles: InSpec threw", `[]`, "", "failed 0/0/0/0(0,0,0)/0"},
		{"profiles null", `null`, "", "failed 0/0/0/0(0,0,0)/0"},
		{"the report's own failure, InSpec not found", `[]`, "failed", "failed 0/0/0/0(0,0,0)/0"},
		{"the report's own failure is ignored when profiles ran", list(profile("", control("", "passed"))), "failed", "passed 1/1/0/0(0,0,0)/0"},
		{"a profile that failed to load beats a passed control",
			list(profile(`,"status":"failed"`), profile("", control("", "passed"))), "", "failed 1/1/0/0(0,0,0)/0"},
		{"a skipped profile without controls", list(profile(`,"status":"skipped"`)), "", "skipped 0/0/0/0(0,0,0)/0"},
		{"one skipped profile of two", list(profile(`,"status":"skipped"`), profile("", control("", "passed"))), "", "passed 1/1/0/0(0,0,0)/0"},
		{"loaded is computed", list(profile(`,"status":"loaded"`, control("", "skipped"))), "", "skipped 1/0/1/0(0,0,0)/0"},
		{"no results: passed", list(profile("", control(""))), "", "passed 1/1/0/0(0,0,0)/0"},
		{"a skipped result makes a skipped control", list(profile("", control("", "passed", "skipped"))), "", "skipped 1/0/1/0(0,0,0)/0"},
		{"a failed result wins", list(profile("", control("", "skipped", "failed", "passed"))), "", "failed 1/0/0/1(1,0,0)/0"},
		{"some skipped, some passed", list(profile("", control("", "skipped"), control("", "passed"))), "", "passed 2/1/1/0(0,0,0)/0"},
		{"every control waived", list(profile("", control(waiver(`{"justification":"accepted risk","run":false}`), "failed"))), "", "waived 1/0/0/0(0,0,0)/1"},
		{"waived and passed", list(profile("", control(waiver(`{"run":true}`), "failed"), control("", "passed"))), "", "passed 2/1/0/0(0,0,0)/1"},
		{"waived and failed", list(profile("", control(waiver(`{"run":true}`), "passed"), control("", "failed"))), "", "failed 2/0/0/1(1,0,0)/1"},
		{"skipped due to waiver", list(profile("", control(waiver(`{"skipped_due_to_waiver":true}`), "skipped"))), "", "waived 1/0/0/0(0,0,0)/1"},
		{"an expired waiver leaves the results", list(profile("", control(waiver(`{"message":"Waiver expired on 2020-01-01","justification":"x"}`), "failed"))), "", "failed 1/0/0/1(1,0,0)/0"},
		{"empty waiver data waives nothing", list(profile("", control(waiver(`{}`), "failed"))), "", "failed 1/0/0/1(1,0,0)/0"},
		{"zero waiver fields waive nothing", list(profile("", control(waiver(`{"justification":"","run":false,"other":"x"}`), "skipped"))), "", "skipped 1/0/1/0(0,0,0)/0"},
		{"null waiver data", list(profile("", control(waiver(`null`), "passed"))), "", "passed 1/1/0/0(0,0,0)/0"},
		{"impacts", list(profile("",
			control(`,"impact":0.39`, "failed"), control(`,"impact":0.4`, "failed"), control(`,"impact":0.69`, "failed"),
			control(`,"impact":0.7`, "failed"), control(`,"impact":1`, "failed"), control(`,"impact":null`, "failed"))), "",
			"failed 6/0/0/6(2,2,2)/0"},
		{"impact is a float32: 0.399999999 is 0.4", list(profile("", control(`,"impact":0.399999999`, "failed"))), "", "failed 1/0/0/1(0,1,0)/0"},
		{"no impact is 0: minor", list(profile("", control("", "failed"))), "", "failed 1/0/0/1(1,0,0)/0"},
		{"a dependency counts in its wrapper only",
			list(`{"name":"wrapper","depends":[{"name":"base"}],"controls":[{"id":"c1"},{"id":"c2","results":[{"status":"passed"}]}]}`,
				`{"name":"base","controls":[{"id":"c1","results":[{"status":"failed"}]},{"id":"c2","results":[{"status":"failed"}]}]}`),
			"", "failed 2/1/0/1(1,0,0)/0"},
		{"empty results are results: nothing merged",
			list(`{"name":"wrapper","depends":[{"name":"base"}],"controls":[{"id":"c1","results":[]}]}`,
				`{"name":"base","controls":[{"id":"c1","results":[{"status":"failed"}]}]}`),
			"", "passed 1/1/0/0(0,0,0)/0"},
		{"a profile with a parent is not counted",
			list(profile("", control("", "passed")), `{"name":"child","parent_profile":"p","controls":[`+control("", "failed")+`]}`),
			"", "passed 1/1/0/0(0,0,0)/0"},
		{"a dependency loop ends", list(`{"name":"a","depends":[{"name":"a"}],"controls":[{"id":"c"}]}`, profile("", control("", "passed"))),
			"", "passed 1/1/0/0(0,0,0)/0"},
		{"what is not a profile or control is skipped", `[1, "x", null, {"controls": 5}, {"controls": [7, {"results": 3}]}]`, "",
			"passed 1/1/0/0(0,0,0)/0"},
	}
	for _, tt := range tests {
		var problems []Warning
		s := complianceSummary([]byte(tt.profiles), tt.status, "InSpec not found", &problems)
		c := s.ControlsSums
		got := fmt.Sprintf("%s %d/%d/%d/%d(%d,%d,%d)/%d", s.Status, c.Total, c.Passed.Total, c.Skipped.Total,
			c.Failed.Total, c.Failed.Minor, c.Failed.Major, c.Failed.Critical, c.Waived.Total)
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if (s.StatusMessage != "") != (tt.status == "failed" && strings.HasPrefix(tt.want, "failed 0/")) {
			t.Errorf("%s: status_message %q", tt.name, s.StatusMessage)
		}
	}
}

// The published body gains the summary as its last member, and loses any
// the sender wrote, whatever its position.
func TestPublishedSummary(t *testing.T) {
	p := parsers(t)[ValidationCompatible]
	const sum = `"compliance_summary":{"status":"failed","status_message":"x","controls_sums":{"total":0,"passed":{"total":0},"skipped":{"total":0},"failed":{"total":0,"minor":0,"major":0,"critical":0},"waived":{"total":0}},"profiles":[]}`
	tests := []struct{ in, want string }{
		{`{"node_name":"n","profiles":[],"status":"failed","status_message":"x"}`,
			`{"node_name":"n","profiles":[],"status":"failed","status_message":"x",` + sum + `}`},
		{"{\"node_name\":\"n\",\"profiles\":[],\"status\":\"failed\",\"status_message\":\"x\"}\n",
			"{\"node_name\":\"n\",\"profiles\":[],\"status\":\"failed\",\"status_message\":\"x\"," + sum + "}\n"},
		{`{"compliance_summary":{"status":"passed"}, "node_name":"n","profiles":[],"status":"failed","status_message":"x"}`,
			`{"node_name":"n","profiles":[],"status":"failed","status_message":"x",` + sum + `}`},
		{`{"node_name":"n","profiles":[],"status":"failed","status_message":"x" , "compliance_summary":1,"compliance_summary":2 }`,
			`{"node_name":"n","profiles":[],"status":"failed","status_message":"x" ,` + sum + `}`},
		{`{"node_name":"n","compliance_summary":1,"profiles":[],"compliance_summary":2,"status":"failed","status_message":"x","compliance_summary":3}`,
			`{"node_name":"n","profiles":[],"status":"failed","status_message":"x",` + sum + `}`},
	}
	for _, tt := range tests {
		m, err := p.Parse([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		got := m.(*Compliance).Published()
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.in, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON", got)
		}
	}
}

func TestValidationText(t *testing.T) {
	for _, s := range []string{"compatible", "strict", "off"} {
		var v Validation
		if err := v.UnmarshalText([]byte(s)); err != nil || v.String() != s {
			t.Errorf("%s: %v %v", s, v, err)
		}
	}
	var v Validation
	if err := v.UnmarshalText([]byte("lenient")); err == nil || !strings.Contains(err.Error(), "compatible, strict or off") {
		t.Errorf("lenient: %v", err)
	}
}

func FuzzClassify(f *testing.F) {
	for _, name := range []string{"01_run_start_chef12_ubuntu", "05_action_node_delete_chef_server"} {
		f.Add(fixture(f, name))
	}
	for _, s := range []string{`{"event_type":"node_ping"}`, `{"profiles":[]}`, `{"message_type":"run_converge"}`, `[]`, ``, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		k, err := Classify(body)
		if (k == KindUnknown) != (err != nil) {
			t.Fatalf("kind %v with error %v", k, err)
		}
		var m map[string]any
		isObject := json.Unmarshal(body, &m) == nil && m != nil
		if k != KindUnknown && !isObject {
			t.Fatalf("classified %q, which is not a JSON object", body)
		}
		if isObject && err != nil && err != ErrUnknownType {
			t.Fatalf("a JSON object was refused as malformed: %v", err)
		}
		// The classification agrees with the decoded object.
		if isObject {
			want := KindUnknown
			mt, _ := m["message_type"].(string)
			et, _ := m["event_type"].(string)
			_, hasProfiles := m["profiles"]
			switch {
			case mt == "run_start":
				want = KindRunStart
			case mt == "run_converge":
				want = KindRunConverge
			case mt == "action":
				want = KindAction
			case et == "node_ping":
				want = KindLiveness
			case hasProfiles:
				want = KindCompliance
			}
			if k != want {
				t.Fatalf("Classify(%q) = %v, decoded object says %v", body, k, want)
			}
		}
	})
}

// validFull is the verdict of the schema on the fully decoded body, which the
// stand-ins of Parse must reproduce.
func validFull(t testing.TB, p *Parser, body []byte) (bool, bool) {
	k, err := Classify(body)
	s := p.schemas[k]
	if err != nil || s == nil {
		return false, false
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("classified, yet not decodable: %v", err)
	}
	return s.compiled.Validate(v) == nil, true
}

func TestStandInsAgreeWithFullDecode(t *testing.T) {
	p := parsers(t)
	bodies := [][]byte{[]byte(strictConverge)}
	for _, name := range []string{"01_run_start_chef12_ubuntu", "02_run_converge_success_chef12_ubuntu",
		"03_run_converge_failure_chef15_policyfile_macos", "05_action_node_delete_chef_server"} {
		bodies = append(bodies, fixture(t, name))
	}
	bodies = append(bodies,
		mutate(t, strictConverge, func(m map[string]any) { resource0(m)["name"] = 5 }),
		mutate(t, strictConverge, func(m map[string]any) { resource0(m)["after"] = "x" }),
		mutate(t, strictConverge, func(m map[string]any) { m["node"] = "x" }),
		mutate(t, strictConverge, func(m map[string]any) { m["resources"] = []any{1, "x", nil} }),
		mutate(t, strictConverge, func(m map[string]any) { m["run_list"] = []any{1} }),
	)
	for _, mode := range []Validation{ValidationCompatible, ValidationStrict} {
		for i, b := range bodies {
			full, ok := validFull(t, p[mode], b)
			if !ok {
				t.Fatalf("body %d not classified", i)
			}
			if valid := schemaValid(p[mode], b); full != valid {
				t.Errorf("%s, body %d: full decode valid=%v, stand-ins %v", mode, i, full, valid)
			}
		}
	}
}

// schemaValid is the schema's verdict through Parse: no error in strict, no
// schema warning in compatible.
func schemaValid(p *Parser, body []byte) bool {
	m, err := p.Parse(body)
	if p.Mode() == ValidationStrict || err != nil {
		return err == nil
	}
	for _, w := range m.Warnings() {
		if strings.HasPrefix(w.Reason, "schema_") {
			return false
		}
	}
	return true
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(strictConverge))
	f.Add(fixture(f, "05_action_node_delete_chef_server"))
	f.Add([]byte(`{"event_type":"node_ping","node_name":"n","organization_name":null}`))
	f.Add([]byte(`{"profiles":[{"controls":[{"results":[{"status":"failed"}]}]}],"node_name":"n"}`))
	f.Add([]byte(`{"profiles":[{"name":"a","depends":[{"name":"a"}],"controls":[{"id":"c","waiver_data":{"run":true}}]}],"node_name":"n"}`))
	ps := parsers(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for mode, p := range ps {
			m, err := p.Parse(body)
			// The stand-ins must not change the schema's verdict: strict
			// refuses, and compatible warns of, what the schema refuses
			// decoded.
			if full, ok := validFull(t, p, body); ok && err == nil {
				d, _ := document(body)
				k, _ := Classify(body)
				valid := schemaValid(p, body)
				if mode == ValidationCompatible && topicRules(k, d) == nil && full != valid {
					t.Fatalf("%s: decoded, the schema says valid=%v of %q; Parse says %v", mode, full, body, valid)
				}
				if mode == ValidationStrict && !full {
					t.Fatalf("strict: the schema refuses %q decoded, Parse accepted it", body)
				}
			}
			if err != nil {
				var perr *payloads.FieldError
				if !errors.As(err, &perr) || perr.Msg == "" {
					t.Fatalf("%s: error %#v is not a *payloads.FieldError with a message", mode, err)
				}
				continue
			}
			if mode == ValidationOff && m.Warnings() != nil {
				t.Fatalf("off warned: %v", m.Warnings())
			}
			for _, w := range m.Warnings() {
				if !slices.Contains(Reasons(), w.Reason) || w.Msg == "" {
					t.Fatalf("%s: warning %+v", mode, w)
				}
			}
			switch m := m.(type) {
			case *RunConverge:
				if m.NodeName == "" || (m.Status != "success" && m.Status != "failure") {
					t.Fatalf("%s: accepted %+v", mode, m)
				}
				if mode == ValidationStrict && (!ValidNodeName(m.NodeName) || m.OrganizationName == "" || m.RunID == "") {
					t.Fatalf("strict accepted %+v", m)
				}
				for _, r := range m.Resources {
					if !json.Valid(r.Raw) {
						t.Fatalf("resource %d is not valid JSON", r.Index)
					}
				}
			case *Compliance:
				if !slices.Contains([]string{CompliancePassed, ComplianceFailed, ComplianceSkipped, ComplianceWaived}, m.Status) {
					t.Fatalf("status %q", m.Status)
				}
				pub := m.Published()
				var v map[string]json.RawMessage
				if json.Valid(body) && (json.Unmarshal(pub, &v) != nil || v[SummaryKey] == nil) {
					t.Fatalf("published %q: not an object with the summary", pub)
				}
			case *Action:
				if m.EntityType == "" || m.Task == "" {
					t.Fatalf("%+v", m)
				}
			}
		}
	})
}
