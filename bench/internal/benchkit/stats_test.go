package benchkit

import (
	"os"
	"testing"
	"time"
)

func TestHistogram(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 100000; v++ {
		h.Record(v * 1000) // 1µs .. 100ms
	}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 50e6}, {0.99, 99e6}, {0.01, 1e6}} {
		got := float64(h.Quantile(c.q))
		if got < c.want*0.97 || got > c.want*1.03 {
			t.Errorf("Quantile(%v) = %v, want ~%v", c.q, got, c.want)
		}
	}
	if h.Count() != 100000 || h.Max() != 100*time.Millisecond {
		t.Errorf("Count %d, Max %v", h.Count(), h.Max())
	}
	for i := 0; i <= histIndex(1<<62); i++ {
		if v := histValue(i); histIndex(uint64(v)) != i {
			t.Fatalf("bucket %d: midpoint %d maps to bucket %d", i, v, histIndex(uint64(v)))
		}
	}
	var empty, merged Histogram
	if empty.Quantile(0.5) != 0 {
		t.Error("an empty histogram has a median")
	}
	merged.Merge(&h)
	merged.Merge(&empty)
	if merged.Quantile(0.5) != h.Quantile(0.5) || merged.Count() != h.Count() {
		t.Error("Merge")
	}
}

func TestBitsetLoss(t *testing.T) {
	var got, want Bitset
	for i := uint64(0); i < 1000; i++ {
		want.Set(i)
		if i%10 != 0 {
			got.Set(i)
		}
	}
	if n := got.CountMissing(&want); n != 100 {
		t.Errorf("CountMissing = %d, want 100", n)
	}
	if n := got.CountMissingPrefix(1000); n != 100 {
		t.Errorf("CountMissingPrefix = %d, want 100", n)
	}
	if n := got.CountMissingPrefix(5); n != 1 {
		t.Errorf("CountMissingPrefix(5) = %d, want 1", n)
	}
	if !got.TestAndSet(1) || got.TestAndSet(10) {
		t.Error("TestAndSet")
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2}
	if Median(xs) != 2 || Median([]float64{4, 1, 2, 3}) != 2.5 || Median(nil) != 0 {
		t.Error("Median")
	}
	if xs[0] != 3 {
		t.Error("Median sorted its argument")
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{FormatDuration(0), "-"},
		{FormatDuration(1500 * time.Nanosecond), "2µs"},
		{FormatDuration(2500 * time.Microsecond), "2.50ms"},
		{FormatDuration(3 * time.Second), "3.00s"},
		{FormatPercent(-1), "n/a"},
		{FormatPercent(42.4), "42%"},
		{FormatMicros(-1), "n/a"},
		{FormatMicros(3.14), "3.1"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestProcRSS(t *testing.T) {
	rss, ok := ProcRSS(os.Getpid())
	if !ok || rss < 1<<20 {
		t.Errorf("ProcRSS of this test = %d, %v; want at least 1 MiB", rss, ok)
	}
	if _, ok := ProcRSS(0); ok {
		t.Error("ProcRSS(0) reported a size")
	}
}
