package ansible

import (
	"bytes"
	"encoding/json"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// eventIDKey is the key of the de-duplication id, which is not a field of
// the firehose schema.
const eventIDKey = "event_id"

// WithoutEventID returns the payload to publish for data, an event [Parse]
// accepted (a valid JSON object): data without its top-level event_id
// member, the plugin's de-duplication id, which is not one of the schema's
// fields. Every member whose key encoding/json would read as event_id goes
// (it matches keys case-insensitively and after unescaping), so that no
// variant reaches subscribers; event_id inside other values (in
// ansible_result, say) stays. All other bytes are kept as they are,
// whitespace and key order included.
//
// It reads data once, without decoding values, and returns data itself
// when there is nothing to remove; otherwise a new slice. data is never
// modified. Valid JSON that is not an object is returned unchanged; for
// invalid JSON the result is unspecified, but it does not panic.
func WithoutEventID(data []byte) []byte {
	if jsonscan.Kind(data) != jsonscan.Object {
		return data
	}
	// The byte ranges to remove, in order and not overlapping. A last member
	// removed takes the comma before it, back to the end of the last member
	// kept, which swallows the ranges of the members removed since.
	var cuts [][2]int
	prevEnd := -1 // end of the value of the last member kept, if any
	it := jsonscan.ValidMembers(data)
	for it.Next() {
		vend := it.Offset() + len(it.Value())
		if !isEventIDKey(it.Key()) {
			prevEnd = vend
			continue
		}
		next, last := after(data, vend)
		from, to := cutRange(it.KeyOffset(), vend, next, last, prevEnd)
		for len(cuts) > 0 && cuts[len(cuts)-1][0] >= from {
			cuts = cuts[:len(cuts)-1]
		}
		cuts = append(cuts, [2]int{from, to})
	}
	if it.Err() != nil || len(cuts) == 0 {
		return data // nothing to remove, or not valid JSON: leave it alone
	}
	removed := 0
	for _, c := range cuts {
		removed += c[1] - c[0]
	}
	out := make([]byte, 0, len(data)-removed)
	prev := 0
	for _, c := range cuts {
		out = append(out, data[prev:c[0]]...)
		prev = c[1]
	}
	return append(out, data[prev:]...)
}

// after looks past the member value that ends at vend: next is where the
// next member starts (or the closing brace, for the last member), and last
// reports whether there is no next member.
func after(data []byte, vend int) (next int, last bool) {
	next = jsonscan.SkipSpace(data, vend)
	if next < len(data) && data[next] == ',' {
		return jsonscan.SkipSpace(data, next+1), false
	}
	return next, true
}

// isEventIDKey reports whether encoding/json matches the raw (still
// escaped) object key to the field event_id.
func isEventIDKey(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		// No escapes: only ASCII folds to the letters of event_id, so
		// a match has exactly its length.
		return len(raw) == len(eventIDKey) && bytes.EqualFold(raw, []byte(eventIDKey))
	}
	var key string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &key); err != nil {
		return false
	}
	return len(key) == len(eventIDKey) && bytes.EqualFold([]byte(key), []byte(eventIDKey))
}

// cutRange returns the bytes to remove with the object member that starts
// at start and whose value ends at vend: with the comma after it and the
// space up to next, where the next member starts; or, for the last member
// (last), with the comma before it, from prevEnd, the end of the previous
// member (-1 when there is none).
func cutRange(start, vend, next int, last bool, prevEnd int) (from, to int) {
	switch {
	case !last:
		return start, next
	case prevEnd >= 0:
		return prevEnd, vend
	}
	return start, vend
}

// cut returns a copy of data without data[from:to]; data itself when to is 0.
func cut(data []byte, from, to int) []byte {
	if to == 0 {
		return data
	}
	out := make([]byte, 0, len(data)-(to-from))
	out = append(out, data[:from]...)
	return append(out, data[to:]...)
}
