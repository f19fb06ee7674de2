package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/bytesize"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/tlsconfig"
)

// TestTokens checks the wrapper; credentials.Tokens has the comparisons' tests.
func TestTokens(t *testing.T) {
	tokens := NewTokens([]Token{{Name: "chef", Token: "abc"}, {Token: "anon"}})
	if name, ok := tokens.Check("abc"); name != "chef" || !ok {
		t.Errorf("Check(abc) = %q, %v", name, ok)
	}
	if name, ok := tokens.Check("ab"); name != "" || ok {
		t.Errorf("Check(ab) = %q, %v", name, ok)
	}
	if !tokens.Required() || NewTokens(nil).Required() {
		t.Error("Required() wrong")
	}
	if _, ok := NewTokens(nil).Check(""); ok {
		t.Error("no tokens configured, yet the empty token passed")
	}
}

func TestErrorBodies(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, http.StatusBadRequest, "missing node_name", "node_name")
	if w.Code != 400 || w.Header().Get("Content-Type") != "application/json" ||
		strings.TrimSpace(w.Body.String()) != `{"error":"missing node_name","field":"node_name"}` {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	w = httptest.NewRecorder()
	WriteRetry(w, http.StatusServiceUnavailable, 0, "outbox full")
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || strings.TrimSpace(w.Body.String()) != `{"error":"outbox full"}` {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestServesTLS(t *testing.T) {
	certs := testkit.TLS(t)
	cfg := DefaultConfig()
	cfg.Address = "127.0.0.1:0"
	cfg.TLS = &tlsconfig.Files{CertFile: certs.CertFile, KeyFile: certs.KeyFile}
	s, err := New(cfg, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("GET /ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") }))
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.CertPool(t)}}}
	resp, err := client.Get("https://" + s.Addr() + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "pong" {
		t.Fatalf("got %q", body)
	}
	// A method the route does not take is refused, not served.
	resp, err = client.Post("https://"+s.Addr()+"/ping", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST to a GET route: %d", resp.StatusCode)
	}
}

