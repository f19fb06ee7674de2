package api

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestWiredLikeTheBridge wires the handler as app does: on the bridge's
// httpserver.Server, with http.tokens as the fallback credentials, the
// bridge's registry, SQLite under the data directory, Run until shutdown,
// then Close. A write through it is answered and published.
func TestWiredLikeTheBridge(t *testing.T) {
	b := testbus.Start(t)
	ch := b.Subscribe(t, "configdb/#")
	reg := prometheus.NewRegistry()
	srv, err := httpserver.New(httpserver.Config{
		Address: "127.0.0.1:0",
		Tokens:  []httpserver.Token{{Name: "ops", Token: "t0ken"}},
	}, httpserver.Options{Logger: zerolog.Nop(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	h, err := Open(context.Background(), DefaultConfig(), Options{
		Options: intake.Options{
			Publisher: b, Logger: zerolog.Nop().With().Str("adapter", "configdb").Logger(),
			Tokens: srv.Tokens(), Registerer: reg,
		},
		DataDir: dataDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(srv)
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	base := "http://" + srv.Addr() + BasePath
	do := func(method, path, body string, want int) string {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("X-Auth-Token", "t0ken")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %s %s, want %d", method, path, resp.Status, got, want)
		}
		return string(got)
	}
	do("POST", "/components", `{"name": "fuel", "resource_definitions": [{"name": "override/plugins"}]}`, 201)
	do("POST", "/environments", `{"id": 1, "components": ["fuel"], "hierarchy_levels": ["nodes"]}`, 201)
	do("PUT", "/environments/1/nodes/node-1/resources/override%2Fplugins/values", `{"a": 1}`, 204)
	if got := do("GET", "/environments/1/nodes/node-1/resources/override/plugins/values?effective&show_lookup", "", 200); got != `{"a":[1,"/nodes/node-1/"]}` {
		t.Fatal(got)
	}
	if got := testkit.Next(t, ch).Topic; got != "configdb/components/1/created" {
		t.Fatal(got)
	}

	// Close in pipeline order: HTTP, then the relay and the database.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(sctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(sctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(t.Context()); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"firehose_configdb_events_published_total", "firehose_configdb_outbox_pending", "firehose_configdb_cache_hits_total"} {
		if !names[want] {
			t.Errorf("metric %s is not registered", want)
		}
	}
}
