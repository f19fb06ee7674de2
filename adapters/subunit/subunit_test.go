package subunit

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/adapters/intake/intaketest"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testsubunit"
	payload "github.com/opsfirehose/firehose/payloads/subunit"
)

var update = flag.Bool("update", false, "rewrite testdata/*/output.txt")

// serve runs the handler behind a real HTTP server, publishing to b.
func serve(t *testing.T, b *testbus.Bus, cfg Config, tokens []httpserver.Token) *httptest.Server {
	t.Helper()
	h, err := New(cfg, intaketest.Options(b, tokens))
	if err != nil {
		t.Fatal(err)
	}
	return intaketest.Serve(t, h)
}

var streamHeader = map[string]string{"Content-Type": StreamType}

// query is the stream intake's usual query string.
func query(change string) string {
	return "?" + url.Values{
		"worker": {"subunit-worker01"}, "project": {"openstack/nova"}, "change": {change},
		"build_uuid": {"45f7c1ddbfd74c6aba94662623bd61b8"}, "source_url": {"https://logs.example.org/testrepository.subunit"},
	}.Encode()
}

// TestGolden posts each testdata/<case>/input.json (a worker's JSON) or
// input.subunit (a stream written by python-subunit's tools, see
// testdata/generate.sh, with query.txt) and compares the answer and what a
// subscriber received with output.txt.
func TestGolden(t *testing.T) {
	intaketest.Run(t, intaketest.Suite{
		Path: Path, Answer: true, Update: *update,
		New: intaketest.Made(New, DefaultConfig()),
		Request: func(t testing.TB, c intaketest.Case) (string, map[string]string) {
			if filepath.Ext(c.Input) != ".subunit" {
				return "", map[string]string{"Content-Type": "application/json"}
			}
			q, err := os.ReadFile(filepath.Join(c.Dir, "query.txt"))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(q)), streamHeader
		},
		Lines: func(_ testing.TB, m bus.Message) []string {
			return []string{fmt.Sprintf("%s\t%v\t%s", m.Topic, m.Retain, m.Payload)}
		},
	})
}

// subunitOutput writes a stream with Debian's subunit-output, one run per
// argument list, as a CI job's test runner would.
func subunitOutput(t *testing.T, runs ...[]string) []byte {
	t.Helper()
	tool := testkit.RequireCommand(t, "subunit-output")
	var stream []byte
	for _, args := range runs {
		out, err := exec.Command(tool, args...).Output()
		if err != nil {
			t.Fatalf("subunit-output %v: %v", args, err)
		}
		stream = append(stream, out...)
	}
	return stream
}

// TestEndToEnd posts streams made by python-subunit, plain and gzipped, and
// checks what a gearman-subunit subscriber sees.
func TestEndToEnd(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "gearman-subunit/+/openstack/nova/#")
	srv := serve(t, b, DefaultConfig(), nil)
	passing := subunitOutput(t, []string{"--success", "tempest.a"}, []string{"--skip", "tempest.b"})
	failing := subunitOutput(t, []string{"--success", "tempest.a"}, []string{"--fail", "tempest.b"})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(failing)
	_ = zw.Close()
	tests := []struct {
		name   string
		body   []byte
		header map[string]string
		status string
	}{
		{"passing stream", passing, streamHeader, "success"},
		{"failing stream", failing, streamHeader, "failure"},
		{"gzipped failing stream", gz.Bytes(), map[string]string{"Content-Type": StreamType, "Content-Encoding": "gzip"}, "failure"},
		{"gzip stream type", gz.Bytes(), map[string]string{"Content-Type": GzipStreamType}, "failure"},
		{"gzip stream type and encoding", gz.Bytes(), map[string]string{"Content-Type": GzipStreamType, "Content-Encoding": "gzip"}, "failure"},
	}
	for i, tt := range tests {
		change := fmt.Sprint(1000 + i)
		code, _, resp := intaketest.Post(t, srv.URL+Path+query(change), tt.body, tt.header)
		if code != http.StatusOK || !strings.Contains(resp, `"status":"`+tt.status+`"`) {
			t.Errorf("%s: %d %s", tt.name, code, resp)
			continue
		}
		got := testkit.Next(t, sub)
		want := `{"status":"` + tt.status + `","build_uuid":"45f7c1ddbfd74c6aba94662623bd61b8","source_url":"https://logs.example.org/testrepository.subunit"}`
		if got.Topic != "gearman-subunit/subunit-worker01/openstack/nova/"+change || got.Payload != want {
			t.Errorf("%s: got %+v", tt.name, got)
		}
	}
	// The JSON a worker posts.
	code, _, resp := intaketest.Post(t, srv.URL+Path, []byte(`{"worker":"w1","project":"openstack/nova","change":5,"status":"failure","build_uuid":"u","source_url":"s"}`), nil)
	if got := testkit.Next(t, sub); code != http.StatusOK || got.Topic != "gearman-subunit/w1/openstack/nova/5" ||
		got.Payload != `{"status":"failure","build_uuid":"u","source_url":"s"}` {
		t.Errorf("json: %d %s %+v", code, resp, got)
	}
}

