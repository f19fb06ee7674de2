package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestSmoke runs a tiny benchmark end to end (200 nodes, one short round of
// each measure) so that the tool cannot rot silently.
func TestSmoke(t *testing.T) {
	testkit.RequireCommand(t, "chromium")
	p := params{Nodes: 200, BaseNodes: 20, Rate: 200, Pages: 2, Window: time.Second, LoadRounds: 1, CPURounds: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, p, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"200 nodes:", "(baseline)", "2 pages on Fleet", "2 pages on Stream '#'"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}
