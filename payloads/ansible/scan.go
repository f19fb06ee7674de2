package ansible

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// The fast path. encoding/json scans an event at least twice (validity, then
// decoding by reflection) and allocates for every field; at tens of
// thousands of events a second that is most of the intake's CPU. scan reads
// only the top-level keys it needs from an event already known to be valid
// JSON, and gives up (returns false) on anything where encoding/json's
// answer takes more than reading a string: a key that differs from ours only
// in case or is escaped, a value of the wrong type, a stats object. The
// caller then decodes with encoding/json, so the result is always exactly
// parseSlow's; FuzzParse checks that they agree.

// ErrTooMany is Split's error for an array of more events than it may return.
var ErrTooMany = errors.New("too many events")

// Split returns the elements of a JSON array of events, as sub-slices of
// data, without decoding them; each is valid JSON, ready for [ParseValid].
// data that is not a valid JSON array gets a *payloads.FieldError. An array of more
// than max elements gets ErrTooMany, found before more than max+1 are
// listed (max <= 0: no bound), so that a body of a million tiny elements
// costs no more than its bytes. data is read once when it is valid.
func Split(data []byte, max int) ([][]byte, error) {
	if jsonscan.Kind(data) != jsonscan.Array {
		if err := jsonscan.Check(data); err != nil {
			return nil, malformed(data)
		}
		return nil, fieldError("", "not a JSON array of events")
	}
	var out [][]byte
	it := jsonscan.Elements(data)
	for it.Next() {
		if max > 0 && len(out) == max {
			if jsonscan.Check(data) != nil {
				return nil, malformed(data) // invalid JSON is reported as such, however long
			}
			return nil, ErrTooMany
		}
		out = append(out, it.Value())
	}
	if it.Err() != nil || jsonscan.SkipSpace(data, it.End()) != len(data) {
		return nil, malformed(data)
	}
	return out, nil
}

// malformed is Split's error for invalid JSON, decoded only for
// encoding/json's description of the fault.
func malformed(data []byte) error {
	var events []json.RawMessage
	msg := "invalid JSON"
	if err := json.Unmarshal(data, &events); err != nil {
		msg = err.Error()
	}
	return fieldError("", "malformed JSON array of events: "+msg)
}

// scan fills w from the top-level keys of data, a valid JSON value. It
// returns false when encoding/json must decide.
func scan(data []byte, w *wire) bool {
	if jsonscan.Kind(data) != jsonscan.Object {
		return false
	}
	prevEnd := -1 // end of the last member other than event_id
	it := jsonscan.ValidMembers(data)
	for it.Next() {
		key, value := it.Key(), it.Value()
		if dst := w.field(key); dst != nil {
			if !readString(value, dst) {
				return false
			}
		} else {
			switch string(key) {
			case "ansible_result":
				w.AnsibleResult = kind(value[0])
			case "stats":
				return false // rare (once per host and run), and has counters to check
			default:
				if foldsToOurs(key) {
					return false
				}
			}
		}
		vend := it.Offset() + len(value)
		if string(key) != eventIDKey {
			prevEnd = vend
		} else if w.cutTo != 0 {
			return false // event_id twice: leave it to WithoutEventID
		} else {
			// Variants that encoding/json would also read as event_id
			// (escaped, other case) went to the slow path above.
			next, last := after(data, vend)
			w.cutFrom, w.cutTo = cutRange(it.KeyOffset(), vend, next, last, prevEnd)
		}
	}
	return it.Err() == nil
}

// field returns where the string field named key (exactly) goes, or nil.
func (w *wire) field(key []byte) **string {
	switch string(key) {
	case "ansible_type":
		return &w.AnsibleType
	case "event_id":
		return &w.EventID
	case "playbook_id":
		return &w.PlaybookID
	case "playbook_name":
		return &w.PlaybookName
	case "status":
		return &w.Status
	case "host":
		return &w.Host
	case "ansible_host":
		return &w.AnsibleHost
	case "session":
		return &w.Session
	case "ansible_task":
		return &w.AnsibleTask
	}
	return nil
}

// wireKeys are the JSON keys of wire.
var wireKeys = [...]string{"ansible_type", "event_id", "playbook_id", "playbook_name", "status", "host",
	"ansible_host", "session", "ansible_task", "ansible_result", "stats"}

// foldsToOurs reports whether encoding/json might match key to one of
// wire's fields although it is not spelled exactly so: it matches names
// case-insensitively (with Unicode folding, so any non-ASCII key is
// suspect), and keys may be escaped.
func foldsToOurs(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf || c == '\\' {
			return true
		}
	}
	for _, k := range wireKeys {
		if len(k) == len(key) && bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}

// readString stores a JSON string or null value as encoding/json would
// decode it into a *string: null is nil. Any other type returns false.
func readString(value []byte, dst **string) bool {
	switch value[0] {
	case 'n':
		*dst = nil
		return true
	case '"':
	default:
		return false
	}
	raw := value[1 : len(value)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		s := string(raw)
		*dst = &s
		return true
	}
	// Escapes, or invalid UTF-8 that encoding/json replaces with U+FFFD.
	var s string
	if err := json.Unmarshal(value, &s); err != nil {
		return false
	}
	*dst = &s
	return true
}
