package configdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// Canonical parses a JSON document and returns it compact, with object keys
// sorted and numbers kept as written. Anything but exactly one JSON value is
// an Invalid error.
func Canonical(doc []byte) ([]byte, error) {
	v, err := decodeJSON(doc)
	if err != nil {
		return nil, err
	}
	return encodeJSON(v), nil
}

// decodeJSON parses exactly one JSON value, numbers as json.Number.
func decodeJSON(doc []byte) (any, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, &Error{Kind: Invalid, Msg: "the body must be a JSON document; it is empty"}
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{Kind: Invalid, Msg: "the body is not valid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &Error{Kind: Invalid, Msg: "the body must hold one JSON document; there is more after it"}
	}
	return v, nil
}

// encodeJSON writes v compactly without HTML escaping. Values come from
// decodeJSON, so encoding cannot fail.
func encodeJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("configdb: encoding decoded JSON: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// member is one top-level member of a JSON object: its key decoded, and the
// member as written, from the key's opening quote to the value's end. key
// aliases the document unless the key has escapes, so comparing keys
// allocates nothing. One slice and two offsets, not three slices, keep the
// members of a large document small (splitObject makes one per key).
// Offsets are 32-bit: documents are far smaller than max_body allows.
type member struct {
	key              []byte
	raw              []byte
	keyEnd, valStart int32
}

// rawKey is the key as written, quotes included.
func (m member) rawKey() []byte { return m.raw[:m.keyEnd] }

// val is the value as written.
func (m member) val() []byte { return m.raw[m.valStart:] }

// errNotObject is returned by splitObject for a document that is valid JSON
// but not an object.
var errNotObject = errors.New("not a JSON object")

// splitObject returns the top-level members of a JSON object without decoding
// the values. The slices point into doc. It returns errNotObject for any
// other JSON value.
func splitObject(doc []byte) ([]member, error) {
	c, err := openCursor(doc)
	if err != nil {
		return nil, err
	}
	var members []member
	for {
		m, ok, err := c.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return members, nil
		}
		members = append(members, m)
	}
}

// cursor walks the top-level members of a JSON object, which is what makes
// merging large documents cheap: values are never decoded.
type cursor struct {
	doc []byte
	it  jsonscan.Iter
}

// openCursor checks that doc is an object; errNotObject if it is other JSON.
func openCursor(doc []byte) (cursor, error) {
	switch jsonscan.Kind(doc) {
	case jsonscan.Object:
		// Stored documents were checked when they were written (Canonical):
		// values are skipped, not checked again.
		return cursor{doc: doc, it: jsonscan.ValidMembers(doc)}, nil
	case jsonscan.Invalid:
		if jsonscan.SkipSpace(doc, 0) == len(doc) {
			return cursor{}, errors.New("empty document")
		}
	}
	return cursor{}, errNotObject
}

// next returns the next member; ok is false after the last, or on an error
// (invalid JSON, or anything after the object).
func (c *cursor) next() (m member, ok bool, err error) {
	if !c.it.Next() {
		if err := c.it.Err(); err != nil {
			return m, false, err
		}
		if end := c.it.End(); end > 0 && jsonscan.SkipSpace(c.doc, end) != len(c.doc) {
			return m, false, fmt.Errorf("data after the object at offset %d", end)
		}
		return m, false, nil
	}
	raw, at, val := c.it.Key(), c.it.KeyOffset(), c.it.Value()
	end := c.it.Offset() + len(val)
	return member{
		key:      jsonscan.KeyBytes(raw),
		raw:      c.doc[at:end],
		keyEnd:   int32(len(raw) + 2),
		valStart: int32(c.it.Offset() - at),
	}, true, nil
}

// jsonKind names the JSON type of a document for messages, as JSON does
// ("an array"); "empty" for nothing but whitespace.
func jsonKind(doc []byte) string {
	if name := jsonscan.KindName(jsonscan.Kind(doc)); name != "" {
		return name
	}
	if jsonscan.SkipSpace(doc, 0) == len(doc) {
		return "empty"
	}
	return "not JSON"
}

// diffKeys compares two canonical documents by their top-level keys.
func diffKeys(before, after []byte) Changed {
	old := topLevel(before)
	cur := topLevel(after)
	c := Changed{Set: []string{}, Deleted: []string{}}
	for k, v := range cur {
		if ov, ok := old[k]; !ok || !bytes.Equal(ov, v) {
			c.Set = append(c.Set, k)
		}
	}
	for k := range old {
		if _, ok := cur[k]; !ok {
			c.Deleted = append(c.Deleted, k)
		}
	}
	sort.Strings(c.Set)
	sort.Strings(c.Deleted)
	return c
}

