package bytesize

import "testing"

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
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"lots", 0, false},
		{"1e30", 0, false},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	if s := (32 * MiB).String(); s != "32MiB" {
		t.Errorf("String = %s", s)
	}
	if s := Size(1000).String(); s != "1000B" {
		t.Errorf("String = %s", s)
	}
}
