// Package bytesize is a byte count that reads and prints as "32MiB" in config files.
package bytesize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes.
type Size int64

// Units.
const (
	B   Size = 1
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	KB  Size = 1000
	MB  Size = 1000 * KB
	GB  Size = 1000 * MB
)

var units = []struct {
	suffix string
	size   Size
}{
	{"KiB", KiB}, {"MiB", MiB}, {"GiB", GiB},
	{"KB", KB}, {"MB", MB}, {"GB", GB},
	{"K", KiB}, {"M", MiB}, {"G", GiB},
	{"B", B},
}

// maxSize is the largest size Parse returns: far beyond any body or buffer,
// and exactly representable as a float64, so the comparison below is exact.
const maxSize = 1 << 62

// Parse reads "1024", "512KiB", "32MiB", "1.5GB" (binary K/M/G without "i" are
// taken as binary too, as most tools do). Fractions of a byte are dropped.
// NaN, infinities, negative sizes and sizes above 4EiB are errors:
// strconv.ParseFloat reads "NaN" and "Inf", and a float64 converted to int64
// out of range gives a meaningless value rather than an error.
func Parse(s string) (Size, error) {
	t := strings.TrimSpace(s)
	mult := B
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.size
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if t == "" || math.IsNaN(f) || (err != nil && !isRange(err)) {
		return 0, fmt.Errorf("%q is not a size; write e.g. 1048576, 512KiB or 32MiB", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q is negative; a size is 0 or more, e.g. 512KiB", s)
	}
	n := f * float64(mult)
	if err != nil || n > maxSize { // +Inf and out-of-range floats land here too
		return 0, fmt.Errorf("%q is too large; the largest size is %s", s, Size(maxSize))
	}
	return Size(n), nil
}

// isRange reports a well-formed number too large for a float64 (ParseFloat
// then returns ±Inf).
func isRange(err error) bool { return errors.Is(err, strconv.ErrRange) }

// UnmarshalText lets config files say max_body: 32MiB.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// String prints the size with the largest binary unit that divides it.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		size   Size
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if s != 0 && s%u.size == 0 {
			return strconv.FormatInt(int64(s/u.size), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}
