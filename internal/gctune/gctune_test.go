package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

func TestPercent(t *testing.T) {
	c := Config{MaxPercent: 400, MinPercent: 100, Headroom: 64 << 20}
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 400}, {1 << 20, 400}, {16 << 20, 400}, {32 << 20, 200}, {64 << 20, 100}, {1 << 30, 100},
	} {
		if got := c.Percent(tc.live); got != tc.want {
			t.Errorf("Percent(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestFollowsTheLiveHeap: after a collection with a large live heap, the
// percentage is the one for it; after the heap is freed, it goes back up.
func TestFollowsTheLiveHeap(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	c := Config{MaxPercent: 400, MinPercent: 100, Headroom: 8 << 20}
	stop := Start(c)
	defer stop()
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	current := func() int { metrics.Read(sample); return int(sample[0].Value.Uint64()) }
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	testkit.Eventually(t, func() bool { runtime.GC(); return current() == 100 }, "the percentage falls to 100 with 64 MiB live (it is %d)", current())
	runtime.KeepAlive(held)
	held = nil
	testkit.Eventually(t, func() bool { runtime.GC(); return current() == 400 }, "the percentage rises to 400 once the heap is freed (it is %d)", current())
}
