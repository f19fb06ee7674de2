package gerrit

import (
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/adapters/intake/intaketest"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
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

// TestGolden posts each testdata/<case>/input.* and compares the answer and
// what a subscriber received with testdata/<case>/output.txt.
func TestGolden(t *testing.T) {
	intaketest.Run(t, intaketest.Suite{
		Path: Path, Answer: true, Update: *update,
		New: intaketest.Made(New, DefaultConfig()),
	})
}

// TestEndToEnd is what a firehose subscriber sees: topics by project path,
// the event bytes unchanged, and the bridge's headers as MQTT v5 user
// properties are left to the broker's tests.
func TestEndToEnd(t *testing.T) {
	b := testbus.Start(t)
	nova := b.Subscribe(t, "gerrit/openstack/nova/+")
	merged := b.Subscribe(t, "gerrit/+/+/change-merged")
	srv := serve(t, b, DefaultConfig(), nil)
	batch := `{"type":"patchset-created","project":"openstack/nova","change":{"number":1}}
{"type":"change-merged","change":{"project":"openstack/octavia","number":2}}
{"type":"change-merged","project":"openstack/nova","change":{"number":3}}`
	if code, _, resp := intaketest.Post(t, srv.URL+Path, batch, nil); code != http.StatusOK || resp != `{"accepted":3}` {
		t.Fatalf("%d %s", code, resp)
	}
	lines := strings.Split(batch, "\n")
	for _, want := range []testkit.Received{
		{Topic: "gerrit/openstack/nova/patchset-created", Payload: lines[0], QoS: 1},
		{Topic: "gerrit/openstack/nova/change-merged", Payload: lines[2], QoS: 1},
	} {
		if got := testkit.Next(t, nova); got != want {
			t.Errorf("nova subscriber got %+v, want %+v", got, want)
		}
	}
	for _, want := range []string{"gerrit/openstack/octavia/change-merged", "gerrit/openstack/nova/change-merged"} {
		if got := testkit.Next(t, merged); got.Topic != want {
			t.Errorf("change-merged subscriber got %s, want %s", got.Topic, want)
		}
	}
}

func TestTopicPrefix(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "#")
	cfg := DefaultConfig()
	cfg.TopicPrefix = "review/gerrit"
	srv := serve(t, b, cfg, nil)
	intaketest.Post(t, srv.URL+Path, `{"type":"comment-added","project":"openstack/nova"}`, nil)
	got := b.Collect(t, sub, "barrier/prefix")
	if len(got) != 1 || got[0].Topic != "review/gerrit/openstack/nova/comment-added" {
		t.Errorf("got %+v", got)
	}
}

// TestRefusedRequestsPublishNothing checks tokens, body limits and topic
// limits, and proves with a barrier that nothing was published.
func TestRefusedRequestsPublishNothing(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "#")
	cfg := DefaultConfig()
	cfg.MaxBody = 4 * bytesize.KiB
	cfg.MaxBatch = 3
	srv := serve(t, b, cfg, []httpserver.Token{{Name: "ci", Token: "s3cret"}})
	event := `{"type":"comment-added","project":"openstack/nova"}`
	small := `{"type":"x","project":"p"}`
	tests := []struct {
		name   string
		url    string
		body   string
		header map[string]string
		code   int
		field  string
	}{
		{"no token", Path, event, nil, http.StatusUnauthorized, ""},
		{"wrong token", Path, event, map[string]string{TokenHeader: "guess"}, http.StatusForbidden, ""},
		{"wrong bearer", Path, event, map[string]string{"Authorization": "Bearer guess"}, http.StatusForbidden, ""},
		{"wrong query token", Path + "?token=guess", event, nil, http.StatusForbidden, ""},
		{"over max_body", Path, strings.Repeat(event+"\n", 100), map[string]string{TokenHeader: "s3cret"}, http.StatusRequestEntityTooLarge, ""},
		{"project segment too long for a topic", Path, `{"type":"x","change":{"project":"a/` + strings.Repeat("b", 1025) + `"}}`,
			map[string]string{TokenHeader: "s3cret"}, http.StatusBadRequest, "change.project"},
		{"over max_batch", Path, strings.Repeat(small+"\n", 4), map[string]string{TokenHeader: "s3cret"}, http.StatusRequestEntityTooLarge, ""},
		{"blank lines only", Path, strings.Repeat("\n", 4000), map[string]string{TokenHeader: "s3cret"}, http.StatusBadRequest, ""},
		{"bad line in a batch", Path, event + "\n" + `{"type":"x"}`, map[string]string{TokenHeader: "s3cret"}, http.StatusBadRequest, "project"},
	}
	for _, tt := range tests {
		code, _, resp := intaketest.Post(t, srv.URL+tt.url, tt.body, tt.header)
		var e struct {
			Error, Field string
		}
		if code != tt.code || json.Unmarshal([]byte(resp), &e) != nil || e.Error == "" || e.Field != tt.field {
			t.Errorf("%s: %d %s; want %d with field %q", tt.name, code, resp, tt.code, tt.field)
		}
		b.Barrier(t, sub, "barrier/"+strings.ReplaceAll(tt.name, " ", "-"))
	}
	// Each accepted way of giving the token.
	for i, header := range []map[string]string{{TokenHeader: "s3cret"}, {SharedTokenHeader: "s3cret"}, {"Authorization": "Bearer s3cret"}, nil} {
		url := srv.URL + Path
		if header == nil {
			url += "?token=s3cret"
		}
		if code, _, resp := intaketest.Post(t, url, event, header); code != http.StatusOK {
			t.Errorf("token way %d: %d %s", i, code, resp)
		}
		if got := testkit.Next(t, sub); got.Payload != event {
			t.Errorf("token way %d published %+v", i, got)
		}
	}
	// max_batch events, blank lines around them, are taken.
	if code, _, resp := intaketest.Post(t, srv.URL+Path, "\n\n"+strings.Repeat(small+"\n\n", 3), map[string]string{TokenHeader: "s3cret"}); code != http.StatusOK || resp != `{"accepted":3}` {
		t.Errorf("max_batch events: %d %s", code, resp)
	}
}

// TestBusDown answers 503 with Retry-After, so that the sender keeps the
// events and retries.
func TestBusDown(t *testing.T) {
	b := testbus.Start(t)
	srv := serve(t, b, DefaultConfig(), nil)
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, header, resp := intaketest.Post(t, srv.URL+Path, `{"type":"x","project":"p"}`, nil)
	if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || !strings.Contains(resp, `"error"`) {
		t.Errorf("%d %v %s", code, header, resp)
	}
}

func TestConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil || cfg.TopicPrefix != "gerrit" || !cfg.Enabled {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	bad := Config{Config: intake.Config{TopicPrefix: "$SYS/x", MaxBody: 0, Tokens: []httpserver.Token{{Name: "x"}}}}
	err := bad.Validate()
	for _, key := range []string{"topic_prefix", "max_body", "tokens[0].token", "max_batch"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%v does not name %s", err, key)
		}
	}
	if _, err := New(bad, Options{Publisher: testbus.Start(t)}); err == nil {
		t.Error("New accepted a bad config")
	}
	if _, err := New(DefaultConfig(), Options{}); err == nil {
		t.Error("New accepted no publisher")
	}
}