func topLevel(doc []byte) map[string][]byte {
	if doc == nil {
		return nil
	}
	members, err := splitObject(doc)
	if err != nil {
		return nil
	}
	m := make(map[string][]byte, len(members))
	for _, mem := range members {
		m[string(mem.key)] = mem.val()
	}
	return m
}

// SplitKey splits a ?key= parameter ("a.b.0.c") into its path.
func SplitKey(key string) []string { return strings.Split(key, ".") }

// LookupKey returns the value at path in a JSON document: object members by
// name and array items by index. A path that does not exist, or that goes
// through a scalar, is a Conflict naming the path.
func LookupKey(doc []byte, path []string) ([]byte, error) {
	v, err := decodeJSON(doc)
	if err != nil {
		return nil, err
	}
	got, err := lookupPath(v, path)
	if err != nil {
		return nil, err
	}
	return encodeJSON(got), nil
}

func lookupPath(v any, path []string) (any, error) {
	keys := make([]any, len(path))
	for i, k := range path {
		keys[i] = k
	}
	cur := v
	for i, k := range path {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[k]
			if !ok {
				return nil, missingKey(keys, keys[i])
			}
			cur = next
		case []any:
			n, ok := listIndex(k, len(c))
			if !ok {
				return nil, missingKey(keys, keys[i])
			}
			cur = c[n]
		default:
			return nil, leafValue(cur, keys[i], keys)
		}
	}
	return cur, nil
}

func listIndex(k any, n int) (int, bool) {
	var i int64
	switch k := k.(type) {
	case string:
		v, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return 0, false
		}
		i = v
	case int64:
		i = k
	default:
		return 0, false
	}
	if i < 0 || i >= int64(n) {
		return 0, false
	}
	return int(i), true
}

func pathString(keys []any) string {
	b, _ := json.Marshal(keys)
	return string(b)
}

func keyString(k any) string {
	b, _ := json.Marshal(k)
	return string(b)
}

func missingKey(path []any, key any) error {
	return errorf(Conflict, "keys path %s doesn't exist: failed on the key %s", pathString(path), keyString(key))
}

func leafValue(leaf, key any, path []any) error {
	return errorf(Conflict, "leaf value %s found on the key %s in keys path %s",
		encodeJSON(leaf), keyString(key), pathString(path))
}

// KeysOp is a keys operation: "set" or "delete".
type KeysOp string

// The keys operations.
const (
	KeysSet    KeysOp = "set"
	KeysDelete KeysOp = "delete"
)

// KeyPath is one entry of a keys operation batch: the keys (strings, or
// integers for array items) and, for set, the value.
type KeyPath struct {
	Keys  []any
	Value any
}

// ParseKeysBatch parses a keys operation body: [["k1","k2","value"], ...] for
// set, [["k1","k2"], ...] for delete. Wrong JSON types are Invalid; paths that
// are too short are a Conflict when the batch is applied, as in tuning-box.
func ParseKeysBatch(op KeysOp, body []byte) ([]KeyPath, error) {
	if op != KeysSet && op != KeysDelete {
		return nil, errorf(NotFound, "unknown keys operation %q: use set or delete (read a key with GET ...?key=a.b)", op)
	}
	v, err := decodeJSON(body)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, &Error{Kind: Invalid, Msg: fmt.Sprintf("the body must be an array of keys paths such as [[\"a\",\"b\",\"value\"]]; it is %s", jsonKind(body))}
	}
	paths := make([]KeyPath, 0, len(list))
	for i, item := range list {
		entry, ok := item.([]any)
		if !ok {
			return nil, invalidField(fmt.Sprintf("[%d]", i), "keys path %d must be an array, such as [\"a\",\"b\"]", i)
		}
		var kp KeyPath
		keys := entry
		if op == KeysSet && len(entry) > 0 {
			keys, kp.Value = entry[:len(entry)-1], entry[len(entry)-1]
		}
		for j, k := range keys {
			switch k := k.(type) {
			case string:
				kp.Keys = append(kp.Keys, k)
			case json.Number:
				n, err := k.Int64()
				if err != nil {
					return nil, invalidField(fmt.Sprintf("[%d][%d]", i, j), "key %s of keys path %d is not a string or an integer", k, i)
				}
				kp.Keys = append(kp.Keys, n)
			default:
				return nil, invalidField(fmt.Sprintf("[%d][%d]", i, j), "key %d of keys path %d must be a string or an integer", j, i)
			}
		}
		if op == KeysSet && len(entry) < 2 {
			kp.Keys = append(kp.Keys[:0:0], entry...) // kept as given, for the message
			kp.Value = tooShort{}
		}
		paths = append(paths, kp)
	}
	return paths, nil
}

