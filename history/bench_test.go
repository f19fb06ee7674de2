package history

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRecordAndWrite records messages of 512 bytes with their headers,
// as the broker's hook does, in chunks the queue holds, and waits for the
// writer to store each chunk: per message, what the history costs in all.
func BenchmarkRecordAndWrite(b *testing.B) {
	h, _ := open(b, DefaultConfig())
	payload := make([]byte, 512)
	const chunk = 1024
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i += chunk {
		n := min(chunk, b.N-i)
		h.mu.Lock()
		target := h.accepted + uint64(n)
		h.mu.Unlock()
		for j := range n {
			h.RecordFields("bench/history/1", payload, strconv.Itoa(i+j), "bench", "2026-11-28T05:00:00Z")
		}
		if err := h.caughtUp(context.Background(), target); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used: on a shared machine,
// steadier than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
