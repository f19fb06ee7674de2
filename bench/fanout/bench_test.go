package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// TestSmoke runs a tiny benchmark end to end, both shapes, one round (1
// windowed publisher for 1 s; 2 waiting clients x 200 messages): it builds
// cmd/bridge, starts nats-server in-process with its MQTT listener, measures
// the baseline, the routed bridge and nats-mqtt, and checks that the streams
// stored exactly the PUBACKed messages, so the tool cannot rot silently. It
// needs no external tools.
func TestSmoke(t *testing.T) {
	p := defaultParams()
	p.Pubs = 1
	p.Duration = time.Second
	p.WaitsClients, p.WaitsCount = 2, 200
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
	if len(rep.Measurements) != 6 {
		t.Fatalf("got %d measurements, want 6 (2 shapes x baseline, routed, nats-mqtt)", len(rep.Measurements))
	}
	for i, m := range rep.Measurements {
		if want := []string{shapeWindowed, shapeWaits}[i/3]; m.Shape != want || m.Mode != modes[i%3] {
			t.Fatalf("measurement %d is %s %s; want %s %s", i, m.Shape, m.Mode, want, modes[i%3])
		}
		if m.AckedInWindow == 0 || m.PubRate <= 0 || m.Acked < m.AckedInWindow {
			t.Errorf("%s %s: no throughput: %+v", m.Shape, m.Mode, m)
		}
		if m.Unacked != 0 || m.UnexpectedAcks != 0 || m.Incomplete != 0 {
			t.Errorf("%s %s: %d unacked, %d unexpected PUBACKs, %d clients incomplete", m.Shape, m.Mode, m.Unacked, m.UnexpectedAcks, m.Incomplete)
		}
		if m.P50 <= 0 || m.P99 < m.P50 {
			t.Errorf("%s %s: latency p50 %v p99 %v", m.Shape, m.Mode, m.P50, m.P99)
		}
		switch m.Mode {
		case modeBaseline:
			if m.Stored != -1 {
				t.Errorf("%s baseline reports %d stored; it has no route", m.Shape, m.Stored)
			}
		case modeRouted:
			if m.Delivered+m.Outboxed < m.Acked {
				t.Errorf("%s routed: the route counted %d delivered + %d outboxed, fewer than %d PUBACKed", m.Shape, m.Delivered, m.Outboxed, m.Acked)
			}
			fallthrough
		default:
			if m.Stored != m.Acked || m.Stored == 0 {
				t.Errorf("%s %s: the stream stored %d messages, %d were PUBACKed", m.Shape, m.Mode, m.Stored, m.Acked)
			}
		}
		if m.Shape == shapeWaits && m.Acked != int64(p.WaitsClients*p.WaitsCount) {
			t.Errorf("%s %s: %d PUBACKed, want %d", m.Shape, m.Mode, m.Acked, p.WaitsClients*p.WaitsCount)
		}
		if m.Mode == modeNATSMQTT && m.BridgeCPU != -1 {
			t.Errorf("nats-mqtt reports bridge CPU %v; it has no bridge", m.BridgeCPU)
		}
	}
	if len(rep.Verdicts) != 2 {
		t.Fatalf("verdicts %+v; want one per shape", rep.Verdicts)
	}
	for _, v := range rep.Verdicts {
		if v.Ratio <= 0 || v.NATSRatio <= 0 || !v.AllStored {
			t.Errorf("verdict %+v", v)
		}
	}

	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"windowed shape, medians over 1 rounds", "waits shape, medians over 1 rounds",
		"routed: stored == PUBACKed in 1 of 1 rounds", "nats-mqtt: stored == PUBACKed in 1 of 1 rounds",
		"ratio routed/baseline: ", "ratio routed/nats-mqtt: ", "(target >= 0.8)", "(target >= 0.6)", "(target >= 1.0)",
	} {
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
