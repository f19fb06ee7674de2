package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestSmoke runs a tiny benchmark (3 tasks × 2 hosts, one run each; one
// one-second intake and bus measurement) so the tool cannot rot silently.
func TestSmoke(t *testing.T) {
	testkit.RequireCommand(t, "ansible-playbook")
	p := defaultParams()
	p.Playbook.Tasks, p.Playbook.Hosts, p.Playbook.Rounds = 3, 2, 1
	p.Intake.Rounds, p.Intake.Duration, p.Intake.Senders = 1, time.Second, 2
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := run(ctx, p, &out)
	t.Logf("%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Playbook == nil || len(rep.Playbook.With) != 1 || len(rep.Playbook.Without) != 1 || rep.Playbook.Events != 3*2+2+2 {
		t.Fatalf("playbook result %+v", rep.Playbook)
	}
	if rep.Intake == nil || len(rep.Intake.Intake) != 1 || len(rep.Intake.Bus) != 1 ||
		rep.Intake.Intake[0].Events == 0 || rep.Intake.Bus[0].Events == 0 {
		t.Fatalf("intake result %+v", rep.Intake)
	}
	for _, want := range []string{"ratio of medians", "median intake", "intake/bus"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
}
