package outbox

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestAnOutboxOpenElsewhereIsNamed: pebble's lock error, when another
// process has the outbox open, is a bare "resource temporarily
// unavailable"; the outbox says whose it is. The other process is this
// test binary, run again as the holder.
func TestAnOutboxOpenElsewhereIsNamed(t *testing.T) {
	if dir := os.Getenv("OUTBOX_TEST_HOLD"); dir != "" {
		o, err := Open(dir, 0, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("holding\n")
		_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
		_ = o.Close()
		return
	}
	dir := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^TestAnOutboxOpenElsewhereIsNamed$")
	holder.Env = append(os.Environ(), "OUTBOX_TEST_HOLD="+dir)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = holder.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "holding\n" {
		t.Fatalf("the holder said %q: %v", line, err)
	}
	_, err = Open(dir, 0, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "outbox "+dir+" is open in another process (a bridge on the same data_dir?)") {
		t.Fatalf("Open: %v", err)
	}
}
