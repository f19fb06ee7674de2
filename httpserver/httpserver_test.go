package httpserver

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/tlsconfig"
)

func TestTokens(t *testing.T) {
	tokens := NewTokens([]Token{{Name: "chef", Token: "abc"}, {Name: "ci", Token: "xyz"}, {Token: "anon"}})
	tests := []struct {
		presented string
		name      string
		ok        bool
	}{
		{"abc", "chef", true},
		{"xyz", "ci", true},
		{"anon", "", true},
		{"ab", "", false},
		{"abcd", "", false},
		{"", "", false},
		{"ABC", "", false},
	}
	for _, tt := range tests {
		name, ok := tokens.Check(tt.presented)
		if name != tt.name || ok != tt.ok {
			t.Errorf("Check(%q) = %q, %v; want %q, %v", tt.presented, name, ok, tt.name, tt.ok)
		}
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
	s.Start()
	defer s.Shutdown(context.Background())
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
