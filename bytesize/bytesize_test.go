package bytesize

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		ok   bool
	}{
		{"1024", 1024, true},
		{"32MiB", 32 << 20, true},
		{"32M", 32 << 20, true},
		{"512KiB", 512 << 10, true},
		{"10MB", 10_000_000, true},
		{"1.5GiB", 3 << 29, true},
		{" 2 MiB ", 2 << 20, true},
		{"0", 0, true},
		{"-0", 0, true},
		{"4294967296GiB", 1 << 62, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"-1KiB", 0, false},
		{"lots", 0, false},
		{"1e30", 0, false},
		{"1e400", 0, false},
		{"-1e400", 0, false},
		{"4294967297GiB", 0, false},
		{"NaN", 0, false},
		{"nan", 0, false},
		{"NaNMiB", 0, false},
		{"Inf", 0, false},
		{"+Inf", 0, false},
		{"-Inf", 0, false},
		{"infinity", 0, false},
		{"InfKiB", 0, false},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tt.in) {
			t.Errorf("Parse(%q): the error %q does not quote the input", tt.in, err)
		}
	}
	if s := (32 * MiB).String(); s != "32MiB" {
		t.Errorf("String = %s", s)
	}
	if s := Size(1000).String(); s != "1000B" {
		t.Errorf("String = %s", s)
	}
}

// FuzzParse checks that whatever Parse accepts is a size from 0 to 4EiB that
// prints as something Parse reads back to the same size.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1024", "32MiB", "1.5GiB", "NaN", "Inf", "-1", "1e400", "0x10", "1_0", " 2 MiB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s)
		if err != nil {
			if got != 0 {
				t.Fatalf("Parse(%q) = %d with the error %v", s, got, err)
			}
			return
		}
		if got < 0 || got > maxSize {
			t.Fatalf("Parse(%q) = %d, outside 0..%d", s, got, Size(maxSize))
		}
		back, err := Parse(got.String())
		if err != nil || back != got {
			t.Fatalf("Parse(%q) = %d, printed %q, read back as %d, %v", s, got, got.String(), back, err)
		}
	})
}
