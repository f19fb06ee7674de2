package topics

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultSubjectPrefix is the first token of every NATS subject the bridge
// publishes when no subject_prefix is configured.
const DefaultSubjectPrefix = "firehose"

// ErrInvalidSubject is wrapped by errors about a NATS subject or subject
// prefix.
var ErrInvalidSubject = errors.New("invalid nats subject")

// ValidSubjectPrefix reports whether prefix can start NATS subjects: one or
// more non-empty tokens separated by '.', with no whitespace or other ASCII
// control byte, and no '*' or '>', which NATS reads as wildcards. The error
// wraps [ErrInvalidSubject].
func ValidSubjectPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("%w: empty prefix", ErrInvalidSubject)
	}
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; {
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("%w: prefix has whitespace or control character %q at byte %d", ErrInvalidSubject, c, i)
		case c == '*' || c == '>':
			return fmt.Errorf("%w: prefix has wildcard %q at byte %d", ErrInvalidSubject, c, i)
		case c == '.' && (i == 0 || i == len(prefix)-1 || prefix[i+1] == '.'):
			return fmt.Errorf("%w: prefix has an empty token at byte %d", ErrInvalidSubject, i)
		}
	}
	return nil
}

// ToSubject maps an MQTT topic name to the NATS subject "<prefix>.<mapped
// topic>".
//
// The mapping is nats-server's own MQTT mapping, so native NATS-MQTT clients
// see the same subjects: '/' becomes '.', a '.' inside a level becomes "//", a
// leading '/' becomes "/.", and a '/' before an empty level or at the end
// becomes "./". nats-server rejects whitespace and DEL, and NATS would read a
// token "*" or ">" as a wildcard, so first, within each level, every byte
// 0x00-0x20 and 0x7F becomes %XX (upper-case hex), a level that is exactly "*"
// becomes "%2A" and one that is exactly ">" becomes "%3E". A '%' becomes "%25"
// only when the two bytes after it would otherwise be decoded by
// [FromSubject]; every other '%', such as that of an [Escape]d "%2F", passes
// through, so escaped topics stay readable.
//
// The result has no whitespace, no empty token and no token that is exactly
// "*" or ">", and [FromSubject] reverses it exactly. topic must pass
// [ValidName] and prefix [ValidSubjectPrefix].
func ToSubject(prefix, topic string) (string, error) {
	if err := ValidSubjectPrefix(prefix); err != nil {
		return "", err
	}
	if err := ValidName(topic); err != nil {
		return "", err
	}
	return mapTopic(prefix, topic, false), nil
}

// SubjectOf is [ToSubject] for a topic that has passed [ValidName] and a
// prefix that has passed [ValidSubjectPrefix], which it does not check
// again: the router checks a message's topic once, where it enters, and a
// route's subject_prefix with the config.
func SubjectOf(prefix, topic string) string {
	return mapTopic(prefix, topic, false)
}

// FilterToSubject maps an MQTT topic filter to a NATS subject filter for a
// route: a whole '+' level becomes '*', a whole '#' level becomes '>', and
// every other level is mapped as [ToSubject] maps it, so the subject filter
// matches the subjects of the topics the MQTT filter matches.
//
// Two MQTT rules have no NATS equivalent, and callers that need them must add
// them: "a/#" matches "a" in MQTT, but "<prefix>.a.>" does not match
// "<prefix>.a" (nats-server subscribes to both); and NATS has no '$' rule, so
// "#" maps to "<prefix>.>", which also matches subjects of '$' topics.
//
// filter must pass [ValidFilter]; a shared subscription is an error wrapping
// [ErrInvalidFilter], because NATS expresses groups as queue groups instead.
func FilterToSubject(prefix, filter string) (string, error) {
	if err := ValidSubjectPrefix(prefix); err != nil {
		return "", err
	}
	if err := ValidFilter(filter); err != nil {
		return "", err
	}
	if _, _, ok := SplitShared(filter); ok {
		return "", fmt.Errorf("%w: shared subscription has no nats subject; use a queue group", ErrInvalidFilter)
	}
	return mapTopic(prefix, filter, true), nil
}

// mapTopic does the mapping of ToSubject and FilterToSubject. topic must be
// valid; with wildcards set, whole '+' and '#' levels are wildcards.
//
// nats-server converts byte by byte; here the same rules are applied per level.
// A separator becomes "/." while every level before it is empty (the leading
// run of empty levels), otherwise "./" when the level after it is empty, and
// otherwise "."; a topic made only of empty levels gets a final "/".
func mapTopic(prefix, topic string, wildcards bool) string {
	var b strings.Builder
	b.Grow(len(prefix) + 1 + mappedLen(topic))
	b.WriteString(prefix)
	b.WriteByte('.')
	leadingEmpty := true
	levels := 0
	for rest, more := topic, true; more; levels++ {
		var level string
		level, rest, more = nextLevel(rest)
		if levels > 0 {
			switch {
			case leadingEmpty:
				b.WriteString("/.")
			case level == "":
				b.WriteString("./")
			default:
				b.WriteByte('.')
			}
		}
		leadingEmpty = leadingEmpty && level == ""
		writeMappedLevel(&b, level, wildcards)
	}
	// Every level empty: the subject would end in the '.' of a "/." marker,
	// and nats-server closes it with a '/' so that no token is empty.
	if leadingEmpty && levels > 1 {
		b.WriteByte('/')
	}
	return b.String()
}