// TestCurlExample runs the README's curl command against the handler.
func TestCurlExample(t *testing.T) {
	curl := testkit.RequireCommand(t, "curl")
	b := testbus.Start(t)
	sub := b.Subscribe(t, "gearman-subunit/#")
	srv := serve(t, b, DefaultConfig(), []httpserver.Token{{Token: "s3cret"}})
	stream := subunitOutput(t, []string{"--success", "tempest.a"}, []string{"--fail", "tempest.b"})
	cmd := exec.Command(curl, "-sS", "--fail-with-body", "-H", "X-Firehose-Token: s3cret",
		"-H", "Content-Type: application/x-subunit", "--data-binary", "@-",
		srv.URL+"/subunit/v1/events?worker=ci01&project=openstack/nova&change=12345&build_uuid=45f7c1dd&source_url=https://logs.example.org/45f7c1dd/testrepository.subunit")
	cmd.Stdin = bytes.NewReader(stream)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"status":"failure"`) || !strings.Contains(string(out), `"failed":["tempest.b"]`) {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if got := testkit.Next(t, sub); got.Topic != "gearman-subunit/ci01/openstack/nova/12345" {
		t.Errorf("got %+v", got)
	}
}

// TestJSONWithAnyContentType posts a worker's JSON under the types clients
// send by default, such as curl -d's application/x-www-form-urlencoded: all
// but a stream's are JSON.
func TestJSONWithAnyContentType(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "gearman-subunit/#")
	srv := serve(t, b, DefaultConfig(), nil)
	for i, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/x-www-form-urlencoded",
		"text/plain", "application/octet-stream", "malformed; =x"} {
		body := fmt.Sprintf(`{"worker":"w1","project":"openstack/nova","change":%d,"status":"success","build_uuid":"u","source_url":"s"}`, i)
		var header map[string]string
		if ct != "" {
			header = map[string]string{"Content-Type": ct}
		}
		code, _, resp := intaketest.Post(t, srv.URL+Path, body, header)
		if code != http.StatusOK {
			t.Errorf("Content-Type %q: %d %s", ct, code, resp)
			continue
		}
		if got := testkit.Next(t, sub); got.Topic != fmt.Sprintf("gearman-subunit/w1/openstack/nova/%d", i) {
			t.Errorf("Content-Type %q: got %+v", ct, got)
		}
	}

	// curl -d, as a user types it.
	curl := testkit.RequireCommand(t, "curl")
	out, err := exec.Command(curl, "-sS", "--fail-with-body", "-d",
		`{"worker":"w2","project":"openstack/nova","change":77,"status":"failure","build_uuid":"u","source_url":"s"}`,
		srv.URL+Path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"topic":"gearman-subunit/w2/openstack/nova/77"`) {
		t.Fatalf("curl -d: %v\n%s", err, out)
	}
	if got := testkit.Next(t, sub); got.Payload != `{"status":"failure","build_uuid":"u","source_url":"s"}` {
		t.Errorf("curl -d: got %+v", got)
	}
}

func TestTopicPrefix(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "#")
	cfg := DefaultConfig()
	cfg.TopicPrefix = "ci/subunit"
	srv := serve(t, b, cfg, nil)
	intaketest.Post(t, srv.URL+Path, []byte(`{"worker":"w1","project":"openstack/nova","change":5,"status":"success","build_uuid":"u","source_url":"s"}`), nil)
	if got := b.Collect(t, sub, "barrier/prefix"); len(got) != 1 || got[0].Topic != "ci/subunit/w1/openstack/nova/5" {
		t.Errorf("got %+v", got)
	}
}

