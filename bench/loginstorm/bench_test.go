package main

import (
	"context"
	"testing"
	"time"
)

// TestSmoke runs a tiny benchmark (1 round of 1 s per mode, 4 guessers)
// end to end against a freshly built cmd/broker, so the tool cannot rot
// silently: the publisher is acked in both modes, and in storm mode the
// guessers are answered, throttled ones included.
func TestSmoke(t *testing.T) {
	p := params{Rounds: 1, Duration: time.Second, Warmup: 500 * time.Millisecond, Guessers: 4, Sources: 2,
		Usernames: "target", Rate: 200, Size: 64, BrokerPkg: "./cmd/broker"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := run(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	ms := rep.(*report).Measurements
	if len(ms) != 2 || ms[0].Mode != modeCalm || ms[1].Mode != modeStorm {
		t.Fatalf("measurements %+v, want calm then storm", ms)
	}
	for _, m := range ms {
		if m.Acked == 0 || m.P50us <= 0 || m.P99us < m.P50us {
			t.Errorf("%s: publisher %d acked, p50 %vus p99 %vus", m.Mode, m.Acked, m.P50us, m.P99us)
		}
	}
	storm := ms[1]
	if storm.Guesses == 0 || storm.Answers["connack 3"] == 0 && storm.Answers["connack 5"] == 0 {
		t.Errorf("storm: %d guesses, answers %v", storm.Guesses, storm.Answers)
	}
}
