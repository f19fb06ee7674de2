package terminal

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// Is reports whether w is a terminal. A character device is not enough:
// /dev/null is one, and output sent there wants no prompt or table.
func Is(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// ErrNoEcho is returned by ReadSecret where the terminal's echo cannot be
// turned off (not Linux).
var ErrNoEcho = errors.New("cannot turn the terminal's echo off here; pipe the secret in instead")

// ReadSecret reads one line from the terminal f with its echo off, and
// turns the echo back on before it returns, also when ctx ends first
// (Ctrl-C, which the command line turns into a cancelled context). The
// line comes without its line ending.
func ReadSecret(ctx context.Context, f *os.File) (string, error) {
	restore, err := echoOff(f)
	if err != nil {
		return "", err
	}
	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(f).ReadString('\n')
		if errors.Is(err, io.EOF) && line != "" {
			err = nil
		}
		done <- result{strings.TrimRight(line, "\r\n"), err}
	}()
	select {
	case r := <-done:
		restore()
		return r.line, r.err
	case <-ctx.Done():
		restore()
		return "", ctx.Err()
	}
}