func TestRefusedRequestsPublishNothing(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "#")
	cfg := DefaultConfig()
	cfg.MaxBody = 64 * bytesize.KiB
	cfg.MaxRunningTests = 10
	srv := serve(t, b, cfg, []httpserver.Token{{Name: "ci", Token: "s3cret"}})
	var unfinished []byte
	for i := range cfg.MaxRunningTests + 1 {
		unfinished = testsubunit.Packet(unfinished, fmt.Sprint("tempest.t", i), payload.StatusInProgress)
	}
	stream := subunitOutput(t, []string{"--success", "tempest.a"})
	big := subunitOutput(t, []string{"--success", "tempest.a"}, []string{"--attach-file", writeFile(t, 100<<10)})
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	for range 3 {
		_, _ = zw.Write(big)
	}
	_ = zw.Close()
	auth := func(h map[string]string) map[string]string {
		out := map[string]string{TokenHeader: "s3cret"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name   string
		query  string
		body   []byte
		header map[string]string
		code   int
		field  string
	}{
		{"no token", "", []byte(`{}`), nil, http.StatusUnauthorized, ""},
		{"wrong token", "", []byte(`{}`), map[string]string{"Authorization": "Bearer x"}, http.StatusForbidden, ""},
		{"JSON array", "", []byte(`[]`), auth(nil), http.StatusBadRequest, ""},
		{"status not in the schema", "", []byte(`{"worker":"w","project":"a/b","change":1,"status":"passed","build_uuid":"u","source_url":"s"}`), auth(nil), http.StatusBadRequest, "status"},
		{"change not a number", "", []byte(`{"worker":"w","project":"a/b","change":"I0f3c9a1e","status":"success","build_uuid":"u","source_url":"s"}`), auth(nil), http.StatusBadRequest, "change"},
		{"worker not a string", "", []byte(`{"worker":1}`), auth(nil), http.StatusBadRequest, "worker"},
		{"worker too long for a topic", "", []byte(`{"worker":"` + strings.Repeat("w", 1100) + `","project":"a/b","change":1,"status":"success","build_uuid":"u","source_url":"s"}`), auth(nil), http.StatusBadRequest, "worker"},
		{"stream without a change", "?worker=w&project=a/b&build_uuid=u&source_url=s", stream, auth(streamHeader), http.StatusBadRequest, "change"},
		{"empty stream", query("1"), nil, auth(streamHeader), http.StatusBadRequest, "body"},
		{"truncated stream", query("1"), stream[:len(stream)-1], auth(streamHeader), http.StatusBadRequest, "body"},
		{"subunit v1", query("1"), []byte("test: a\nsuccess: a\n"), auth(streamHeader), http.StatusBadRequest, "body"},
		{"not gzip", query("1"), stream, auth(map[string]string{"Content-Type": StreamType, "Content-Encoding": "gzip"}), http.StatusBadRequest, "body"},
		{"unknown encoding", query("1"), stream, auth(map[string]string{"Content-Type": StreamType, "Content-Encoding": "br"}), http.StatusUnsupportedMediaType, "Content-Encoding"},
		{"more tests in progress than max_running_tests", query("1"), unfinished, auth(streamHeader), http.StatusRequestEntityTooLarge, ""},
		{"stream over max_body", query("1"), big, auth(streamHeader), http.StatusRequestEntityTooLarge, ""},
		{"gzipped stream over max_body once inflated", query("1"), bomb.Bytes(), auth(map[string]string{"Content-Type": StreamType, "Content-Encoding": "gzip"}), http.StatusRequestEntityTooLarge, ""},
		{"form fields, not JSON", "", []byte("a=b"), auth(map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), http.StatusBadRequest, ""},
		{"gzip stream type, not gzip", query("1"), stream, auth(map[string]string{"Content-Type": GzipStreamType}), http.StatusBadRequest, "body"},
		{"gzip stream type, other encoding", query("1"), stream, auth(map[string]string{"Content-Type": GzipStreamType, "Content-Encoding": "br"}), http.StatusUnsupportedMediaType, "Content-Encoding"},
	}
	for _, tt := range tests {
		code, _, resp := intaketest.Post(t, srv.URL+Path+tt.query, tt.body, tt.header)
		var e struct{ Error, Field string }
		if code != tt.code || json.Unmarshal([]byte(resp), &e) != nil || e.Error == "" || e.Field != tt.field {
			t.Errorf("%s: %d %s; want %d with field %q", tt.name, code, resp, tt.code, tt.field)
		}
		b.Barrier(t, sub, "barrier/"+strings.ReplaceAll(tt.name, " ", "-"))
	}
	if len(bomb.Bytes()) > int(cfg.MaxBody) {
		t.Fatalf("the gzip bomb is %d bytes compressed: it does not test the inflated limit", bomb.Len())
	}
}

func writeFile(t *testing.T, size int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), size), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBusDown(t *testing.T) {
	b := testbus.Start(t)
	srv := serve(t, b, DefaultConfig(), nil)
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, header, _ := intaketest.Post(t, srv.URL+Path, []byte(`{"worker":"w","project":"a/b","change":1,"status":"success","build_uuid":"u","source_url":"s"}`), nil)
	if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" {
		t.Errorf("%d %v", code, header)
	}
}

func TestConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil || cfg.TopicPrefix != "gearman-subunit" || !cfg.Enabled {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	bad := Config{Config: intake.Config{TopicPrefix: "x/#", Tokens: []httpserver.Token{{}}}}
	err := bad.Validate()
	for _, key := range []string{"topic_prefix", "max_body", "tokens[0].token", "max_running_tests"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%v does not name %s", err, key)
		}
	}
	if _, err := New(DefaultConfig(), Options{}); err == nil {
		t.Error("New accepted no publisher")
	}
}
