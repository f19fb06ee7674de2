package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// TestSmoke runs a tiny benchmark (1 publisher, 1 s, 1 round) end to end:
// it builds cmd/bridge, starts nats-server in-process, measures the
// baseline and the routed bridge, and checks that the stream stored exactly
// the PUBACKed messages, so the tool cannot rot silently. It needs no
// external tools.
func TestSmoke(t *testing.T) {
	p := defaultParams()
	p.Pubs = 1
	p.Duration = time.Second
	p.Rounds = 1
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := run(ctx, p, &progress)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Measurements) != 2 {
		t.Fatalf("got %d measurements, want 2 (baseline, routed)", len(rep.Measurements))
	}
	for _, m := range rep.Measurements {
		if m.AckedInWindow == 0 || m.PubRate <= 0 || m.Acked < m.AckedInWindow {
			t.Errorf("%s: no throughput: %+v", m.Mode, m)
		}
		if m.Unacked != 0 || m.UnexpectedAcks != 0 {
			t.Errorf("%s: %d unacked, %d unexpected PUBACKs", m.Mode, m.Unacked, m.UnexpectedAcks)
		}
		if m.P50 <= 0 || m.P99 < m.P50 {
			t.Errorf("%s: latency p50 %v p99 %v", m.Mode, m.P50, m.P99)
		}
	}
	base, routed := rep.Measurements[0], rep.Measurements[1]
	if base.Mode != modeBaseline || routed.Mode != modeRouted {
		t.Fatalf("modes %s, %s; want baseline then routed", base.Mode, routed.Mode)
	}
	if base.Stored != -1 {
		t.Errorf("baseline reports %d stored; it has no route", base.Stored)
	}
	if routed.Stored != routed.Acked || routed.Stored == 0 {
		t.Errorf("routed: the stream stored %d messages, %d were PUBACKed", routed.Stored, routed.Acked)
	}
	if routed.Delivered+routed.Outboxed < routed.Acked {
		t.Errorf("routed: the route counted %d delivered + %d outboxed, fewer than %d PUBACKed", routed.Delivered, routed.Outboxed, routed.Acked)
	}
	if rep.Verdict == nil || rep.Verdict.Ratio <= 0 || !rep.Verdict.AllStored {
		t.Errorf("verdict %+v", rep.Verdict)
	}

	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"medians over 1 rounds", "stored == PUBACKed in 1 of 1 routed rounds", "ratio routed/baseline: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := benchkit.WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
}

func TestBridgeConfigOnlyRoutesWhenRouted(t *testing.T) {
	base := bridgeConfig("127.0.0.1:1", "127.0.0.1:2", "/tmp/d", "u", "$2a$10$x", "")
	routed := bridgeConfig("127.0.0.1:1", "127.0.0.1:2", "/tmp/d", "u", "$2a$10$x", "nats://127.0.0.1:4222")
	if strings.Contains(base, "routes:") || strings.Contains(base, "sinks:") {
		t.Errorf("baseline config routes:\n%s", base)
	}
	for _, want := range []string{"routes:", "filters: [\"#\"]", "type: jetstream", "\"nats://127.0.0.1:4222\"", "name: FIREHOSE", "create: true"} {
		if !strings.Contains(routed, want) {
			t.Errorf("routed config lacks %q:\n%s", want, routed)
		}
	}
	if !strings.HasPrefix(routed, base) {
		t.Error("the routed config differs from the baseline's in more than the route")
	}
}
