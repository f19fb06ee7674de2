package chef

import (
	"regexp"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// redactor rewrites raw JSON with the values of secret-looking keys replaced.
type redactor struct {
	// keys matches the keys whose values are replaced; nil when redaction is off.
	keys *regexp.Regexp
	// dropDelta replaces resource deltas.
	dropDelta bool
}

var redactedJSON = []byte(`"` + Redacted + `"`)

// on reports whether the redactor changes anything.
func (r *redactor) on() bool { return r != nil && (r.keys != nil || r.dropDelta) }

// value appends raw to dst with every object member, at any depth, whose
// decoded key matches replaced by "*redacted*". Keys are kept as written.
func (r *redactor) value(dst, raw []byte) []byte {
	switch jsonscan.Kind(raw) {
	case jsonscan.Object:
		return rewriteMembers(dst, raw, func(dst []byte, key string, val []byte) ([]byte, bool) {
			if r.keys.MatchString(key) {
				return append(dst, redactedJSON...), true
			}
			return r.value(dst, val), true
		})
	case jsonscan.Array:
		dst = append(dst, '[')
		it := jsonscan.Elements(raw)
		for it.Next() {
			if it.Index() > 0 {
				dst = append(dst, ',')
			}
			dst = r.value(dst, it.Value())
		}
		return append(dst, ']')
	}
	return append(dst, jsonscan.Trim(raw)...)
}

// attributes redacts one attribute level of the node object.
func (r *redactor) attributes(raw []byte) []byte {
	if r == nil || r.keys == nil {
		return raw
	}
	return r.value(make([]byte, 0, len(raw)), raw)
}

// resource redacts one resource record: its before and after states, and
// its delta when deltas are dropped. It returns raw itself when there is
// nothing to change.
func (r *redactor) resource(raw []byte) []byte {
	if !r.on() || jsonscan.Kind(raw) != jsonscan.Object {
		return raw
	}
	return rewriteMembers(make([]byte, 0, len(raw)), raw, func(dst []byte, key string, val []byte) ([]byte, bool) {
		switch {
		case r.keys != nil && (key == "before" || key == "after"):
			return r.value(dst, val), true
		case r.dropDelta && key == "delta" && hasDiff(val):
			return append(dst, redactedJSON...), true
		}
		return append(dst, val...), true
	})
}

// rewriteMembers appends the object obj to dst member by member, each key as
// written: value appends the member's value, or reports false to drop the
// member.
func rewriteMembers(dst, obj []byte, value func(dst []byte, key string, val []byte) ([]byte, bool)) []byte {
	dst = append(dst, '{')
	n := 0
	it := jsonscan.Members(obj)
	for it.Next() {
		mark := len(dst)
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, '"'), it.Key()...), '"', ':')
		var keep bool
		if dst, keep = value(dst, jsonscan.Key(it.Key()), it.Value()); !keep {
			dst = dst[:mark]
			continue
		}
		n++
	}
	return append(dst, '}')
}

// hasDiff reports whether a delta holds anything: null and "" are kept as
// they are, so that consumers still tell "no change" from "redacted".
func hasDiff(delta []byte) bool {
	s, ok := jsonscan.Str(delta)
	return jsonscan.Kind(delta) != jsonscan.Null && (!ok || s != "")
}
