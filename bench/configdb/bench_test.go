package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs a tiny benchmark so that the tool cannot rot silently: it
// checks that it loads, measures and reports, not the targets, which need
// the full shapes and a quiet machine.
func TestSmoke(t *testing.T) {
	p := defaultParams()
	p.Backends = []string{"sqlite"}
	p.Rounds, p.Duration, p.Scale = 1, 200*time.Millisecond, 0.05
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress, out bytes.Buffer
	results, err := run(ctx, p, &progress)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	report(&out, p, results)
	t.Logf("report:\n%s", out.String())
	if len(results) != 2 {
		t.Fatalf("%d results", len(results))
	}
	for _, r := range results {
		if r.ours.rate <= 0 || r.baseline.rate <= 0 || r.ours.p50 <= 0 || r.bodyBytes == 0 {
			t.Errorf("%+v", r)
		}
	}
	if !strings.Contains(out.String(), "sqlite") {
		t.Fatal(out.String())
	}
}
