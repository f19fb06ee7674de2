package topics

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		topic, prefix string
		want          []string
		err           error
	}{
		{"chef/acme/web%2F01/status", "chef", []string{"acme", "web/01", "status"}, nil},
		{"dc1/chef/acme/_/status", "dc1/chef", []string{"acme", "", "status"}, nil},
		{"chef/acme/%5F/status", "chef", []string{"acme", "_", "status"}, nil},
		{"gerrit/a/b", "", []string{"gerrit", "a", "b"}, nil},
		{"chef/acme/50%/x", "chef", []string{"acme", "50%", "x"}, ErrBadEscape},
		{"chefx/acme", "chef", nil, ErrOtherPrefix},
		{"chef", "chef", nil, ErrOtherPrefix},
		{"chef/", "chef", []string{""}, nil},
	} {
		got, err := Parse(tt.topic, tt.prefix)
		if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("Parse(%q, %q) error %v, want %v", tt.topic, tt.prefix, err, tt.err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Parse(%q, %q) = %q, want %q", tt.topic, tt.prefix, got, tt.want)
		}
	}
}

// FuzzParse: whatever the levels, a topic a builder would make from them
// (each escaped) parses back to them; and any topic at all parses without
// panicking, into as many levels as it has after the prefix.
func FuzzParse(f *testing.F) {
	f.Add("acme", "web/01", "")
	f.Add("%", "_", "#+")
	f.Add("", "\x00", "\xff")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		levels := []string{a, b, c}
		escaped := make([]string, len(levels))
		for i, l := range levels {
			escaped[i] = Escape(l)
		}
		got, err := Parse("pre/fix/"+strings.Join(escaped, "/"), "pre/fix")
		if err != nil || !slices.Equal(got, levels) {
			t.Fatalf("Parse of %q = %q, %v; want %q", escaped, got, err, levels)
		}
		raw := a + "/" + b
		got, err = Parse(raw, c)
		if errors.Is(err, ErrOtherPrefix) {
			if got != nil || (c != "" && strings.HasPrefix(raw, c+"/")) {
				t.Fatalf("Parse(%q, %q) = %q, %v", raw, c, got, err)
			}
			return
		}
		rest := raw
		if c != "" {
			rest = strings.TrimPrefix(raw, c+"/")
		}
		if len(got) != strings.Count(rest, "/")+1 {
			t.Fatalf("Parse(%q, %q) = %q: %d levels", raw, c, got, len(got))
		}
	})
}
