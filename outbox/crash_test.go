package outbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
)

// crashChildEnv names the outbox directory a re-run of this test binary
// works on as the crashing child of TestRemovedStaysRemovedAfterKill9.
const crashChildEnv = "FIREHOSE_OUTBOX_CRASH_CHILD"

// crashBatch is how many messages the child stores, and crashRemoved how
// many of them it delivers (removes) before it is killed.
const (
	crashBatch   = 200
	crashRemoved = 150
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return // not reached: the child kills itself
	}
	os.Exit(m.Run())
}

// crashChild stores crashBatch messages, removes the first crashRemoved
// one at a time, as the router's replayer does after each confirmed
// publish, and kills itself with SIGKILL the moment the last Remove
// returns: what was in the process's memory and not in the kernel's is lost,
// as in a crash or the OOM killer.
func crashChild(dir string) {
	o, err := Open(dir, 0, zerolog.Nop())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	batch := make([]bus.Message, crashBatch)
	for i := range batch {
		batch[i] = msg(i)
	}
	if err := o.Append(batch, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for range crashRemoved {
		head, err := o.Peek(1)
		if err == nil && len(head) == 1 {
			err = o.Remove(head)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestRemovedStaysRemovedAfterKill9 delivers messages from an outbox in a
// child process that is killed with SIGKILL right after its last Remove
// returned, several times over: a message Remove said was gone must never
// be there after the restart, or the replayer would deliver it again.
func TestRemovedStaysRemovedAfterKill9(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for run := range 5 {
		dir := t.TempDir()
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("run %d: the child did not die of SIGKILL: %v\n%s", run, err, out)
		}
		o := open(t, dir, 0)
		left, err := o.Peek(crashBatch)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != crashBatch-crashRemoved || o.Len() != len(left) {
			t.Fatalf("run %d: %d messages after the restart (Len %d), want %d: removed messages would be replayed",
				run, len(left), o.Len(), crashBatch-crashRemoved)
		}
		if first := left[0].Msg.Topic; first != msg(crashRemoved).Topic {
			t.Fatalf("run %d: the head after the restart is %s, want %s", run, first, msg(crashRemoved).Topic)
		}
		_ = o.Close()
	}
}
