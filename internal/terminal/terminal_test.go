package terminal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// openPTY opens a pseudo-terminal: the controlling side, which plays the
// person at the keyboard, and the terminal a command reads.
func openPTY(t *testing.T) (person, tty *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	person = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { person.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return person, tty
}

func TestDevNullIsNoTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if Is(null) {
		t.Error("/dev/null counts as a terminal")
	}
	_, tty := openPTY(t)
	if !Is(tty) {
		t.Error("a pseudo-terminal does not count as one")
	}
}

// TestReadSecretDoesNotEcho types a password at a pseudo-terminal: it is
// read, the terminal shows nothing of it, and the echo is on again after.
func TestReadSecretDoesNotEcho(t *testing.T) {
	person, tty := openPTY(t)
	type read struct {
		s   string
		err error
	}
	done := make(chan read, 1)
	go func() {
		s, err := ReadSecret(context.Background(), tty)
		done <- read{s, err}
	}()
	// The person types once the echo is off, as at a prompt: what the line
	// discipline gets while the echo is on, it echoes at once.
	testkit.Eventually(t, func() bool {
		st, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		return err == nil && st.Lflag&unix.ECHO == 0
	}, "ReadSecret turns the echo off")
	if _, err := person.WriteString("s3cret\n"); err != nil {
		t.Fatal(err)
	}
	r := testkit.Next(t, done)
	if r.err != nil || r.s != "s3cret" {
		t.Fatalf("ReadSecret = %q, %v", r.s, r.err)
	}
	// Whatever the terminal showed came before this marker.
	if _, err := tty.WriteString("END\n"); err != nil {
		t.Fatal(err)
	}
	shown, err := bufio.NewReader(person).ReadString('D')
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(shown, "s3cret") {
		t.Fatalf("the terminal echoed the password: %q", shown)
	}
	st, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lflag&unix.ECHO == 0 {
		t.Fatal("the echo stayed off")
	}
}

// TestReadSecretTurnsTheEchoBackOnWhenCancelled: Ctrl-C while the password
// is typed leaves a terminal that echoes.
func TestReadSecretTurnsTheEchoBackOnWhenCancelled(t *testing.T) {
	_, tty := openPTY(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadSecret(ctx, tty); err == nil {
		t.Fatal("no error for a cancelled read")
	}
	st, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lflag&unix.ECHO == 0 {
		t.Fatal("the echo stayed off")
	}
}
