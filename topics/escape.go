package topics

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Missing is the level written for an empty or missing value. An empty level
// would be legal MQTT, but it is easy to miss in a topic such as "chef/org//run"
// and cannot be told apart from a typo in a filter, so it gets a visible mark.
const Missing = "_"

// escapedMissing is how a value that really is "_" is written, so that it is not
// read back as a missing value.
const escapedMissing = "%5F"

// ErrBadEscape is wrapped by [Unescape] when a '%' is not followed by two hex
// digits.
var ErrBadEscape = errors.New("bad percent escape")

const upperHex = "0123456789ABCDEF"

// escapeASCII reports whether an ASCII byte must be percent-encoded inside a
// level: the MQTT separators and wildcards, '%' itself so that the encoding is
// reversible, and every control byte, because subscribers print topics.
func escapeASCII(c byte) bool {
	return c < 0x20 || c == 0x7f || c == '%' || c == '/' || c == '+' || c == '#'
}

// Escape returns level as a single MQTT topic level that can be reversed with
// [Unescape].
//
// Inside the level, '%', '/', '+', '#', the ASCII control bytes (0x00-0x1F,
// 0x7F), the UTF-8 bytes of the C1 controls U+0080-U+009F and every byte that
// is not part of valid UTF-8 are written as %XX with upper-case hex. Everything
// else, including spaces, '.', '$', '*' and '>', passes through. The empty
// string becomes [Missing] ("_"), and a level that is exactly "_" becomes
// "%5F", so the result is never empty, is valid UTF-8, and contains no '/',
// '+', '#' or NUL.
//
// When nothing needs escaping, Escape returns level itself without
// allocating.
func Escape(level string) string {
	switch level {
	case "":
		return Missing
	case Missing:
		return escapedMissing
	}
	i := firstUnsafe(level)
	if i == len(level) {
		return level
	}
	var b strings.Builder
	b.Grow(escapedLen(level))
	b.WriteString(level[:i])
	writeEscapedTail(&b, level[i:])
	return b.String()
}

// firstUnsafe returns the index of the first byte of level that needs
// escaping, or len(level) when there is none.
func firstUnsafe(level string) int {
	for i := 0; i < len(level); {
		c := level[i]
		if c < utf8.RuneSelf {
			if escapeASCII(c) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(level[i:])
		if (r == utf8.RuneError && size == 1) || r <= 0x9f {
			return i
		}
		i += size
	}
	return len(level)
}

// escapedLen returns len(Escape(level)) without allocating.
func escapedLen(level string) int {
	switch level {
	case "":
		return len(Missing)
	case Missing:
		return len(escapedMissing)
	}
	n := 0
	for i := 0; i < len(level); {
		c := level[i]
		if c < utf8.RuneSelf {
			if escapeASCII(c) {
				n += 3
			} else {
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(level[i:])
		if (r == utf8.RuneError && size == 1) || r <= 0x9f {
			n += 3 * size
		} else {
			n += size
		}
		i += size
	}
	return n
}

// writeEscaped writes Escape(level) to b without an intermediate string.
func writeEscaped(b *strings.Builder, level string) {
	switch level {
	case "":
		b.WriteString(Missing)
		return
	case Missing:
		b.WriteString(escapedMissing)
		return
	}
	i := firstUnsafe(level)
	b.WriteString(level[:i])
	if i < len(level) {
		writeEscapedTail(b, level[i:])
	}
}

// writeEscapedTail escapes s, which must not be one of the whole-level special
// cases ("" or "_"); callers handle those.
func writeEscapedTail(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if escapeASCII(c) {
				writePercent(b, c)
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r <= 0x9f {
			for k := 0; k < size; k++ {
				writePercent(b, s[i+k])
			}
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
}

func writePercent(b *strings.Builder, c byte) {
	b.WriteByte('%')
	b.WriteByte(upperHex[c>>4])
	b.WriteByte(upperHex[c&0x0f])
}

// Unescape reverses [Escape]: "_" becomes "", and every %XX (hex digits of
// either case) becomes the byte it encodes. Other bytes are kept as they are,
// so Unescape(Escape(s)) == s for every s. A '%' that is not followed by two
// hex digits is an error wrapping [ErrBadEscape].
func Unescape(level string) (string, error) {
	if level == Missing {
		return "", nil
	}
	i := strings.IndexByte(level, '%')
	if i < 0 {
		return level, nil
	}
	b := make([]byte, 0, len(level))
	b = append(b, level[:i]...)
	for ; i < len(level); i++ {
		c := level[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(level) {
			return "", fmt.Errorf("%w: '%%' at byte %d is not followed by two hex digits", ErrBadEscape, i)
		}
		hi, ok1 := unhex(level[i+1])
		lo, ok2 := unhex(level[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("%w: '%%' at byte %d is not followed by two hex digits", ErrBadEscape, i)
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
