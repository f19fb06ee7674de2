package terminal

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// echoOff turns off f's echo and returns what turns it back on.
func echoOff(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("read the terminal's settings: %w", err)
	}
	quiet := *saved
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return nil, fmt.Errorf("turn the terminal's echo off: %w", err)
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, saved) }, nil
}
