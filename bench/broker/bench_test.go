package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSmokeMosquitto runs a tiny benchmark (1 publisher, 1 subscriber, 1s,
// 1 round, QoS 1) against mosquitto only, so the tool cannot rot silently.
// It does not need cmd/broker.
func TestSmokeMosquitto(t *testing.T) {
	p := defaultParams()
	if _, err := os.Stat(p.MosqBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI (apt-get install mosquitto): %v", p.MosqBin, err)
		}
		t.Skipf("%s not installed: %v", p.MosqBin, err)
	}
	if _, err := exec.LookPath(p.MosqPasswd); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI (apt-get install mosquitto): %v", p.MosqPasswd, err)
		}
		t.Skipf("%s not installed: %v", p.MosqPasswd, err)
	}

	p.Brokers = []string{nameMosquitto}
	p.QoS = []int{1}
	p.Pubs, p.Subs = 1, 1
	p.Duration = time.Second
	p.Rounds = 1
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var progress bytes.Buffer
	rep, err := run(ctx, p, &progress)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Measurements) != 1 {
		t.Fatalf("got %d measurements, want 1", len(rep.Measurements))
	}
	m := rep.Measurements[0]
	if m.Received == 0 || m.RecvRate <= 0 {
		t.Errorf("nothing received: %+v", m)
	}
	if m.PublishedTotal == 0 {
		t.Errorf("nothing published: %+v", m)
	}
	if m.Lost != 0 || m.Unacked != 0 || m.Received != m.Expected {
		t.Errorf("lost %d, unacked %d, received %d of %d expected", m.Lost, m.Unacked, m.Received, m.Expected)
	}
	if m.Dup != 0 || m.Foreign != 0 || m.UnexpectedAcks != 0 || m.WrongQoS != 0 {
		t.Errorf("dup %d, foreign %d, unexpected acks %d, wrong QoS %d", m.Dup, m.Foreign, m.UnexpectedAcks, m.WrongQoS)
	}
	if m.P50 <= 0 || m.P99 < m.P50 {
		t.Errorf("latency p50 %v p99 %v", m.P50, m.P99)
	}

	var out bytes.Buffer
	if err := rep.writeText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "QoS 1 (medians over 1 rounds)") || !strings.Contains(out.String(), "mosquitto") {
		t.Errorf("unexpected report:\n%s", out.String())
	}
	out.Reset()
	if err := rep.writeJSON(&out); err != nil {
		t.Fatal(err)
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for v := int64(1); v <= 100000; v++ {
		h.record(v * 1000) // 1µs .. 100ms
	}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 50e6}, {0.99, 99e6}, {0.01, 1e6}} {
		got := float64(h.quantile(c.q))
		if got < c.want*0.97 || got > c.want*1.03 {
			t.Errorf("quantile(%v) = %v, want ~%v", c.q, got, c.want)
		}
	}
	for i := 0; i <= histIndex(1<<62); i++ {
		if v := histValue(i); histIndex(uint64(v)) != i {
			t.Fatalf("bucket %d: midpoint %d maps to bucket %d", i, v, histIndex(uint64(v)))
		}
	}
}

func TestBitsetLoss(t *testing.T) {
	var got, want bitset
	for i := uint64(0); i < 1000; i++ {
		want.set(i)
		if i%10 != 0 {
			got.set(i)
		}
	}
	if n := got.countMissing(&want); n != 100 {
		t.Errorf("countMissing = %d, want 100", n)
	}
	if n := got.countMissingPrefix(1000); n != 100 {
		t.Errorf("countMissingPrefix = %d, want 100", n)
	}
	if n := got.countMissingPrefix(5); n != 1 {
		t.Errorf("countMissingPrefix(5) = %d, want 1", n)
	}
	if !got.testAndSet(1) || got.testAndSet(10) {
		t.Error("testAndSet")
	}
	if medianFloat([]float64{3, 1, 2}) != 2 || medianFloat([]float64{4, 1, 2, 3}) != 2.5 {
		t.Error("medianFloat")
	}
}
