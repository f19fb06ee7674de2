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
	p.Shapes = []string{shapeWindowed}
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
	if !strings.Contains(out.String(), "windowed shape, QoS 1 (medians over 1 rounds)") || !strings.Contains(out.String(), "mosquitto") {
		t.Errorf("unexpected report:\n%s", out.String())
	}
	out.Reset()
	if err := benchkit.WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
}

// TestSmokeBoth runs the whole comparison at its smallest: cmd/broker built
// and started with oursConfig(), mosquitto beside it, both shapes at QoS 1
// and 0 (the waits shape with and without its subscriber), one short round
// each, rate-limited so that it stays quick under -race. It checks the
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
	p.WaitsClients, p.WaitsCount = 2, 200
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
	if len(rep.Measurements) != 12 {
		t.Fatalf("got %d measurements, want 12 (2 brokers x (4 waits + 2 windowed workloads))", len(rep.Measurements))
	}
	for _, m := range rep.Measurements {
		w := m.workload()
		if m.PublishedTotal == 0 || (m.Subs > 0 && m.Received == 0) {
			t.Errorf("%s %s: published %d, received %d", m.Broker, w, m.PublishedTotal, m.Received)
		}
		if m.QoS == 1 && (m.Lost != 0 || m.Received != m.Expected) {
			t.Errorf("%s %s: lost %d, received %d of %d expected", m.Broker, w, m.Lost, m.Received, m.Expected)
		}
		if m.Shape != shapeWaits {
			continue
		}
		if m.Incomplete != 0 || m.PublishedTotal != int64(p.WaitsClients*p.WaitsCount) {
			t.Errorf("%s %s: %d clients incomplete, %d of %d published", m.Broker, w, m.Incomplete, m.PublishedTotal, p.WaitsClients*p.WaitsCount)
		}
		if m.PubRate <= 0 || m.ClientRateSum < m.PubRate*0.99 {
			// Each client's own rate is at least the aggregate's share.
			t.Errorf("%s %s: pub rate %.0f, client rate sum %.0f", m.Broker, w, m.PubRate, m.ClientRateSum)
		}
		if m.QoS == 1 && (m.AckP50 <= 0 || m.AckP99 < m.AckP50) {
			t.Errorf("%s %s: PUBACK latency p50 %v p99 %v", m.Broker, w, m.AckP50, m.AckP99)
		}
	}

	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, sec := range []struct{ head, target string }{
		{"\nwaits shape, QoS 1, no subscriber: 2 clients x 200 msgs of 100 B (medians over 1 rounds)\n", "target (>= 1.0): "},
		{"\nwaits shape, QoS 1, 1 subscriber on bench/#: ", "target (>= 1.0 with no loss): "},
		{"\nwaits shape, QoS 0, no subscriber: ", "target (>= 1.0): "},
		{"\nwaits shape, QoS 0, 1 subscriber on bench/#: ", "target (>= 1.0): "},
		{"\nwindowed shape, QoS 1 (medians over 1 rounds)\n", "target (>= 1.5 with no loss): "},
		{"\nwindowed shape, QoS 0 (medians over 1 rounds)\n", "target (>= 0.9): "},
	} {
		_, rest, ok := strings.Cut(text, sec.head)
		if !ok {
			t.Errorf("report lacks %q:\n%s", sec.head, text)
			continue
		}
		section, _, _ := strings.Cut(rest, "\nwindowed shape")
		section, _, _ = strings.Cut(section, "\nwaits shape")
		if !strings.Contains(section, "ratio ours/mosquitto ") || !strings.Contains(section, sec.target) {
			t.Errorf("section %q lacks the ratio or the target line %q:\n%s", sec.head, sec.target, section)
		}
	}
}
