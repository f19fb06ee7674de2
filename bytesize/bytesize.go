// Package bytesize is a byte count that reads and prints as "32MiB" in config files.
package bytesize

import (
	"fmt"
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

// Parse reads "1024", "512KiB", "32MiB", "1.5GB" (binary K/M/G without "i" are
// taken as binary too, as most tools do).
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
	if err != nil || f < 0 || t == "" {
		return 0, fmt.Errorf("%q is not a size; write e.g. 1048576, 512KiB or 32MiB", s)
	}
	n := f * float64(mult)
	if n > float64(1<<62) {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return Size(n), nil
}

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
