package main

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestSmoke runs a tiny benchmark (one round of each mode) so the tool
// cannot rot silently.
func TestSmoke(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { smoke(t, false) })
	t.Run("processes", func(t *testing.T) { smoke(t, true) })
}

func smoke(t *testing.T, processes bool) {
	p := defaultParams()
	p.Rounds, p.Posts, p.Senders, p.Msgs, p.Pubs, p.Processes = 1, 40, 2, 200, 2, processes
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := run(ctx, p, &progress)
	t.Logf("%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Intake["on"]) != 1 || len(rep.Broker["off"]) != 1 || rep.Stored != rep.Offered || rep.Lost != 0 || len(rep.GC["on"]) != 1 {
		t.Fatalf("report %+v", rep)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	where := "both in this process"
	if processes {
		where = "each a process of its own"
	}
	for _, want := range []string{"on/off", "intake (HTTP", "broker (MQTT QoS 1", "history kept 440 of the 440", "GC cycles per measurement", where} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
