package ellipsis

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"short", 5, "short"},
		{"toolong", 6, "too…"},
		{"ééé", 6, "ééé"},   // 6 bytes: fits
		{"éééé", 6, "é…"},   // "é" is 2 bytes, "…" 3: 2+3 ≤ 6, a second "é" would not fit
		{"aéééé", 7, "aé…"}, // the cut falls inside an "é" and moves back
		{"abcdef", 3, "…"},  // room for the mark alone
		{"日本語の文", 9, "日本…"}, // 3-byte runes
	} {
		got := Cut(c.s, c.n)
		if got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if len(got) > max(c.n, len(c.s)) || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q: longer than %d bytes or not UTF-8", c.s, c.n, got, c.n)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("aéééé", 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < len("…") || n > 1<<20 {
			return
		}
		got := Cut(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("Cut(%q, %d) = %q, want s unchanged", s, n, got)
			}
			return
		}
		if len(got) > n || !strings.HasSuffix(got, "…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
			t.Fatalf("Cut(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cut(%q, %d) = %q is not valid UTF-8", s, n, got)
		}
	})
}
