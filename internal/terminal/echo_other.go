//go:build !linux

package terminal

import "os"

func echoOff(*os.File) (func(), error) { return nil, ErrNoEcho }
