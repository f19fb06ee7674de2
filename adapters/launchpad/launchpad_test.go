package launchpad

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/adapters/intake/intaketest"
	"github.com/opsfirehose/firehose/bus"
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

// post sends a mail, as message/rfc822 unless header says otherwise.
func post(t *testing.T, url, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	h := map[string]string{"Content-Type": ContentType}
	maps.Copy(h, header)
	return intaketest.Post(t, url, body, h)
}

// TestGolden posts each testdata/<case>/input.eml and compares the answer
// and what a subscriber received with testdata/<case>/output.txt: the
// payload's SHA-256 and, for review, the payload itself as indented JSON.
func TestGolden(t *testing.T) {
	intaketest.Run(t, intaketest.Suite{
		Path: Path, Inputs: "testdata/*/input.eml", Answer: true, Update: *update,
		New: intaketest.Made(New, DefaultConfig()),
		Request: func(testing.TB, intaketest.Case) (string, map[string]string) {
			return "", map[string]string{"Content-Type": ContentType}
		},
		Lines: func(t testing.TB, m bus.Message) []string {
			sum := sha256.Sum256(m.Payload)
			var pretty strings.Builder
			enc := json.NewEncoder(&pretty)
			enc.SetIndent("# ", "  ")
			enc.SetEscapeHTML(false)
			if err := enc.Encode(json.RawMessage(m.Payload)); err != nil {
				t.Fatalf("payload is not JSON: %v", err)
			}
			return []string{fmt.Sprintf("%s\t%v\tsha256:%s", m.Topic, m.Retain, hex.EncodeToString(sum[:])),
				"# " + strings.TrimSpace(pretty.String())}
		},
	})
}

// TestEndToEnd is what an lpmqtt subscriber sees.
func TestEndToEnd(t *testing.T) {
	b := testbus.Start(t)
	octavia := b.Subscribe(t, "launchpad/octavia/#")
	srv := serve(t, b, DefaultConfig(), nil)
	mail, err := os.ReadFile("testdata/bug_new/input.eml")
	if err != nil {
		t.Fatal(err)
	}
	code, _, resp := post(t, srv.URL+Path, string(mail), nil)
	if code != http.StatusOK || resp != `{"accepted":1,"topic":"launchpad/octavia/bug/1680938"}` {
		t.Fatalf("%d %s", code, resp)
	}
	got := testkit.Next(t, octavia)
	var p struct {
		EventType  string   `json:"event-type"`
		BugNumber  string   `json:"bug-number"`
		Project    string   `json:"project"`
		Status     string   `json:"status"`
		Commenters []string `json:"commenters"`
		Tags       []string `json:"tags"`
		Body       string   `json:"body"`
	}
	if got.Topic != "launchpad/octavia/bug/1680938" || json.Unmarshal([]byte(got.Payload), &p) != nil {
		t.Fatalf("%+v", got)
	}
	if p.EventType != "bug" || p.BugNumber != "1680938" || p.Project != "octavia" || p.Status != "Triaged" ||
		len(p.Commenters) != 1 || len(p.Tags) != 1 || !strings.Contains(p.Body, "Octavia only offers TCP") {
		t.Errorf("payload %+v", p)
	}
}

func TestTopicPrefix(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "#")
	cfg := DefaultConfig()
	cfg.TopicPrefix = "lp"
	srv := serve(t, b, cfg, nil)
	mail, _ := os.ReadFile("testdata/bug_new/input.eml")
	post(t, srv.URL+Path, string(mail), nil)
	if got := b.Collect(t, sub, "barrier/prefix"); len(got) != 1 || got[0].Topic != "lp/octavia/bug/1680938" {
		t.Errorf("got %+v", got)
	}
}

func TestRefusedRequestsPublishNothing(t *testing.T) {
	b := testbus.Start(t)
	sub := b.Subscribe(t, "#")
	cfg := DefaultConfig()
	cfg.MaxBody = 2 * bytesize.KiB
	srv := serve(t, b, cfg, []httpserver.Token{{Name: "mta", Token: "s3cret"}})
	mail, _ := os.ReadFile("testdata/bug_without_number/input.eml")
	spam, _ := os.ReadFile("testdata/not_launchpad/input.eml")
	ok := map[string]string{TokenHeader: "s3cret"}
	tests := []struct {
		name   string
		body   string
		header map[string]string
		code   int
		field  string
	}{
		{"no token", string(mail), nil, http.StatusUnauthorized, ""},
		{"wrong token", string(mail), map[string]string{"Authorization": "Bearer nope"}, http.StatusForbidden, ""},
		{"not from Launchpad", string(spam), ok, http.StatusBadRequest, "X-Generated-By"},
		{"JSON instead of a mail", `{"a":1}`, map[string]string{TokenHeader: "s3cret", "Content-Type": "application/json"}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"over max_body", string(mail) + strings.Repeat("x", 2048), ok, http.StatusRequestEntityTooLarge, ""},
		{"project too long for a topic", strings.Replace(string(mail), "product=octavia", "product="+strings.Repeat("o", 1100), 1), ok,
			http.StatusBadRequest, "X-Launchpad-Bug"},
	}
	for _, tt := range tests {
		code, _, resp := post(t, srv.URL+Path, tt.body, tt.header)
		var e struct{ Error, Field string }
		if code != tt.code || json.Unmarshal([]byte(resp), &e) != nil || e.Error == "" || e.Field != tt.field {
			t.Errorf("%s: %d %s; want %d with field %q", tt.name, code, resp, tt.code, tt.field)
		}
		b.Barrier(t, sub, "barrier/"+strings.ReplaceAll(tt.name, " ", "-"))
	}
	for _, header := range []map[string]string{ok, {SharedTokenHeader: "s3cret"}, {"Authorization": "Bearer s3cret", "Content-Type": "text/plain"}} {
		if code, _, resp := post(t, srv.URL+Path, string(mail), header); code != http.StatusOK {
			t.Errorf("%v: %d %s", header, code, resp)
		}
		if got := testkit.Next(t, sub); got.Topic != "launchpad/octavia/bug" {
			t.Errorf("published %+v", got)
		}
	}
}

func TestBusDown(t *testing.T) {
	b := testbus.Start(t)
	srv := serve(t, b, DefaultConfig(), nil)
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	mail, _ := os.ReadFile("testdata/bug_new/input.eml")
	code, header, _ := post(t, srv.URL+Path, string(mail), nil)
	if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" {
		t.Errorf("%d %v", code, header)
	}
}

func TestConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil || cfg.TopicPrefix != "launchpad" || !cfg.Enabled {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	bad := Config{TopicPrefix: "a//b", Tokens: []httpserver.Token{{}}}
	err := bad.Validate()
	for _, key := range []string{"topic_prefix", "max_body", "tokens[0].token"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%v does not name %s", err, key)
		}
	}
	if _, err := New(DefaultConfig(), Options{}); err == nil {
		t.Error("New accepted no publisher")
	}
}
