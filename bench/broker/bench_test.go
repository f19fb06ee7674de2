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

// TestSmokeBoth runs the whole comparison at its smallest: cmd/broker built
// and started with oursConfig(), mosquitto beside it, QoS 1 and 0, one short
// round each, rate-limited so that it stays quick under -race. It checks the
// plumbing and the report's ratio and target lines, not the figures.
func TestSmokeBoth(t *testing.T) {
	p := defaultParams()
	p.MosqBin = testkit.RequireCommand(t, "mosquitto")
	p.MosqPasswd = testkit.RequireCommand(t, "mosquitto_passwd")
	p.OursPkg = "./cmd/broker"
	p.Pubs, p.Subs = 1, 1
	p.Duration = 300 * time.Millisecond
	p.Drain = 3 * time.Second
	p.Rounds = 1
	p.Rate = 2000
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var progress bytes.Buffer
	rep, err := run(ctx, p, &progress)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Measurements) != 4 {
		t.Fatalf("got %d measurements, want 4 (2 brokers x 2 QoS)", len(rep.Measurements))
	}
	for _, m := range rep.Measurements {
		if m.Received == 0 || m.PublishedTotal == 0 {
			t.Errorf("%s QoS %d: published %d, received %d", m.Broker, m.QoS, m.PublishedTotal, m.Received)
		}
		if m.QoS == 1 && (m.Lost != 0 || m.Received != m.Expected) {
			t.Errorf("%s QoS 1: lost %d, received %d of %d expected", m.Broker, m.Lost, m.Received, m.Expected)
		}
	}

	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	qos1, qos0, ok := strings.Cut(text, "\nQoS 0 (medians over 1 rounds)\n")
	if !ok || !strings.Contains(qos1, "\nQoS 1 (medians over 1 rounds)\n") {
		t.Fatalf("report lacks the QoS 1 and QoS 0 sections:\n%s", text)
	}
	for _, sec := range []struct{ name, text, target string }{
		{"QoS 1", qos1, "QoS 1 target (>= 1.0 with no loss): "},
		{"QoS 0", qos0, "QoS 0 target (>= 0.9): "},
	} {
		if !strings.Contains(sec.text, "ratio ours/mosquitto recv msgs/s: ") || !strings.Contains(sec.text, sec.target) {
			t.Errorf("%s section lacks the ratio or the target line:\n%s", sec.name, sec.text)
		}
	}
}
