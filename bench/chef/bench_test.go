package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// TestMain lets the test binary serve as the benchmark's child servers, as
// the command does.
func TestMain(m *testing.M) {
	if mode := os.Getenv(serveEnv); mode != "" {
		if err := serve(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSmoke runs a tiny benchmark so that the tool cannot rot silently: it
// checks that it measures and that every bus message arrives, not the
// targets, which need a quiet machine.
func TestSmoke(t *testing.T) {
	p := defaultParams()
	p.Rounds, p.Duration, p.Clients, p.BigSize = 1, 500*time.Millisecond, 2, 1_000_000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := run(ctx, p, &progress)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Baseline) != 1 || len(rep.Bridge) != 1 || rep.Baseline[0].Accepted == 0 || rep.Bridge[0].Accepted == 0 {
		t.Fatalf("nothing measured: %+v", rep)
	}
	b := rep.Bridge[0]
	if b.PerRequest != 15 || b.Received != b.Expected || rep.Lost != 0 {
		t.Errorf("bridge: %d messages per request, %d of %d received", b.PerRequest, b.Received, b.Expected)
	}
	if rep.RSS == nil || rep.RSS.Growth <= 0 || rep.RSS.Received != rep.RSS.Expected {
		t.Errorf("rss: %+v", rep.RSS)
	}
	var out bytes.Buffer
	if err := rep.writeText(&out); err != nil || !bytes.Contains(out.Bytes(), []byte("ratio bridge / baseline")) {
		t.Errorf("report: %v\n%s", err, out.String())
	}
}

func TestBigConverge(t *testing.T) {
	fixture, err := os.ReadFile(fixturePath(defaultParams().Fixture))
	if err != nil {
		t.Fatal(err)
	}
	big, err := bigConverge(fixture, 3_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(big) < 3_000_000 || len(big) > 3_001_000 || !jsonscan.Valid(big) {
		t.Fatalf("%d bytes", len(big))
	}
	if v, ok := jsonscan.Path(big, "node", "automatic", "bench_packages", "pkg-0000001", "arch"); !ok || string(v) != `"amd64"` {
		t.Fatalf("the packages are not in node.automatic: %s", v)
	}
	if v, _ := jsonscan.Path(big, "node", "automatic", "chef_packages", "chef", "version"); string(v) != `"12.21.3"` {
		t.Fatalf("the rest of node.automatic moved: %s", v)
	}
}

// TestTeamsSmoke runs -teams (both workloads) and -fleet briefly: they
// measure, and every message arrives.
func TestTeamsSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := defaultParams()
	p.Rounds, p.Duration, p.Clients = 1, 500*time.Millisecond, 2
	for _, w := range []string{workloadSteady, workloadFirstRun} {
		var progress bytes.Buffer
		rep, err := runTeams(ctx, p, w, &progress)
		t.Logf("%s:\n%s", w, progress.String())
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Today) != 1 || len(rep.Teams) != 1 || rep.Today[0].Accepted == 0 || rep.Teams[0].Accepted == 0 || rep.Lost != 0 {
			t.Fatalf("%s: %+v", w, rep)
		}
		// 02 makes 15 messages; a first run adds one per cookbook (34).
		want := int64(15)
		if w == workloadFirstRun {
			want += 34
		}
		if rep.Teams[0].PerRequest != want || rep.Today[0].PerRequest != 15 {
			t.Errorf("%s: %d and %d messages per converge", w, rep.Today[0].PerRequest, rep.Teams[0].PerRequest)
		}
		var out bytes.Buffer
		if err := rep.writeText(&out, p); err != nil || !bytes.Contains(out.Bytes(), []byte("ratio teams / today, of the medians")) {
			t.Errorf("report: %v\n%s", err, out.String())
		}
	}
	var progress bytes.Buffer
	fleet, err := runFleet(ctx, modeTeams, 50, 10, 3, 2, &progress)
	t.Logf("fleet:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	// First runs: the run, an event per cookbook, the status; then one
	// event each; then nothing but the run and its status.
	if len(fleet.Phases) != 3 || fleet.Phases[0].Messages != 50*12 || fleet.Phases[1].Messages != 50*3 ||
		fleet.Phases[2].Messages != 50*2 || fleet.Phases[2].DiskUsed == 0 {
		t.Errorf("fleet: %+v", fleet.Phases)
	}
	// -fleet-passes 1 stops once every node has had its first run.
	if fleet, err = runFleet(ctx, modeBridge, 50, 10, 1, 2, &progress); err != nil {
		t.Fatal(err)
	}
	if len(fleet.Phases) != 1 || fleet.Phases[0].Messages != 50*2 {
		t.Errorf("fleet, one pass, today's bridge: %+v", fleet.Phases)
	}
}