// mappedLen returns an upper bound of the mapped length of topic, so that
// mapTopic allocates once: each separator takes at most 2 bytes, each '.' 2,
// and each percent-encoded byte 3, plus the final "/".
func mappedLen(topic string) int {
	n := 1
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case c == '/' || c == '.':
			n += 2
		case c <= ' ' || c == 0x7f || c == '%' || c == '*' || c == '>':
			n += 3
		default:
			n++
		}
	}
	return n
}

func writeMappedLevel(b *strings.Builder, level string, wildcards bool) {
	switch level {
	case "*":
		b.WriteString("%2A")
		return
	case ">":
		b.WriteString("%3E")
		return
	case "+":
		if wildcards {
			b.WriteByte('*')
			return
		}
	case "#":
		if wildcards {
			b.WriteByte('>')
			return
		}
	}
	for i := 0; i < len(level); i++ {
		switch c := level[i]; {
		case c <= ' ' || c == 0x7f:
			writePercent(b, c)
		case c == '%':
			if i+2 < len(level) && natsDecodable(level[i+1], level[i+2]) {
				b.WriteString("%25")
			} else {
				b.WriteByte('%')
			}
		case c == '.':
			b.WriteString("//")
		default:
			b.WriteByte(c)
		}
	}
}

// natsDecodable reports whether "%" followed by hi and lo is one of the
// sequences that the subject percent layer decodes: upper-case hex of a byte
// that ToSubject encodes.
func natsDecodable(hi, lo byte) bool {
	_, ok := natsDecode(hi, lo)
	return ok
}

func natsDecode(hi, lo byte) (byte, bool) {
	h, ok1 := upperUnhex(hi)
	l, ok2 := upperUnhex(lo)
	if !ok1 || !ok2 {
		return 0, false
	}
	c := h<<4 | l
	if c <= ' ' || c == 0x7f || c == '*' || c == '>' || c == '%' {
		return c, true
	}
	return 0, false
}

// upperUnhex is unhex for the upper-case digits alone, the only ones
// ToSubject writes.
func upperUnhex(c byte) (byte, bool) {
	if 'a' <= c && c <= 'f' {
		return 0, false
	}
	return unhex(c)
}

// FromSubject is the exact inverse of [ToSubject]: it returns the topic name t
// for which ToSubject(prefix, t) == subject. It is an error wrapping
// [ErrInvalidSubject] when subject is not "<prefix>.<something>" or when no
// topic name maps to it (for instance "<prefix>.a..b", or a '*' token).
func FromSubject(prefix, subject string) (string, error) {
	if err := ValidSubjectPrefix(prefix); err != nil {
		return "", err
	}
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok || len(rest) < 2 || rest[0] != '.' {
		return "", fmt.Errorf("%w: %q is not under prefix %q", ErrInvalidSubject, subject, prefix)
	}
	topic := unmapSubject(rest[1:])
	// Decoding accepts more than ToSubject writes (empty tokens, lower-level
	// markers in odd places, non-canonical percent sequences); mapping back
	// and comparing rejects everything outside the image, which is what keeps
	// the mapping a bijection.
	if ValidName(topic) != nil || mapTopic(prefix, topic, false) != subject {
		return "", fmt.Errorf("%w: %q is not the image of any topic name", ErrInvalidSubject, subject)
	}
	return topic, nil
}

// unmapSubject reverses nats-server's separator conversion
// (natsSubjectToMQTTTopic) and then the percent layer.
func unmapSubject(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '/':
			if i+1 < len(s) {
				switch s[i+1] {
				case '.':
					out = append(out, '/')
					i++
				case '/':
					out = append(out, '.')
					i++
				}
			}
			// A lone '/' is the second half of a "./" marker: drop it.
		case '.':
			out = append(out, '/')
		default:
			out = append(out, c)
		}
	}
	// The percent layer never writes '/' or '.', so it can be undone on the
	// whole topic at once.
	w := 0
	for r := 0; r < len(out); r++ {
		if out[r] == '%' && r+2 < len(out) {
			if c, ok := natsDecode(out[r+1], out[r+2]); ok {
				out[w] = c
				w++
				r += 2
				continue
			}
		}
		out[w] = out[r]
		w++
	}
	return string(out[:w])
}
