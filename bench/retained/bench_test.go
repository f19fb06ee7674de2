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

// TestSmoke runs a tiny benchmark end to end (300 nodes, a few converges)
// against mosquitto and the bridge, so that the tool cannot rot silently.
// It checks what holds whatever the brokers' retained stores do: every
// row is there, every PUBACK came, a QoS 0 late subscriber of a running
// broker gets the whole fleet, and mosquitto keeps its fleet over a clean
// restart.
func TestSmoke(t *testing.T) {
	p := defaultParams()
	p.MosqBin = testkit.RequireCommand(t, "mosquitto")
	p.MosqPasswd = testkit.RequireCommand(t, "mosquitto_passwd")
	p.Nodes = 300
	p.Idle = 200 * time.Millisecond
	p.Stall = 2 * time.Second
	p.ConvergeNodes, p.Converges, p.ConvergeRounds, p.Clients = 3, 6, 1, 2
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := run(ctx, p, &progress)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.PayloadBytes < 100 || len(rep.Results) != 2 || rep.ConvergeEmpty == nil {
		t.Fatalf("payload %d bytes, %d results, converges without a fleet %v", rep.PayloadBytes, len(rep.Results), rep.ConvergeEmpty)
	}
	for _, r := range rep.Results {
		if r.Publish.Acked != int64(p.Nodes) || r.Publish.rate() <= 0 {
			t.Errorf("%s: %d of %d PUBACKed in %v", r.Name, r.Publish.Acked, p.Nodes, r.Publish.Elapsed)
		}
		if r.LateQoS0.Got != int64(p.Nodes) || r.LateQoS0.Took <= 0 {
			t.Errorf("%s: a late QoS 0 subscriber got %d of %d in %v", r.Name, r.LateQoS0.Got, p.Nodes, r.LateQoS0.Took)
		}
		if len(r.TwoLate) != 2 || r.TwoLate[1].Got != int64(p.Nodes) {
			t.Errorf("%s: two late subscribers: %+v", r.Name, r.TwoLate)
		}
		if r.Kill.Expected != int64(p.Nodes) {
			t.Errorf("%s: %d PUBACKed before the kill, want %d", r.Name, r.Kill.Expected, p.Nodes)
		}
		if r.RSSFleet <= 0 || r.IdleCPU < 0 {
			t.Errorf("%s: RSS %d, idle CPU %v", r.Name, r.RSSFleet, r.IdleCPU)
		}
		switch r.Name {
		case nameMosquitto:
			if r.Restart.Got != int64(p.Nodes) {
				t.Errorf("mosquitto with persistence kept %d of %d statuses over a clean restart", r.Restart.Got, p.Nodes)
			}
		case nameOurs:
			if r.FleetView != int64(p.Nodes) {
				t.Errorf("the dashboard's Fleet view shows %d of %d nodes", r.FleetView, p.Nodes)
			}
			// The kernel counts CPU in clock ticks (10 ms here), and six
			// small converges can take less than one: a round may read 0.
			// What must hold is that every round was measured.
			if r.ConvergeFleet == nil || len(r.ConvergeFleet.Rounds) != p.ConvergeRounds || r.ConvergeFleet.Median < 0 ||
				len(rep.ConvergeEmpty.Rounds) != p.ConvergeRounds || rep.ConvergeEmpty.Median < 0 {
				t.Errorf("CPU per converge not measured in %d rounds: fleet %v, empty %v", p.ConvergeRounds, r.ConvergeFleet, rep.ConvergeEmpty)
			}
		}
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"retained publish rate", "RSS per retained node", "idle CPU", "late subscriber, QoS 0: got",
		"late subscriber, QoS 1 (acking): got", "RSS added by two late subscribers", "after a clean restart", "after kill -9", "nodes in the Fleet view",
		"Chef CPU per converge, 300 nodes held / none", "300 of 300"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := benchkit.WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
}

func TestNodeNames(t *testing.T) {
	for _, i := range []int{0, 7, 100_000, maxNodes} {
		got, ok := nodeIndex([]byte(statusTopic("chef", i)))
		if !ok || got != i {
			t.Errorf("nodeIndex(statusTopic(%d)) = %d, %v", i, got, ok)
		}
		if len(nodeName(i)) != len("chefdk-ubuntu-16.04-tester-91bc78") {
			t.Errorf("nodeName(%d) = %q: not the fixture's length", i, nodeName(i))
		}
	}
	for _, topic := range []string{"chef/chef/chefdk-ubuntu-16.04-tester-91bc78/status", "chef/x/" + nodeName(1) + "/liveness", "status", ""} {
		if _, ok := nodeIndex([]byte(topic)); ok {
			t.Errorf("nodeIndex(%q) took it for a fleet node", topic)
		}
	}
	if id := otherRunID("b3bbae70-1e93-4ffe-8499-9559601631fa", 9); len(id) != 36 || id == "b3bbae70-1e93-4ffe-8499-9559601631fa" {
		t.Errorf("otherRunID = %q", id)
	}
	if count(100000) != "100,000" || count(999) != "999" || count(-1234) != "-1,234" {
		t.Errorf("count: %s %s %s", count(100000), count(999), count(-1234))
	}
}
