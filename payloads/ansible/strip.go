package ansible

import (
	"bytes"
	"encoding/json"
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
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return data
	}
	buf := data // becomes a copy at the first cut, which later cuts reuse
	copied := false
	prevEnd := -1 // end of the value of the last member kept, if any
	i = skipSpace(buf, i+1)
	for i < len(buf) && buf[i] == '"' {
		start := i
		kend := skipValue(buf, i)
		if kend > len(buf) || kend < i+2 || buf[kend-1] != '"' {
			return data // not valid JSON: leave it alone
		}
		key := buf[i+1 : kend-1]
		i = skipSpace(buf, kend)
		if i >= len(buf) || buf[i] != ':' {
			return data
		}
		i = skipSpace(buf, i+1)
		vend := skipValue(buf, i)
		if vend > len(buf) {
			return data
		}
		next := skipSpace(buf, vend)
		last := next >= len(buf) || buf[next] != ','
		if !last {
			next = skipSpace(buf, next+1)
		}
		if !isEventIDKey(key) {
			prevEnd = vend
			i = next
			continue
		}
		from, to := cutRange(start, vend, next, last, prevEnd)
		if !copied {
			buf = cut(buf, from, to)
			copied = true
		} else {
			buf = append(buf[:from], buf[to:]...)
		}
		if last {
			break
		}
		i = start // the next member now begins where the cut one did
	}
	return buf
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
