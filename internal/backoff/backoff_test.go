package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNextDoublesUpToMaxAndResetStartsOver(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 500 * time.Millisecond}
	want := []time.Duration{100, 200, 400, 500, 500}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Fatalf("wait after Reset = %s, want 100ms", got)
	}
}

func TestNextWithMaxEqualToMinStaysAtMin(t *testing.T) {
	b := Backoff{Min: time.Second, Max: time.Second}
	for i := 0; i < 3; i++ {
		if got := b.Next(); got != time.Second {
			t.Fatalf("wait %d = %s, want 1s", i+1, got)
		}
	}
}

// A cancelled context ends the wait at once, however long the wait: the
// test would hang for an hour otherwise.
func TestWaitEndsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{Min: time.Hour, Max: time.Hour}
	if b.Wait(ctx) {
		t.Fatal("Wait on an ended context reported a full wait")
	}
	if Sleep(ctx, 0) {
		t.Fatal("Sleep(0) on an ended context reported a full wait")
	}
}

func TestSleepReportsAFullWait(t *testing.T) {
	if !Sleep(context.Background(), time.Nanosecond) {
		t.Fatal("Sleep on a live context did not report a full wait")
	}
}
