package chef

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

const testToken = "dc-token-123"

// bridge is the adapter behind a real HTTP server, publishing on a real broker.
type bridge struct {
	bus     *testbus.Bus
	srv     *httptest.Server
	h       *Handler
	reg     *prometheus.Registry
	dataDir string
}

func startBridge(t *testing.T, cfg Config) *bridge {
	t.Helper()
	return startBridgeWith(t, cfg, "")
}

// startBridgeWith is startBridge with the rollout store in dataDir ("":
// none).
func startBridgeWith(t *testing.T, cfg Config, dataDir string) *bridge {
	t.Helper()
	b := testbus.Start(t)
	reg := prometheus.NewRegistry()
	h, err := New(cfg, Options{Options: intake.Options{
		Publisher:  b,
		Tokens:     httpserver.NewTokens([]httpserver.Token{{Name: "chef-clients", Token: testToken}}),
		Now:        func() time.Time { return fixedNow },
		Registerer: reg,
	}, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return &bridge{bus: b, srv: srv, h: h, reg: reg, dataDir: dataDir}
}

// counter is the value of the counter name{labels}, 0 when it has none.
func (b *bridge) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// noRedirects is an HTTP client that fails on any redirect, as chef-client
// does on a redirected POST.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
	return errors.New("redirected")
}}

