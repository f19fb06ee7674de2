package testkit

import (
	"fmt"
	"testing"
	"time"
)

// Eventually polls cond until it returns true, and fails the test if it has
// not by WaitTimeout. It is the one way tests wait for a condition: never a fixed
// sleep, never a loop without a deadline. what describes the condition for
// the failure message, with fmt.Sprintf arguments.
func Eventually(t testing.TB, cond func() bool, what string, args ...any) {
	t.Helper()
	EventuallyWithin(t, WaitTimeout, cond, what, args...)
}

// WaitTimeout bounds Eventually. A condition that holds in milliseconds on a
// quiet machine may take seconds on a busy 2-core one; a passing test never
// waits for the bound, so it is generous.
const WaitTimeout = 30 * time.Second

// EventuallyWithin is Eventually with its own deadline, for conditions that
// take longer than Timeout by design (an outbox draining a large backlog).
func EventuallyWithin(t testing.TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, fmt.Sprintf(what, args...))
		}
		time.Sleep(pause) // between polls; the deadline, not the pause, bounds the wait
		if pause < 50*time.Millisecond {
			pause *= 2
		}
	}
}
