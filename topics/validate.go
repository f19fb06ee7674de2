package topics

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxTopicBytes is the longest topic name or filter MQTT can carry: its
// strings are prefixed with a 16-bit length.
const MaxTopicBytes = 65535

// sharePrefix starts an MQTT 5 shared subscription filter,
// "$share/<group>/<filter>".
const sharePrefix = "$share/"

var (
	// ErrInvalidName is wrapped by every error about a topic name.
	ErrInvalidName = errors.New("invalid topic name")
	// ErrInvalidFilter is wrapped by every error about a topic filter.
	ErrInvalidFilter = errors.New("invalid topic filter")
	// ErrInvalidPrefix is wrapped by every error about a configured topic
	// prefix.
	ErrInvalidPrefix = errors.New("invalid topic prefix")
)

// ValidName reports whether topic can be used as the topic name of an MQTT
// PUBLISH (MQTT 3.1.1 and 5): it is non-empty, at most [MaxTopicBytes] bytes,
// valid UTF-8, and contains neither U+0000 nor the wildcards '+' and '#'. The
// error wraps [ErrInvalidName] and says what is wrong.
//
// Names starting with '$' are valid: they are reserved for the broker, which
// is why builders never make them, but a subscriber may still receive them.
func ValidName(topic string) error {
	if err := checkCommon(topic); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidName, err)
	}
	if i := strings.IndexAny(topic, "+#"); i >= 0 {
		return fmt.Errorf("%w: wildcard %q at byte %d", ErrInvalidName, topic[i], i)
	}
	return nil
}

// checkCommon holds the rules that names and filters share. It returns a
// plain description, which the caller wraps with its own sentinel.
func checkCommon(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > MaxTopicBytes {
		return fmt.Errorf("%d bytes, limit %d", len(s), MaxTopicBytes)
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("NUL at byte %d", i)
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	return nil
}

// ValidFilter reports whether filter can be used in an MQTT SUBSCRIBE: it is
// non-empty, at most [MaxTopicBytes] bytes, valid UTF-8 without U+0000, a '+'
// occupies a whole level, and a '#' occupies the whole last level. A filter
// that starts with "$share/" must be an MQTT 5 shared subscription,
// "$share/<group>/<filter>", whose group is non-empty without '+' or '#' and
// whose inner filter is valid. The error wraps [ErrInvalidFilter].
func ValidFilter(filter string) error {
	if !strings.HasPrefix(filter, sharePrefix) {
		return validPlainFilter(filter)
	}
	group, inner, ok := SplitShared(filter)
	switch {
	case !ok:
		return fmt.Errorf("%w: a shared subscription needs the form $share/<group>/<filter>", ErrInvalidFilter)
	case group == "":
		return fmt.Errorf("%w: empty shared subscription group", ErrInvalidFilter)
	case strings.ContainsAny(group, "+#"):
		return fmt.Errorf("%w: shared subscription group %q contains a wildcard", ErrInvalidFilter, group)
	}
	if err := validPlainFilter(inner); err != nil {
		return fmt.Errorf("in shared subscription %q: %w", group, err)
	}
	return nil
}

func validPlainFilter(filter string) error {
	if err := checkCommon(filter); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidFilter, err)
	}
	last := len(filter) - 1
	for i := 0; i < len(filter); i++ {
		switch filter[i] {
		case '+':
			if (i > 0 && filter[i-1] != '/') || (i < last && filter[i+1] != '/') {
				return fmt.Errorf("%w: '+' at byte %d must be a whole level", ErrInvalidFilter, i)
			}
		case '#':
			if i > 0 && filter[i-1] != '/' {
				return fmt.Errorf("%w: '#' at byte %d must be a whole level", ErrInvalidFilter, i)
			}
			if i < last {
				return fmt.Errorf("%w: '#' must be the last level", ErrInvalidFilter)
			}
		}
	}
	return nil
}

// SplitShared splits an MQTT 5 shared subscription filter
// "$share/<group>/<filter>" into its group and inner filter. ok is false when
// filter does not have that shape. It does not validate the group or the inner
// filter (the group may be empty); [ValidFilter] does.
func SplitShared(filter string) (group, inner string, ok bool) {
	rest, found := strings.CutPrefix(filter, sharePrefix)
	if !found {
		return "", "", false
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// ValidPrefix reports whether prefix can be a configured topic_prefix, the
// first level or levels of every topic of a source: one or more non-empty
// levels (so no leading, trailing or doubled '/'), no wildcards, no NUL or
// other control characters, valid UTF-8, and no leading '$', which MQTT
// reserves for the broker. The error wraps [ErrInvalidPrefix].
func ValidPrefix(prefix string) error {
	if err := checkCommon(prefix); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidPrefix, err)
	}
	if prefix[0] == '$' {
		return fmt.Errorf("%w: must not start with '$', which is reserved for the broker", ErrInvalidPrefix)
	}
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; {
		case c == '+' || c == '#':
			return fmt.Errorf("%w: wildcard %q at byte %d", ErrInvalidPrefix, c, i)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("%w: control character %q at byte %d", ErrInvalidPrefix, c, i)
		case c == '/' && (i == 0 || i == len(prefix)-1 || prefix[i+1] == '/'):
			return fmt.Errorf("%w: empty level at byte %d", ErrInvalidPrefix, i)
		}
	}
	return nil
}
