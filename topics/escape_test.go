package topics

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty becomes missing", "", "_"},
		{"lone underscore is kept apart from missing", "_", "%5F"},
		{"underscore inside a level is plain", "my_node", "my_node"},
		{"double underscore is plain", "__", "__"},
		{"plain hostname", "web01.example.com", "web01.example.com"},
		{"separator and wildcards", "web/01+x#", "web%2F01%2Bx%23"},
		{"percent", "100%", "100%25"},
		{"already escaped text is escaped again", "%5F", "%255F"},
		{"nul", "a\x00b", "a%00b"},
		{"del", "\x7f", "%7F"},
		{"invalid utf-8", "\xff", "%FF"},
		{"nul, del and invalid utf-8 together", "a\x00b\x7f\xff", "a%00b%7F%FF"},
		{"truncated utf-8", "x\xc3", "x%C3"},
		{"utf-16 surrogate is not utf-8", "\xed\xa0\x80", "%ED%A0%80"},
		{"tab and newline", "a\tb\nc", "a%09b%0Ac"},
		{"escape and unit separator", "\x1b\x1f", "%1B%1F"},
		{"c1 control next line", "a\u0085b", "a%C2%85b"},
		{"c1 range ends", "\u0080\u009f", "%C2%80%C2%9F"},
		{"no-break space is not c1", "a\u00a0b", "a\u00a0b"},
		{"spaces and nats specials pass", "a b.c$*>", "a b.c$*>"},
		{"dollar first", "$SYS", "$SYS"},
		{"unicode passes", "nœud-日本-🚀", "nœud-日本-🚀"},
		{"replacement character itself is valid", "\ufffd", "\ufffd"},
		{"lone wildcard levels", "+", "%2B"},
		{"lone hash", "#", "%23"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Escape(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, len(tt.want), escapedLen(tt.in), "escapedLen")
			var b strings.Builder
			writeEscaped(&b, tt.in)
			assert.Equal(t, tt.want, b.String(), "writeEscaped")
			back, err := Unescape(got)
			require.NoError(t, err)
			assert.Equal(t, tt.in, back)
		})
	}
}

func TestUnescape(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"_", ""},
		{"", ""},
		{"%5F", "_"},
		{"%5f", "_"},
		{"a%2fb", "a/b"},
		{"a%2Fb", "a/b"},
		{"my_node", "my_node"},
		{"%25%2B%23", "%+#"},
		{"%FF", "\xff"},
		{"%41", "A"},
	}
	for _, tt := range tests {
		got, err := Unescape(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestUnescapeErrors(t *testing.T) {
	tests := []struct {
		in, msg string
	}{
		{"%", "bad percent escape: '%' at byte 0 is not followed by two hex digits"},
		{"a%4", "bad percent escape: '%' at byte 1 is not followed by two hex digits"},
		{"%zz", "bad percent escape: '%' at byte 0 is not followed by two hex digits"},
		{"ab%2", "bad percent escape: '%' at byte 2 is not followed by two hex digits"},
		{"%4g", "bad percent escape: '%' at byte 0 is not followed by two hex digits"},
		{"%41%", "bad percent escape: '%' at byte 3 is not followed by two hex digits"},
	}
	for _, tt := range tests {
		got, err := Unescape(tt.in)
		require.ErrorIs(t, err, ErrBadEscape, tt.in)
		assert.EqualError(t, err, tt.msg)
		assert.Empty(t, got)
	}
}

func TestEscapeFastPathDoesNotAllocate(t *testing.T) {
	for _, s := range []string{"web01.example.com", "nœud-日本", "my_node", "a b"} {
		var out string
		allocs := testing.AllocsPerRun(100, func() { out = Escape(s) })
		assert.Zero(t, allocs, s)
		assert.Equal(t, s, out)
	}
}

func FuzzEscapeRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", "_", "__", "my_node", "web/01+x#", "a\x00b\x7f\xff", "%", "%5F", "%zz",
		"\u0085", "\xc2", "\xed\xa0\x80", "\ufffd", "a b.c$*>", "日本", "/", "+", "#",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if err := ValidName(e); err != nil && len(e) <= MaxTopicBytes {
			t.Fatalf("Escape(%q) = %q: %v", s, e, err)
		}
		if !utf8.ValidString(e) || strings.ContainsAny(e, "/+#\x00") {
			t.Fatalf("Escape(%q) = %q is not a single clean level", s, e)
		}
		if e == "" {
			t.Fatalf("Escape(%q) is empty", s)
		}
		if n := escapedLen(s); n != len(e) {
			t.Fatalf("escapedLen(%q) = %d, want %d", s, n, len(e))
		}
		back, err := Unescape(e)
		if err != nil {
			t.Fatalf("Unescape(Escape(%q)) failed: %v", s, err)
		}
		if back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q", s, back)
		}
		// Unescape must never panic on arbitrary input either.
		_, _ = Unescape(s)
	})
}

func BenchmarkEscapePlain(b *testing.B) {
	for b.Loop() {
		_ = Escape("compute014.chocolate.ic.openstack.org")
	}
}

func BenchmarkEscapeNeedsEscaping(b *testing.B) {
	for b.Loop() {
		_ = Escape("web/01+x#.example.com")
	}
}

func BenchmarkUnescape(b *testing.B) {
	for b.Loop() {
		_, _ = Unescape("web%2F01%2Bx%23.example.com")
	}
}
