// Package datadir is the bridge's hold on its data directory: one lock,
// taken first thing at start, so that a second bridge on the same directory
// stops at once with one error saying what to do, before it opens any store
// in it (outboxes, ConfigDB's SQLite file, the Chef rollout store, retained
// state), each of which would otherwise fail on its own lock with a bare
// "resource temporarily unavailable".
//
// It must not know which stores live in the directory.
package datadir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in the data directory whose flock the running bridge holds.
const LockFile = "bridge.lock"

// ErrInUse is the error Acquire returns, wrapped, when another process holds the directory.
var ErrInUse = errors.New("another bridge uses the data directory")

// Lock is a held data directory. Close releases it.
type Lock struct {
	dir string
	f   *os.File
}

// Acquire makes dir when missing and locks it for this process, writing
// the process id into the lock file for the next one to name. When another
// process holds it, the error wraps ErrInUse and names the directory, that
// process's id when known, and the settings that choose another directory.
// The lock is an flock: the kernel releases it when the process ends, even
// by kill -9.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("data directory %s: %w (set data_dir or FIREHOSE_DATA_DIR to another)", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w (set data_dir or FIREHOSE_DATA_DIR to another)", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		_ = f.Close()
		if !InUse(err) {
			return nil, fmt.Errorf("data directory %s: lock %s: %w", dir, path, err)
		}
		return nil, fmt.Errorf("%w %s%s; set data_dir or FIREHOSE_DATA_DIR to give this bridge its own", ErrInUse, dir, holder)
	}
	// The pid is for the message above only: a stale one is harmless, since
	// the flock, not the file's content, says whether the directory is held.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{dir: dir, f: f}, nil
}

// InUse reports whether err is a lock held by another process (flock's
// EWOULDBLOCK), as pebble returns when a second process opens a store
// directory. Stores wrap such an error to say which store it is.
func InUse(err error) bool { return errors.Is(err, syscall.EWOULDBLOCK) }

// Dir is the directory held.
func (l *Lock) Dir() string { return l.dir }

// Start does nothing: the directory is held from Acquire. It makes a Lock a
// part of the bridge's lifecycle, released last.
func (l *Lock) Start(context.Context) error { return nil }

// Close releases the directory. It is idempotent.
func (l *Lock) Close(context.Context) error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // releases the flock
	l.f = nil
	return err
}
