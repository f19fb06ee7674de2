package ansible

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake/intaketest"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden output.txt files")

const testToken = "t0ken-for-tests"

// barrier is a topic under ansible/# that no event can produce (events
// always have a playbook level), so Collect and Barrier can use it.
const barrier = "ansible/test-barrier"

// endpoint is the handler behind a real HTTP server, publishing to a real
// broker, with a real MQTT subscriber on ansible/#.
type endpoint struct {
	bus  *testbus.Bus
	sub  <-chan testkit.Received
	url  string
	h    *Handler
	reg  *prometheus.Registry
	http *httptest.Server
}

func startIntake(t *testing.T, cfg Config) *endpoint {
	t.Helper()
	b := testbus.Start(t)
	reg := prometheus.NewRegistry()
	h, err := New(cfg, Options{
		Publisher:  b,
		Logger:     zerolog.Nop(),
		Tokens:     httpserver.NewTokens([]httpserver.Token{{Name: "test", Token: testToken}}),
		Registerer: reg,
		Now:        func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &endpoint{bus: b, sub: b.Subscribe(t, "ansible/#"), url: srv.URL + Path, h: h, reg: reg, http: srv}
}

// post sends body with the token and returns the status and the decoded JSON answer.
func (in *endpoint) post(t *testing.T, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, in.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(header) == 0 {
		header = []string{"Authorization", "Bearer " + testToken}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, raw := testkit.Do(t, nil, req)
	var answer map[string]any
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, answer
}

// TestGolden posts each testdata/<case>/input.json (events the plugin sent in
// a real run) and compares what a real subscriber received, in order, with
// output.txt. Regenerate with -update and review the diff.
func TestGolden(t *testing.T) {
	intaketest.Run(t, intaketest.Suite{
		Path: Path, Inputs: "testdata/*/input.json", Update: *update,
		New: intaketest.Made(New, DefaultConfig()),
		Check: func(t testing.TB, _ intaketest.Case, _ int, answer string, published []bus.Message) {
			var a struct{ Accepted int }
			if err := json.Unmarshal([]byte(answer), &a); err != nil || a.Accepted != len(published) {
				t.Errorf("answered %s, but %d messages were published", answer, len(published))
			}
		},
	})
}

// TestPayloadUntouched checks that the published payload is the event's own
// bytes, whitespace and key order included, for single events and batches,
// but for its event_id (the de-duplication id, not a schema field), which is
// cut out.
func TestPayloadUntouched(t *testing.T) {
	in := startIntake(t, DefaultConfig())
	ev := `{ "ansible_type" : "finish", "status":"OK",  "playbook_name":"é \u00e9", "playbook_id":"p1", "zzz": [1, 2.50, {"a":null, "event_id":"x"}] }`
	withID := strings.Replace(ev, `"status":"OK",  `, `"status":"OK",  "event_id" : "e-1",`, 1)
	for _, body := range []string{"\n  " + withID + "\n", "[" + withID + " ,\n" + ev + "]"} {
		if code, answer := in.post(t, body); code != http.StatusOK {
			t.Fatalf("got %d %v", code, answer)
		}
		for _, m := range in.bus.Collect(t, in.sub, barrier) {
			if m.Payload != ev {
				t.Fatalf("payload changed:\n got %s\nwant %s", m.Payload, ev)
			}
			if m.Topic != "ansible/playbook/p1/action/finish/OK" || m.QoS != 1 || m.Retained {
				t.Fatalf("got %+v", m)
			}
		}
	}
}

// TestRefused checks that every bad request gets its 4xx with the field at
// fault, and that nothing at all is published, not even the valid events
// before a bad one.
func TestRefused(t *testing.T) {
	good := mustRead(t, "testdata/start/input.json")
	task := mustRead(t, "testdata/task-ok/input.json")
	cfg := DefaultConfig()
	cfg.MaxBatch = 3
	cfg.MaxBody = 4 * bytesize.KiB
	in := startIntake(t, cfg)
	for _, tc := range []struct {
		name   string
		body   string
		header []string
		code   int
		field  string
		msg    string
	}{
		{"no token", good, []string{"X-Other", "x"}, 401, "", "missing token"},
		{"wrong token", good, []string{"Authorization", "Bearer nope"}, 403, "", "invalid token"},
		{"wrong token header", good, []string{TokenHeader, "nope"}, 403, "", "invalid token"},
		{"empty", "  \n", nil, 400, "", "empty body"},
		{"not JSON", "{", nil, 400, "", "malformed JSON"},
		{"bad array", "[" + good + ",]", nil, 400, "", "malformed JSON array"},
		{"array of non-objects", "[" + good + ",1]", nil, 400, "[1]", "must be a JSON object"},
		{"too many events", "[" + good + "," + good + "," + good + "," + good + "]", nil, 413, "", "more than 3 events in one request, over ansible.max_batch"},
		{"empty array", " [ ] ", nil, 400, "", "empty array"},
		{"too large", "[" + strings.Repeat(good+",", 30) + good + "]", nil, 413, "", "over the limit"},
		{"single invalid", strings.Replace(good, `"OK"`, `"NOPE"`, 1), nil, 400, "status", `must be "OK"`},
		{"second of three invalid", "[" + good + "," + strings.Replace(task, `"ansible_host":"alpha",`, "", 1) + "," + good + "]", nil, 400, "[1].ansible_host", "event 1: ansible_host: required"},
		{"result as a string", "[" + good + "," + strings.Replace(task, `"ansible_result":{`, `"ansible_result":"{}","x":{`, 1) + "]", nil, 400, "[1].ansible_result", "must be a JSON object, got a string"},
		{"host level too long", strings.Replace(task, `"alpha"`, `"`+strings.Repeat("/", 400)+`"`, 1), nil, 400, "ansible_host", "limit 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, answer := in.post(t, tc.body, tc.header...)
			if code != tc.code {
				t.Fatalf("got %d %v, want %d", code, answer, tc.code)
			}
			msg, _ := answer["error"].(string)
			field, _ := answer["field"].(string)
			if field != tc.field || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got field %q error %q, want field %q error containing %q", field, msg, tc.field, tc.msg)
			}
			in.bus.Barrier(t, in.sub, barrier)
		})
	}
	if got := eventsCounted(t, in.reg); got != 0 {
		t.Fatalf("events counted for refused requests: %v", got)
	}
}

func TestTokenHeaders(t *testing.T) {
	in := startIntake(t, DefaultConfig())
	good := mustRead(t, "testdata/finish-failed/input.json")
	for _, h := range [][]string{{"Authorization", "Bearer " + testToken}, {"Authorization", "bearer  " + testToken}, {TokenHeader, testToken}} {
		if code, answer := in.post(t, good, h...); code != http.StatusOK {
			t.Fatalf("%v: got %d %v", h, code, answer)
		}
		if got := in.bus.Collect(t, in.sub, barrier); len(got) != 1 {
			t.Fatalf("%v: got %d messages", h, len(got))
		}
	}
	if got := eventsCounted(t, in.reg); got != 3 {
		t.Fatalf("counted %v events, want 3", got)
	}
}

// TestEmptyBatch: an empty array is refused with a 400 that says so: a 200
// for nothing would tell a sender that lost its events that they are safe.
// (The callback plugin never sends one: it waits for a first event.)
func TestEmptyBatch(t *testing.T) {
	in := startIntake(t, DefaultConfig())
	code, answer := in.post(t, " [ ] ")
	if msg, _ := answer["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "empty array") {
		t.Fatalf("got %d %v", code, answer)
	}
	if got := in.bus.Collect(t, in.sub, barrier); len(got) != 0 {
		t.Fatalf("published %d messages", len(got))
	}
}

// TestBusDown: when the broker cannot take messages the answer is 503 with
// Retry-After, so the plugin keeps the batch and retries.
func TestBusDown(t *testing.T) {
	in := startIntake(t, DefaultConfig())
	if err := in.bus.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, in.url, strings.NewReader(mustRead(t, "testdata/start/input.json")))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestMethodAndPath(t *testing.T) {
	in := startIntake(t, DefaultConfig())
	resp, err := http.Get(in.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: got %d", resp.StatusCode)
	}
}

// TestMessages checks the messages of a batch: headers, de-dup ids (the
// plugin's event_id, else the SHA-256 of the event), payloads without
// event_id, topics with a custom prefix, and the metrics.
func TestMessages(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TopicPrefix = "site1/ansible"
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	h, err := New(cfg, Options{Publisher: nopPublisher{}, Registerer: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	body := mustRead(t, "testdata/batch/input.json")
	msgs, counts, perr := h.messages([]byte(body))
	if perr != nil {
		t.Fatal(perr.msg)
	}
	if counts != [4]int{1, 2, 1, 1} {
		t.Fatalf("counts %v", counts)
	}
	var events []json.RawMessage
	if err := json.Unmarshal([]byte(body), &events); err != nil {
		t.Fatal(err)
	}
	finishSum := sha256.Sum256(events[4])
	want := []struct{ topic, id string }{
		{"site1/ansible/playbook/ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d/action/start", "33d5682e-aa23-45d2-b602-58fc7919b3d6"},
		{"site1/ansible/playbook/ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d/task/down/UNREACHABLE", "a3b420ef-47ae-4bf6-aafd-d608d5135cb5"},
		{"site1/ansible/playbook/ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d/task/gamma/SKIPPED", "5f0953b4-83e8-458d-ab5c-ae50af0d06eb"},
		{"site1/ansible/playbook/ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d/stats/down", "b5373f98-d1c1-46bb-b800-6c96148c0f28"},
		{"site1/ansible/playbook/ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d/action/finish/OK", hex.EncodeToString(finishSum[:])},
	}
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages", len(msgs))
	}
	for i, m := range msgs {
		// The payload is the event without its event_id, which became
		// the de-duplication id.
		payload := bytes.Replace(events[i], []byte(`"event_id":"`+want[i].id+`",`), nil, 1)
		if m.Topic != want[i].topic || m.Headers[bus.HeaderMsgID] != want[i].id ||
			m.Headers[bus.HeaderSource] != "ansible" || m.Headers[bus.HeaderReceivedAt] != "2026-01-02T03:04:05.000000006Z" ||
			m.QoS != 1 || m.Retain || !bytes.Equal(m.Payload, payload) || bytes.Contains(m.Payload, []byte("event_id")) {
			t.Errorf("message %d: %+v", i, m)
		}
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, ...bus.Message) error { return nil }

func TestNewRefusesBadConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TopicPrefix = "a/+/b"
	cfg.MaxBatch = 0
	cfg.MaxBody = 0
	cfg.Tokens = []httpserver.Token{{Name: "x"}}
	_, err := New(cfg, Options{Publisher: nopPublisher{}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, key := range []string{"topic_prefix", "max_batch", "max_body", "tokens[0].token"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
	if _, err := New(DefaultConfig(), Options{}); err == nil {
		t.Fatal("no error without a publisher")
	}
}

// eventsCounted sums firehose_ansible_events_total over its labels.
func eventsCounted(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() == "firehose_ansible_events_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
