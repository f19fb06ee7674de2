package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestSmokeMosquitto runs a tiny benchmark (1 publisher, 1 subscriber, 1s,
// 1 round, QoS 1) against mosquitto only, so the tool cannot rot silently.
// It does not need cmd/broker.
func TestSmokeMosquitto(t *testing.T) {
	p := defaultParams()
	p.MosqBin = testkit.RequireCommand(t, "mosquitto")
	p.MosqPasswd = testkit.RequireCommand(t, "mosquitto_passwd")

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
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "QoS 1 (medians over 1 rounds)") || !strings.Contains(out.String(), "mosquitto") {
		t.Errorf("unexpected report:\n%s", out.String())
	}
	out.Reset()
	if err := benchkit.WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
}