// postLikeChef POSTs body with the headers chef-client sends.
func postLikeChef(t *testing.T, url string, body []byte, runID string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-data-collector-token", testToken)
	req.Header.Set("x-data-collector-auth", "version=1.0")
	req.Header.Set("X-REMOTE-REQUEST-ID", runID)
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEndToEnd posts every golden case the way chef-client does and checks
// what real MQTT subscribers with wildcard filters receive.
func TestEndToEnd(t *testing.T) {
	br := startBridge(t, DefaultConfig())
	all := br.bus.Subscribe(t, "chef/#")
	statuses := br.bus.Subscribe(t, "chef/+/+/status")
	resources := br.bus.Subscribe(t, "chef/+/+/resource/+/#")
	var wantAll, wantStatus, wantResources []string
	for i, c := range goldenCases(t) {
		if _, err := os.Stat(filepath.Join(c.dir, "config.yaml")); err == nil {
			continue // needs another config; covered by TestGolden
		}
		url := br.srv.URL + Path
		if i%2 == 1 {
			url = br.srv.URL + PathNoEnd
		}
		code, body := postLikeChef(t, url, c.input, c.name)
		if code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
			t.Fatalf("%s: %d %s", c.name, code, body)
		}
		want, err := os.ReadFile(filepath.Join(c.dir, "output.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(want), "\n"), "\n") {
			topic := strings.SplitN(line, "\t", 2)[0]
			wantAll = append(wantAll, line)
			if strings.HasSuffix(topic, "/status") {
				wantStatus = append(wantStatus, line)
			}
			if strings.Contains(topic, "/resource/") {
				wantResources = append(wantResources, line)
			}
		}
	}
	check := func(name string, ch <-chan testkit.Received, barrier string, want []string) {
		t.Helper()
		got := br.bus.Collect(t, ch, barrier)
		var lines []string
		for _, m := range got {
			// A subscriber sees retained=false on live messages: the flag
			// reaches only those who subscribe later (checked below).
			lines = append(lines, m.Topic+"\t"+payloadOrDigest([]byte(m.Payload)))
		}
		var wantLines []string
		for _, w := range want {
			f := strings.Split(w, "\t") // topic, retained, payload, summary
			wantLines = append(wantLines, f[0]+"\t"+f[2])
		}
		if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
			t.Errorf("%s received:\n%s\nwant:\n%s", name, strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
		}
	}
	check("chef/#", all, "chef/barrier", wantAll)
	check("chef/+/+/status", statuses, "chef/barrier/x/status", wantStatus)
	check("chef/+/+/resource/+/#", resources, "chef/barrier/x/resource/x/y", wantResources)
	if len(wantResources) < 13 || len(wantStatus) < 2 {
		t.Fatalf("%d resource and %d status messages expected from the fixtures", len(wantResources), len(wantStatus))
	}

	// A dashboard that subscribes now gets the whole fleet's last state at
	// once, from the retained status messages.
	late := br.bus.Subscribe(t, "chef/+/+/status")
	got := map[string]testkit.Received{}
	for range wantStatus {
		m := testkit.Next(t, late)
		got[m.Topic] = m
	}
	for _, topic := range []string{"chef/chef/chefdk-ubuntu-16.04-tester-91bc78/status", "chef/chefit-development/FVFWM0M8HV2J/status"} {
		m, ok := got[topic]
		if !ok || !m.Retained {
			t.Errorf("no retained status on %s: %+v", topic, got)
		}
		var s chefpayload.Summary
		if err := json.Unmarshal([]byte(m.Payload), &s); err != nil || s.RunID == "" {
			t.Errorf("%s: %v %s", topic, err, m.Payload)
		}
	}

	// The run_start body arrives byte for byte, invalid UTF-8 included.
	sub := br.bus.Subscribe(t, "chef/ops/web02.example.org/run/start")
	input, _ := os.ReadFile("testdata/09_run_start_invalid_utf8/input.json")
	if code, body := postLikeChef(t, br.srv.URL+Path, input, "x"); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if m := testkit.Next(t, sub); m.Payload != string(input) {
		t.Fatalf("payload changed in transit:\n%q\n%q", m.Payload, input)
	}
}

func TestResourceMessages(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ResourceStatuses = []string{"up-to-date", "skipped"}
	h := newTestHandler(t, cfg, nil)
	body, _ := os.ReadFile("testdata/02_run_converge_success_chef12_ubuntu/input.json")
	_, msgs, err := h.messages(body)
	if err != nil {
		t.Fatal(err)
	}
	// 92 resources: 13 updated, the rest up-to-date or skipped.
	if len(msgs) != 1+79+1 {
		t.Fatalf("%d messages", len(msgs))
	}
	var cookbookless int
	for i, m := range msgs[1 : len(msgs)-1] {
		var p struct {
			RunID            string          `json:"run_id"`
			NodeName         string          `json:"node_name"`
			OrganizationName string          `json:"organization_name"`
			PolicyName       *string         `json:"policy_name"`
			PolicyGroup      *string         `json:"policy_group"`
			Resource         json.RawMessage `json:"resource"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatalf("resource message %d: %v", i, err)
		}
		var r struct {
			Status       string  `json:"status"`
			CookbookName *string `json:"cookbook_name"`
		}
		_ = json.Unmarshal(p.Resource, &r)
		if p.RunID != "b3bbae70-1e93-4ffe-8499-9559601631fa" || p.NodeName != "chefdk-ubuntu-16.04-tester-91bc78" ||
			p.OrganizationName != "chef" || p.PolicyName != nil || p.PolicyGroup != nil ||
			!strings.HasSuffix(m.Topic, "/"+r.Status) || !bytes.Contains(body, p.Resource) {
			t.Fatalf("resource message %d on %s: %s", i, m.Topic, m.Payload)
		}
		if r.CookbookName == nil {
			cookbookless++
			if !strings.Contains(m.Topic, "/resource/_/") {
				t.Fatalf("a resource without a cookbook went to %s", m.Topic)
			}
		}
	}
	if cookbookless != 11 {
		t.Fatalf("%d resources without a cookbook", cookbookless)
	}

	cfg.ResourceStatuses = []string{}
	h = newTestHandler(t, cfg, nil)
	if _, msgs, _ = h.messages(body); len(msgs) != 2 {
		t.Fatalf("resource_statuses [] published %d messages", len(msgs))
	}
}

func TestHeadersAndDedupIDs(t *testing.T) {
	h := newTestHandler(t, DefaultConfig(), nil)
	ids := map[string]string{}
	for _, c := range goldenCases(t) {
		if c.name == "08_public_bus_profile" {
			continue
		}
		_, msgs, err := h.messages(c.input)
		if err != nil {
			t.Fatal(err)
		}
		_, again, _ := h.messages(c.input)
		for i, m := range msgs {
			id := m.Headers[bus.HeaderMsgID]
			if m.Headers[bus.HeaderSource] != "chef" || m.Headers[bus.HeaderReceivedAt] != "2024-03-05T10:31:00Z" || m.QoS != 1 {
				t.Errorf("%s: headers %v qos %d", m.Topic, m.Headers, m.QoS)
			}
			if again[i].Headers[bus.HeaderMsgID] != id {
				t.Errorf("%s: the de-dup id changes on retry", m.Topic)
			}
			if prev, dup := ids[id]; dup {
				t.Errorf("%s and %s share the de-dup id %s", prev, m.Topic, id)
			}
			ids[id] = m.Topic
		}
	}
	for id, topic := range map[string]string{
		"b3bbae70-1e93-4ffe-8499-9559601631fa:run_start":                      "chef/chef/chefdk-ubuntu-16.04-tester-91bc78/run/start",
		"b3bbae70-1e93-4ffe-8499-9559601631fa:run_converge":                   "chef/chef/chefdk-ubuntu-16.04-tester-91bc78/run/success",
		"b3bbae70-1e93-4ffe-8499-9559601631fa:status":                         "chef/chef/chefdk-ubuntu-16.04-tester-91bc78/status",
		"b3bbae70-1e93-4ffe-8499-9559601631fa:resource:4":                     "chef/chef/chefdk-ubuntu-16.04-tester-91bc78/resource/opscode-ci/updated",
		"0766e90f-fa48-44ed-acf4-fa9011758838:action":                         "chef/chef/action/node/delete/a2-local-fresh-install-unstable.cd.chef.co",
		"7d4b2f9e-1a3c-4e5d-8f60-9b1a2c3d4e5f:ef5f58fd529abad1:inspec_report": "chef/ops/web01.example.org/compliance/failed",
	} {
		if ids[id] != topic {
			t.Errorf("id %s is on %q, want %s", id, ids[id], topic)
		}
	}
}

// TestBadInput: each refusal is the right 4xx with a JSON error naming the
// problem, and nothing reaches the bus.
func TestBadInput(t *testing.T) {
	br := startBridge(t, DefaultConfig())
	sub := br.bus.Subscribe(t, "#")
	converge, _ := os.ReadFile("testdata/02_run_converge_success_chef12_ubuntu/input.json")
	start, _ := os.ReadFile("testdata/01_run_start_chef12_ubuntu/input.json")
	replace := func(b []byte, old, new string) []byte {
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%q not in the fixture", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name   string
		body   []byte
		token  string // "-" for none
		header string
		code   int
		error  string
		field  string
	}{
		{"truncated JSON", converge[:len(converge)/2], testToken, "", 400, "invalid JSON at byte 130563: unexpected end of input", ""},
		{"wrong type for status", replace(converge, `"status": "success"`, `"status": 1`), testToken, "", 400, "status must be a string, got a number", "status"},
		{"missing node_name", replace(start, `"node_name": "chefdk-ubuntu-16.04-tester-91bc78",`, ""), testToken, "", 400, "missing node_name", "node_name"},
		{"node_name not a string", replace(start, `"chefdk-ubuntu-16.04-tester-91bc78"`, `["web01"]`), testToken, "", 400, "node_name must be a string, got an array", "node_name"},
		{"run status outside the two", replace(converge, `"status": "success"`, `"status": "aborted"`), testToken, "", 400, `status must be "success" or "failure"`, "status"},
		{"unknown message type", []byte(`{"message_type":"run_middle"}`), testToken, "", 400, "unknown message type", ""},
		{"40 MiB body", bytes.Repeat([]byte(" "), 40<<20), testToken, "", 413, "over the limit of 32MiB", ""},
		{"40 MiB chunked body", nil, testToken, "chunked", 413, "over the limit of 32MiB", ""},
		{"empty body", nil, testToken, "", 400, "empty body", ""},
		{"wrong token", start, "not-the-token", "", 403, "invalid token", ""},
		{"missing token", start, "-", "", 401, "missing token", ""},
		{"token only in x-data-collector-auth", start, "-", "x-data-collector-auth", 401, "missing token", ""},
		{"token in api-token", replace(start, `"node_name": "chefdk-ubuntu-16.04-tester-91bc78",`, ""), "-", "api-token", 400, "missing node_name", "node_name"},
		// Chef's own headers only, as the README says: not the other sources' bearer token.
		{"token as a bearer token", start, "-", "Authorization", 401, "missing token", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, br.srv.URL+Path, bytes.NewReader(tt.body))
			if tt.header == "chunked" {
				// No Content-Length: the limit must hold while reading.
				req, _ = http.NewRequest(http.MethodPost, br.srv.URL+Path, io.MultiReader(bytes.NewReader(bytes.Repeat([]byte(" "), 40<<20))))
				tt.header = ""
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-data-collector-auth", "version=1.0")
			if tt.token != "-" {
				req.Header.Set("x-data-collector-token", tt.token)
			}
			switch tt.header {
			case "":
			case "Authorization":
				req.Header.Set(tt.header, "Bearer "+testToken)
			default:
				req.Header.Set(tt.header, testToken)
			}
			code, body := do(t, req)
			var e httpserver.ErrorBody
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("%d, not a JSON error: %q", code, body)
			}
			if code != tt.code || !strings.Contains(e.Error, tt.error) || e.Field != tt.field {
				t.Fatalf("got %d %s; want %d %q field %q", code, body, tt.code, tt.error, tt.field)
			}
			br.bus.Barrier(t, sub, "test/barrier")
		})
	}
}

func TestPaths(t *testing.T) {
	br := startBridge(t, DefaultConfig())
	for _, p := range []string{Path, PathNoEnd} {
		code, body := do(t, mustRequest(t, http.MethodGet, br.srv.URL+p))
		if code != http.StatusOK || strings.TrimSpace(body) != `{"status":"ok"}` {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
		start, _ := os.ReadFile("testdata/01_run_start_chef12_ubuntu/input.json")
		if code, body := postLikeChef(t, br.srv.URL+p, start, "x"); code != http.StatusOK {
			t.Errorf("POST %s: %d %s", p, code, body)
		}
	}
	if code, _ := do(t, mustRequest(t, http.MethodPut, br.srv.URL+Path)); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", code)
	}
	if code, _ := postLikeChef(t, br.srv.URL+Path+"extra", []byte(`{}`), "x"); code != http.StatusNotFound {
		t.Errorf("POST below the path: %d", code)
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// With the broker down, the sender is told to retry: 503 with Retry-After,
// never a 2xx.
func TestPublishFailure(t *testing.T) {
	br := startBridge(t, DefaultConfig())
	if err := br.bus.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	start, _ := os.ReadFile("testdata/01_run_start_chef12_ubuntu/input.json")
	req, _ := http.NewRequest(http.MethodPost, br.srv.URL+Path, bytes.NewReader(start))
	req.Header.Set("x-data-collector-token", testToken)
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d Retry-After=%q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestOptionalOrganization: liveness pings and compliance reports without an
// organization, or with one that is not a string, are published under "_";
// the latter with a warning naming the field.
func TestOptionalOrganization(t *testing.T) {
	h := newTestHandler(t, DefaultConfig(), nil)
	const ping = `{"event_type":"node_ping","node_name":"db01"%s}`
	const report = `{"profiles":[{"controls":[{"results":[{"status":"passed"}]}]}],"node_name":"web01",` +
		`"node_uuid":"0c8f6f40-6b0a-4b8e-8d0f-2d3b0a4e5f61","end_time":"2024-03-05T10:31:02Z"%s}`
	tests := []struct {
		body, org, topic, warned string
	}{
		{ping, ``, "chef/_/db01/liveness", ""},
		{ping, `,"organization_name":null`, "chef/_/db01/liveness", ""},
		{ping, `,"organization_name":""`, "chef/_/db01/liveness", ""},
		{ping, `,"organization_name":"ops"`, "chef/ops/db01/liveness", ""},
		{ping, `,"organization_name":5`, "chef/_/db01/liveness", "organization_name"},
		{report, ``, "chef/_/web01/compliance/passed", ""},
		{report, `,"organization_name":null`, "chef/_/web01/compliance/passed", ""},
		{report, `,"organization_name":["ops"]`, "chef/_/web01/compliance/passed", "organization_name"},
	}
	for _, tt := range tests {
		body := fmt.Sprintf(tt.body, tt.org)
		msg, msgs, err := h.messages([]byte(body))
		if err != nil || len(msgs) != 1 || msgs[0].Topic != tt.topic {
			t.Errorf("%s: %v %+v, want one message on %s", body, err, msgs, tt.topic)
			continue
		}
		var warned []string
		for _, w := range msg.Warnings() {
			warned = append(warned, w.Field)
		}
		if strings.Join(warned, ",") != tt.warned {
			t.Errorf("%s: warnings on %v, want %q", body, warned, tt.warned)
		}
	}
}

// TestWarnings: what breaks the RFC or Chef's rules is published with a 200
// that lists the problems, each counted by reason; strict refuses it.
func TestWarnings(t *testing.T) {
	br := startBridge(t, DefaultConfig())
	report, err := os.ReadFile("testdata/16_compliance_passed_node_name_with_spaces/input.json")
	if err != nil {
		t.Fatal(err)
	}
	sub := br.bus.Subscribe(t, "chef/+/+/compliance/+")
	code, body := postLikeChef(t, br.srv.URL+Path, report, "x")
	var ans accepted
	if err := json.Unmarshal([]byte(body), &ans); err != nil || code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if len(ans.Warnings) != 1 || ans.Warnings[0].Field != "node_name" || ans.Warnings[0].Reason != chefpayload.ReasonNodeName ||
		ans.WarningsOmitted != 0 || ans.Messages != 1 {
		t.Fatalf("answer %s", body)
	}
	if m := testkit.Next(t, sub); m.Topic != "chef/tiny/My Compliant Node/compliance/passed" {
		t.Fatalf("published on %q", m.Topic)
	}
	labels := map[string]string{"source": "chef", "reason": chefpayload.ReasonNodeName}
	if n := br.counter(t, "firehose_intake_warnings_total", labels); n != 1 {
		t.Fatalf("firehose_intake_warnings_total%v = %v", labels, n)
	}

	// A converge of 30 resources without ignore_failure: 20 listed, the
	// rest counted.
	const resource = `"type":"file","name":"f","id":"f","after":{},"before":{},"delta":"","duration":"1","result":"create","status":"up-to-date"`
	converge := []byte(strictConverge(30, resource))
	code, body = postLikeChef(t, br.srv.URL+Path, converge, "x")
	ans = accepted{}
	if err := json.Unmarshal([]byte(body), &ans); err != nil || code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if len(ans.Warnings) != maxWarnings || ans.WarningsOmitted != 10 || ans.Warnings[0].Field != "resources[0].ignore_failure" {
		t.Fatalf("answer %s", body)
	}
	labels["reason"] = chefpayload.ReasonRequired
	if n := br.counter(t, "firehose_intake_warnings_total", labels); n != 30 {
		t.Fatalf("firehose_intake_warnings_total%v = %v", labels, n)
	}
	if code, body := postLikeChef(t, br.srv.URL+Path, []byte(strictConverge(1, resource+`,"ignore_failure":false`)), "x"); code != http.StatusOK ||
		strings.Contains(body, "warnings") {
		t.Fatalf("a clean converge: %d %s", code, body)
	}

	strict := DefaultConfig()
	strict.Validation = chefpayload.ValidationStrict
	sb := startBridge(t, strict)
	for _, b := range [][]byte{report, converge} {
		if code, body := postLikeChef(t, sb.srv.URL+Path, b, "x"); code != http.StatusBadRequest {
			t.Errorf("strict: %d %s", code, body)
		}
	}
}

// strictConverge is a converge that follows the RFC, with n resources
// holding the given members and ignore_failure only when they do.
func strictConverge(n int, resource string) string {
	var rs []string
	for range n {
		rs = append(rs, "{"+resource+"}")
	}
	return `{"chef_server_fqdn":"chef.example.org","entity_uuid":"05309d34-fb13-4587-8dc7-948807e50090",` +
		`"id":"b3bbae70-1e93-4ffe-8499-9559601631fa","end_time":"2024-03-05T10:01:00Z","expanded_run_list":{},` +
		`"message_type":"run_converge","message_version":"1.1.0","node":{},"node_name":"web01","organization_name":"ops",` +
		`"resources":[` + strings.Join(rs, ",") + `],"run_id":"b3bbae70-1e93-4ffe-8499-9559601631fa","run_list":[],` +
		`"source":"chef_client","start_time":"2024-03-05T10:00:00Z","status":"success","total_resource_count":` +
		strconv.Itoa(n) + `,"updated_resource_count":0}`
}

// A refused request is logged with chef-client's X-Remote-Request-Id when it
// sent one, and with no empty request_id field when it did not.
func TestRefusalsLogTheRequestIDOnlyWhenSent(t *testing.T) {
	var logs testkit.SyncBuffer
	h, err := New(DefaultConfig(), Options{Options: intake.Options{
		Publisher:  testbus.Start(t),
		Tokens:     httpserver.NewTokens([]httpserver.Token{{Name: "chef-clients", Token: testToken}}),
		Registerer: prometheus.NewRegistry(),
		Logger:     zerolog.New(&logs),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ids := []string{"", "4b6a2c1e-run"}
	for _, id := range ids {
		if code, body := postLikeChef(t, srv.URL+Path, []byte(`{"message_type":"run_middle"}`), id); code != http.StatusBadRequest {
			t.Fatalf("%d %s, want 400", code, body)
		}
	}
	var refusals []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "data-collector request refused") {
			refusals = append(refusals, line)
		}
	}
	if len(refusals) != len(ids) {
		t.Fatalf("%d refusals logged, want %d:\n%s", len(refusals), len(ids), logs.String())
	}
	if strings.Contains(refusals[0], "request_id") {
		t.Errorf("a request with no id is logged with one: %s", refusals[0])
	}
	if !strings.Contains(refusals[1], `"request_id":"4b6a2c1e-run"`) {
		t.Errorf("a request's id is not logged: %s", refusals[1])
	}
}
