package intaketest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// Pinned is the clock of Options, so golden files do not change with time.
var Pinned = time.Date(2017, 4, 7, 18, 33, 12, 0, time.UTC)

// Options are an adapter's options for a test: pub, the given tokens (none
// means no token is needed), no logs, the Pinned clock.
func Options(pub bus.Publisher, tokens []httpserver.Token) intake.Options {
	return intake.Options{Publisher: pub, Logger: zerolog.Nop(), Tokens: httpserver.NewTokens(tokens),
		Now: func() time.Time { return Pinned }}
}

// Serve runs an adapter's endpoints behind a real HTTP server, closed when
// the test ends.
func Serve(t testing.TB, h interface {
	Register(interface{ Handle(string, http.Handler) })
}) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// Post sends body to url with the given headers, and returns the status,
// the response headers and the body without surrounding space.
func Post[B string | []byte](t testing.TB, url string, body B, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, b := testkit.Do(t, nil, req)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(b))
}

// GoldenLine is one received message as an output.txt shows it: topic,
// retained flag and the payload itself when it is one short line, else its
// SHA-256.
func GoldenLine(m testkit.Received) string {
	p := m.Payload
	if len(p) > 4096 || strings.ContainsAny(p, "\n\t") {
		sum := sha256.Sum256([]byte(p))
		p = "sha256:" + hex.EncodeToString(sum[:])
	}
	return fmt.Sprintf("%s\t%v\t%s", m.Topic, m.Retained, p)
}

// CheckGolden compares got with the file at path, or rewrites the file
// when update is set (go test -update).
func CheckGolden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s:\n got %s\nwant %s", path, got, want)
	}
}