func TestReadBody(t *testing.T) {
	tests := []struct {
		body          string
		contentLength int64 // -1: unknown (chunked)
		max           int64
		wantCode      int
	}{
		{"hello", 5, 10, 0},
		{"hello", -1, 10, 0},
		{"", 0, 10, 0},
		{"hello world", 11, 10, http.StatusRequestEntityTooLarge},
		{"hello world", -1, 10, http.StatusRequestEntityTooLarge},
		{strings.Repeat("x", 100_000), -1, 200_000, 0},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		r.ContentLength = tt.contentLength
		w := httptest.NewRecorder()
		got, ok := ReadBody(w, r, bytesize.Size(tt.max))
		if tt.wantCode == 0 {
			if !ok || string(got) != tt.body {
				t.Errorf("%d bytes: ok=%v, got %d bytes (%d %s)", len(tt.body), ok, len(got), w.Code, w.Body)
			}
			continue
		}
		if ok || w.Code != tt.wantCode || !strings.Contains(w.Body.String(), `"error":"`) {
			t.Errorf("%d bytes, max %d: ok=%v code=%d body=%s", len(tt.body), tt.max, ok, w.Code, w.Body)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	tokens := NewTokens([]Token{{Name: "chef", Token: "abc"}})
	tests := []struct {
		headers  map[string]string
		wantCode int
		wantName string
	}{
		{map[string]string{"X-Data-Collector-Token": "abc"}, 0, "chef"},
		{map[string]string{"Api-Token": "abc"}, 0, "chef"},
		{map[string]string{"Authorization": "Bearer abc"}, 0, "chef"},
		{map[string]string{"Authorization": "Basic abc"}, http.StatusUnauthorized, ""},
		{map[string]string{}, http.StatusUnauthorized, ""},
		{map[string]string{"X-Data-Collector-Token": "abd"}, http.StatusForbidden, ""},
		{map[string]string{"X-Data-Collector-Auth": "version=1.0"}, http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", nil)
		for k, v := range tt.headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		name, ok := Authenticate(w, r, tokens, "X-Data-Collector-Token", "Api-Token", "Authorization")
		if tt.wantCode == 0 {
			if !ok || name != tt.wantName {
				t.Errorf("%v: ok=%v name=%q (%d)", tt.headers, ok, name, w.Code)
			}
			continue
		}
		if ok || w.Code != tt.wantCode {
			t.Errorf("%v: ok=%v code=%d, want %d", tt.headers, ok, w.Code, tt.wantCode)
		}
	}
	// No tokens configured: authentication is off.
	w := httptest.NewRecorder()
	if _, ok := Authenticate(w, httptest.NewRequest("POST", "/", nil), NewTokens(nil), "Api-Token"); !ok {
		t.Error("request refused with no tokens configured")
	}
}

func TestWritePublishError(t *testing.T) {
	tests := []struct {
		err        error
		code       int
		retryAfter string
	}{
		{fmt.Errorf("x: %w", bus.ErrInvalid), 400, ""},
		{fmt.Errorf("x: %w", bus.ErrOverloaded), 429, "2"},
		{fmt.Errorf("x: %w", bus.ErrUnavailable), 503, "5"},
		{context.DeadlineExceeded, 503, "5"},
		{errors.New("anything else"), 503, "5"},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		WritePublishError(w, tt.err)
		if w.Code != tt.code || w.Header().Get("Retry-After") != tt.retryAfter {
			t.Errorf("%v: %d Retry-After=%q", tt.err, w.Code, w.Header().Get("Retry-After"))
		}
	}
}

// TestNeverRedirectsWrites: the mux redirects unclean paths, which a Chef
// client raises on for a POST; writes get a JSON 404 naming the clean path,
// reads keep the redirect.
func TestNeverRedirectsWrites(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Address = "127.0.0.1:0"
	s, err := New(cfg, Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	s.Handle("POST /in/v0/{$}", ok)
	s.Handle("GET /in/v0/{$}", ok)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		method, path string
		want         int
		body         string
	}{
		{"POST", "/in/v0/", 200, "ok"},
		{"POST", "//in/v0/", 404, `{"error":"no such endpoint: //in/v0/; did you mean /in/v0/?"}`},
		{"POST", "/in/../in/v0/", 404, "did you mean /in/v0/?"},
		{"PUT", "//in/v0/", 404, "no such endpoint"},
		{"GET", "//in/v0/", 0, ""}, // 0: any redirect
	} {
		req, _ := http.NewRequest(tt.method, "http://"+s.Addr()+tt.path, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		redirected := resp.StatusCode/100 == 3 && resp.Header.Get("Location") == "/in/v0/"
		if (tt.want == 0 && !redirected) || (tt.want != 0 && resp.StatusCode != tt.want) || !strings.Contains(string(body), tt.body) {
			t.Errorf("%s %s: %d %s, want %d with %q", tt.method, tt.path, resp.StatusCode, body, tt.want, tt.body)
		}
	}
}

func TestLimitedReader(t *testing.T) {
	tooBig := errors.New("too big")
	for _, tt := range []struct {
		size, limit int
		err         error
	}{{10, 10, nil}, {10, 11, nil}, {11, 10, tooBig}, {0, 0, nil}} {
		_, err := io.ReadAll(&LimitedReader{R: strings.NewReader(strings.Repeat("x", tt.size)), Left: int64(tt.limit), Err: tooBig})
		if !errors.Is(err, tt.err) {
			t.Errorf("%d bytes, limit %d: %v", tt.size, tt.limit, err)
		}
	}
}

// BenchmarkReadAll reads a 4 MiB body with its Content-Length, as a large
// Chef converge message comes: the buffer doubles from 16 KiB to the
// claimed length as the bytes arrive, instead of being sized from the claim.
func BenchmarkReadAll(b *testing.B) {
	body := strings.Repeat("x", 4<<20)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		if got, err := ReadAll(r, 32*bytesize.MiB); err != nil || len(got) != len(body) {
			b.Fatal(err)
		}
	}
}
