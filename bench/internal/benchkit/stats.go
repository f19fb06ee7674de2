package benchkit

import (
	"math"
	"math/bits"
	"sort"
	"time"
)

// Histogram is a small log-linear (HDR-like) latency histogram over
// nanoseconds: values below 64 are exact, above that every power-of-two
// range is split into 32 sub-buckets, so any reported quantile is within
// ~3% of the true value. Memory is fixed (2 Ki buckets, 16 KiB) no matter
// how many samples are recorded. The zero value is empty and ready; it is
// not safe for concurrent use.
type Histogram struct {
	counts [64 * 32]uint64
	n      uint64
	max    int64
}

const histSubBits = 6 // 2^6 = 64 linear buckets, then 32 per octave

func histIndex(v uint64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits // >= 1
	return e<<(histSubBits-1) + int(v>>uint(e))
}

// histValue returns the midpoint of bucket i.
func histValue(i int) int64 {
	if i < 1<<histSubBits {
		return int64(i)
	}
	e := i>>(histSubBits-1) - 1
	m := uint64(i&(1<<(histSubBits-1)-1)) + 1<<(histSubBits-1)
	lo := m << uint(e)
	hi := (m+1)<<uint(e) - 1
	return int64(lo + (hi-lo)/2)
}

// Record adds one sample, in nanoseconds.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0 // clock skew cannot happen on one host, but be safe
	}
	h.counts[histIndex(uint64(v))]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest sample, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the value at quantile q (0..1), or 0 without samples.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			v := histValue(i)
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

// Bitset is a growable set of sequence numbers. The zero value is empty;
// it is not safe for concurrent use.
type Bitset struct {
	w []uint64
}

// TestAndSet sets bit i and reports whether it was already set.
func (b *Bitset) TestAndSet(i uint64) bool {
	wi := int(i >> 6)
	if wi >= len(b.w) {
		n := 2 * len(b.w)
		if n < wi+1 {
			n = wi + 1
		}
		if n < 1024 {
			n = 1024
		}
		nw := make([]uint64, n)
		copy(nw, b.w)
		b.w = nw
	}
	m := uint64(1) << (i & 63)
	old := b.w[wi]&m != 0
	b.w[wi] |= m
	return old
}

// Set sets bit i.
func (b *Bitset) Set(i uint64) { b.TestAndSet(i) }

// CountMissing counts bits set in want but not in b.
func (b *Bitset) CountMissing(want *Bitset) int64 {
	var n int64
	for i, w := range want.w {
		var have uint64
		if i < len(b.w) {
			have = b.w[i]
		}
		n += int64(bits.OnesCount64(w &^ have))
	}
	return n
}

// CountMissingPrefix counts the numbers in [0, n) not in b.
func (b *Bitset) CountMissingPrefix(n uint64) int64 {
	var have int64
	full := int(n >> 6)
	for i := 0; i < full && i < len(b.w); i++ {
		have += int64(bits.OnesCount64(b.w[i]))
	}
	if rem := n & 63; rem != 0 && full < len(b.w) {
		have += int64(bits.OnesCount64(b.w[full] & (1<<rem - 1)))
	}
	return int64(n) - have
}

// Median is the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