// tooShort marks a set path that had fewer than a key and a value.
type tooShort struct{}

// applyKeys applies a batch to a canonical document and returns the new
// canonical document. Nothing is changed unless every path applies.
func applyKeys(doc []byte, op KeysOp, paths []KeyPath) ([]byte, error) {
	v, err := decodeJSON(doc)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		switch op {
		case KeysSet:
			v, err = setPath(v, p)
		case KeysDelete:
			v, err = deletePath(v, p)
		}
		if err != nil {
			return nil, err
		}
	}
	return encodeJSON(v), nil
}

// walk follows all but the last key of p.Keys; every one must exist.
func walk(v any, keys []any) (any, error) {
	cur := v
	for _, k := range keys[:len(keys)-1] {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[objectKey(k)]
			if !ok {
				return nil, missingKey(keys, k)
			}
			cur = next
		case []any:
			n, ok := listIndex(k, len(c))
			if !ok {
				return nil, missingKey(keys, k)
			}
			cur = c[n]
		default:
			return nil, leafValue(cur, k, keys)
		}
	}
	return cur, nil
}

func objectKey(k any) string {
	if n, ok := k.(int64); ok {
		return strconv.FormatInt(n, 10)
	}
	return k.(string)
}

// parentOf returns the value that holds the last of keys (which may not
// exist yet), and that last key.
func parentOf(doc any, keys []any) (parent, last any, err error) {
	if parent, err = walk(doc, keys); err != nil {
		return nil, nil, err
	}
	return parent, keys[len(keys)-1], nil
}

func setPath(doc any, p KeyPath) (any, error) {
	if _, short := p.Value.(tooShort); short || len(p.Keys) == 0 {
		return nil, errorf(Conflict, "keys path %s is invalid: it needs at least one key and a value", pathString(p.Keys))
	}
	parent, last, err := parentOf(doc, p.Keys)
	if err != nil {
		return nil, err
	}
	switch c := parent.(type) {
	case map[string]any:
		c[objectKey(last)] = p.Value
	case []any:
		n, ok := listIndex(last, len(c))
		if !ok {
			return nil, missingKey(p.Keys, last)
		}
		c[n] = p.Value
	default:
		return nil, leafValue(parent, last, p.Keys)
	}
	return doc, nil
}

func deletePath(doc any, p KeyPath) (any, error) {
	if len(p.Keys) == 0 {
		return nil, errorf(Conflict, "keys path [] is invalid: it needs at least one key")
	}
	parent, last, err := parentOf(doc, p.Keys)
	if err != nil {
		return nil, err
	}
	switch c := parent.(type) {
	case map[string]any:
		k := objectKey(last)
		if _, ok := c[k]; !ok {
			return nil, missingKey(p.Keys, last)
		}
		delete(c, k)
	case []any:
		n, ok := listIndex(last, len(c))
		if !ok {
			return nil, missingKey(p.Keys, last)
		}
		// Removing an item from an array that is inside another value needs the
		// new slice stored back; rebuilding the path is simpler than tracking
		// parents, and arrays in these documents are short.
		return replaceAt(doc, p.Keys[:len(p.Keys)-1], append(c[:n:n], c[n+1:]...)), nil
	default:
		return nil, leafValue(parent, last, p.Keys)
	}
	return doc, nil
}

// replaceAt returns doc with the value at keys (which exists) replaced by v.
func replaceAt(doc any, keys []any, v any) any {
	if len(keys) == 0 {
		return v
	}
	switch c := doc.(type) {
	case map[string]any:
		k := objectKey(keys[0])
		c[k] = replaceAt(c[k], keys[1:], v)
	case []any:
		n, _ := listIndex(keys[0], len(c))
		c[n] = replaceAt(c[n], keys[1:], v)
	}
	return doc
}
