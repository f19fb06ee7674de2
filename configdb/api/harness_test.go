package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/dbtest"
	"github.com/opsfirehose/firehose/internal/testbus"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// server is the real handler on real storage behind a real HTTP server,
// publishing to a real broker.
type server struct {
	t   *testing.T
	h   *Handler
	bus *testbus.Bus
	url string
	// headers are sent with every request (credentials).
	headers map[string]string
}

type serverOptions struct {
	cfg       func(*Config)
	publisher func(*testbus.Bus) bus.Publisher
	tokens    TokenChecker
	shared    *httpserver.Tokens // http.tokens
	now       func() time.Time
	noRun     bool
}

func startServer(t *testing.T, dsn string, so serverOptions) *server {
	t.Helper()
	b := testbus.Start(t)
	cfg := DefaultConfig()
	cfg.DSN = dsn
	cfg.Outbox.RetryMin = 10 * time.Millisecond
	cfg.Outbox.RetryMax = 50 * time.Millisecond
	if so.cfg != nil {
		so.cfg(&cfg)
	}
	var pub bus.Publisher = b
	if so.publisher != nil {
		pub = so.publisher(b)
	}
	h, err := Open(context.Background(), cfg, Options{Options: intake.Options{Publisher: pub, Logger: zerolog.Nop(), Tokens: so.shared, Now: so.now}, TokenChecker: so.tokens})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	if !so.noRun {
		if err := h.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		srv.Close()
		if err := h.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &server{t: t, h: h, bus: b, url: srv.URL + BasePath, headers: map[string]string{}}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return string(r.body) }

// json decodes the body into a generic value.
func (r response) json(t *testing.T) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return v
}

// msg is the "msg" of an error body.
func (r response) msg(t *testing.T) string {
	t.Helper()
	var e struct{ Msg, Error string }
	if err := json.Unmarshal(r.body, &e); err != nil || e.Msg == "" || e.Msg != e.Error {
		t.Fatalf("not an error body with msg and error: %q", r.body)
	}
	return e.Msg
}

// do sends a request; body is a string (sent as is) or anything else (sent
// as JSON). Extra headers come in pairs.
func (s *server) do(method, path string, body any, headers ...string) response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// must sends a request and fails the test unless the status is want.
func (s *server) must(want int, method, path string, body any, headers ...string) response {
	s.t.Helper()
	r := s.do(method, path, body, headers...)
	if r.status != want {
		s.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r
}

// fixture is tuning-box's test fixture: component 7 "component1" with
// resource definition 5 "resdef1", environment 9 with levels lvl1, lvl2.
func (s *server) fixture() {
	s.t.Helper()
	// Ids 1-6 are used and deleted first, so that the fixture gets
	// tuning-box's ids and shows that ids are never reused.
	for i := range 6 {
		defs := []any{}
		if i < 4 {
			defs = append(defs, map[string]any{"name": "tmp"})
		}
		r := s.must(201, "POST", "/components", map[string]any{"name": "tmp", "resource_definitions": defs})
		id := int64(r.json(s.t).(map[string]any)["id"].(float64))
		s.must(204, "DELETE", "/components/"+itoa(id), nil)
	}
	s.must(201, "POST", "/components", map[string]any{
		"name": "component1", "resource_definitions": []any{map[string]any{"name": "resdef1", "content": map[string]any{"key": "nsname.key"}}},
	})
	s.must(201, "POST", "/environments", map[string]any{"id": 9, "components": []any{7}, "hierarchy_levels": []any{"lvl1", "lvl2"}})
}

func itoa(i int64) string { return strings.TrimSpace(string(mustJSON(i))) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// eachDB runs a test against SQLite and PostgreSQL.
func eachDB(t *testing.T, f func(t *testing.T, dsn string)) { dbtest.Each(t, f) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// freshDSN returns another empty database of dsn's kind, for a test on both
// databases that needs more than one server.
func freshDSN(t *testing.T, dsn string) string {
	if configdb.IsPostgres(dsn) {
		return dbtest.Postgres(t)
	}
	return dbtest.SQLite(t)
}
