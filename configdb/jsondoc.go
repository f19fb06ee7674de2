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
	"unicode/utf8"
	"unsafe"
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

// member is one top-level member of a JSON object: its key decoded, the key
// as written (quotes included) and the value as written.
type member struct {
	key    string
	rawKey []byte
	val    []byte
}

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
	doc   []byte
	i     int
	first bool
	done  bool
}

// openCursor checks that doc is an object; errNotObject if it is other JSON.
func openCursor(doc []byte) (cursor, error) {
	i := skipSpace(doc, 0)
	if i == len(doc) {
		return cursor{}, errors.New("empty document")
	}
	if doc[i] != '{' {
		return cursor{}, errNotObject
	}
	return cursor{doc: doc, i: skipSpace(doc, i+1), first: true}, nil
}

// next returns the next member; ok is false after the last. Keys without
// escapes share doc's memory (unsafe.String): documents are never modified
// once read, and the merged result keeps them alive anyway.
func (c *cursor) next() (m member, ok bool, err error) {
	if c.done {
		return m, false, nil
	}
	doc, i := c.doc, c.i
	if i < len(doc) && doc[i] == '}' && c.first {
		return m, false, c.finish(i)
	}
	c.first = false
	if i >= len(doc) || doc[i] != '"' {
		return m, false, fmt.Errorf("expected a key at offset %d", i)
	}
	end, escaped, err := scanString(doc, i)
	if err != nil {
		return m, false, err
	}
	m.rawKey = doc[i:end]
	// Escapes and invalid UTF-8 (which decoding replaces) need the real decoder.
	if escaped || !utf8.Valid(m.rawKey) {
		var key string // its own variable, so that m stays on the stack
		if err := json.Unmarshal(m.rawKey, &key); err != nil {
			return m, false, fmt.Errorf("key at offset %d: %w", i, err)
		}
		m.key = key
	} else if end-i > 2 {
		m.key = unsafe.String(&doc[i+1], end-i-2)
	}
	i = skipSpace(doc, end)
	if i >= len(doc) || doc[i] != ':' {
		return m, false, fmt.Errorf("expected ':' at offset %d", i)
	}
	i = skipSpace(doc, i+1)
	vend, err := scanValue(doc, i)
	if err != nil {
		return m, false, err
	}
	m.val = doc[i:vend]
	i = skipSpace(doc, vend)
	if i >= len(doc) {
		return m, false, errors.New("unterminated object")
	}
	switch doc[i] {
	case ',':
		c.i = skipSpace(doc, i+1)
	case '}':
		if err := c.finish(i); err != nil {
			return m, false, err
		}
	default:
		return m, false, fmt.Errorf("expected ',' or '}' at offset %d", i)
	}
	return m, true, nil
}

// finish ends the walk at the closing brace at i.
func (c *cursor) finish(i int) error {
	c.done = true
	if skipSpace(c.doc, i+1) != len(c.doc) {
		return fmt.Errorf("data after the object at offset %d", i+1)
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the string starting at b[i] == '"', and
// whether it holds escapes.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, nil
		}
	}
	return 0, false, fmt.Errorf("unterminated string at offset %d", i)
}

// scanValue returns the index after the JSON value starting at b[i]. It
// tracks nesting and strings only; the stored documents it reads were
// validated when they were written.
func scanValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("missing value")
	}
	switch b[i] {
	case '"':
		end, _, err := scanString(b, i)
		return end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, err := scanString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unterminated value at offset %d", i)
	default:
		j := i
		for j < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[j])) {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("missing value at offset %d", i)
		}
		return j, nil
	}
}

// jsonKind names the JSON type of a document, for messages.
func jsonKind(doc []byte) string {
	i := skipSpace(doc, 0)
	if i == len(doc) {
		return "empty"
	}
	switch doc[i] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
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
		m[mem.key] = mem.val
	}
	return m
}

// SplitKey splits a ?key= parameter ("a.b.0.c") into its path.
func SplitKey(key string) []string { return strings.Split(key, ".") }

// LookupKey returns the value at path in a JSON document: object members by
// name and list items by index. A path that does not exist, or that goes
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
// integers for list items) and, for set, the value.
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
		return nil, &Error{Kind: Invalid, Msg: fmt.Sprintf("the body must be a list of keys paths such as [[\"a\",\"b\",\"value\"]]; it is %s", jsonKind(body))}
	}
	paths := make([]KeyPath, 0, len(list))
	for i, item := range list {
		entry, ok := item.([]any)
		if !ok {
			return nil, invalidField(fmt.Sprintf("[%d]", i), "keys path %d must be a list, such as [\"a\",\"b\"]", i)
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

func setPath(doc any, p KeyPath) (any, error) {
	if _, short := p.Value.(tooShort); short || len(p.Keys) == 0 {
		return nil, errorf(Conflict, "keys path %s is invalid: it needs at least one key and a value", pathString(p.Keys))
	}
	parent, err := walk(doc, p.Keys)
	if err != nil {
		return nil, err
	}
	last := p.Keys[len(p.Keys)-1]
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
	parent, err := walk(doc, p.Keys)
	if err != nil {
		return nil, err
	}
	last := p.Keys[len(p.Keys)-1]
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
		// Removing an item from a list that is inside another value needs the
		// new slice stored back; rebuilding the path is simpler than tracking
		// parents, and lists in these documents are short.
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
