package topics

import (
	"errors"
	"fmt"
	"strings"
)

// ErrOtherPrefix is Parse's error for a topic that is not under the prefix
// it was given.
var ErrOtherPrefix = errors.New("topic is not under the prefix")

// Parse is the builders' inverse, for consumers: it splits topic into the
// levels that follow prefix (a source's topic_prefix, which may be several
// levels; empty means the whole topic), each unescaped, so that "web%2F01"
// reads "web/01" again and "_" reads as the empty, missing value.
//
// A topic not under prefix is ErrOtherPrefix, with no levels. A level that
// is not a valid escape (a topic a third party published by hand) is kept as
// it is, and the error, an ErrBadEscape naming the level, comes with the
// levels: a consumer that shows what it can uses them, one that trusts only
// builders' topics drops the message.
func Parse(topic, prefix string) ([]string, error) {
	rest := topic
	if prefix != "" {
		var ok bool
		if rest, ok = strings.CutPrefix(topic, prefix+"/"); !ok {
			return nil, fmt.Errorf("%w %q: %q", ErrOtherPrefix, prefix, topic)
		}
	}
	levels := strings.Split(rest, "/")
	var bad error
	for i, l := range levels {
		u, err := Unescape(l)
		if err != nil {
			if bad == nil {
				bad = fmt.Errorf("level %d of %q: %w", i+1, topic, err)
			}
			continue
		}
		levels[i] = u
	}
	return levels, bad
}
