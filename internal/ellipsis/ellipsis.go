// Package ellipsis shortens text for payloads that bound a field's size.
package ellipsis

import "unicode/utf8"

// Cut returns s when it has at most n bytes; otherwise the longest prefix of
// s that ends at a character boundary and leaves room for "…", then "…",
// n bytes at most in all. Cutting at a boundary keeps valid UTF-8 valid.
// n must be at least len("…").
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
