package jsonscan

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest, the same limit as
// encoding/json's, so that Valid and json.Valid always agree.
const MaxDepth = 10000

// SyntaxError is invalid JSON, at byte Offset of the input.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Value kinds, as returned by Kind: the first byte of the value.
const (
	Object  = '{'
	Array   = '['
	String  = '"'
	Number  = '0'
	True    = 't'
	False   = 'f'
	Null    = 'n'
	Invalid = 0
)

// Check reports whether b is exactly one JSON value, with optional
// whitespace around it. It accepts and rejects the same inputs as json.Valid.
func Check(b []byte) error {
	i := skipSpace(b, 0)
	if i == len(b) {
		if len(b) == 0 {
			return &SyntaxError{Offset: 0, Msg: "empty input"}
		}
		return &SyntaxError{Offset: i, Msg: "unexpected end of input"}
	}
	end, err := skipValue(b, i, 0)
	if err != nil {
		return err
	}
	if j := skipSpace(b, end); j != len(b) {
		return &SyntaxError{Offset: j, Msg: "unexpected " + describe(b[j]) + " after the top-level value"}
	}
	return nil
}

// Valid is Check without the error.
func Valid(b []byte) bool { return Check(b) == nil }

// Kind returns the kind of the value that v holds (leading whitespace
// allowed): Object, Array, String, Number, True, False or Null, or Invalid for
// anything else, including an empty v. It looks at one byte only.
func Kind(v []byte) byte {
	i := skipSpace(v, 0)
	if i == len(v) {
		return Invalid
	}
	switch c := v[i]; c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return Number
	}
	return Invalid
}

// KindName names a kind (as returned by Kind) for messages, with its article
// and in JSON's own words: "an object", "an array", "a string", "a number",
// "a boolean" or "null". Invalid has no name, the empty string: what is
// missing or wrong depends on the caller ("the body is empty", "got
// nothing").
func KindName(kind byte) string {
	switch kind {
	case Object:
		return "an object"
	case Array:
		return "an array"
	case String:
		return "a string"
	case Number:
		return "a number"
	case True, False:
		return "a boolean"
	case Null:
		return "null"
	}
	return ""
}

// Trim returns v without the whitespace around it.
func Trim(v []byte) []byte {
	i := skipSpace(v, 0)
	j := len(v)
	for j > i && isSpace(v[j-1]) {
		j--
	}
	return v[i:j]
}

// Str decodes the JSON string that v holds as encoding/json would: escapes
// resolved and invalid UTF-8 replaced by U+FFFD. ok is false when v is not a
// valid JSON string.
func Str(v []byte) (s string, ok bool) {
	v = Trim(v)
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	end, err := skipString(v, 0)
	if err != nil || end != len(v) {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if plain(inner) {
		return string(inner), true
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// Key decodes an object key as returned by Iter.Key (the bytes between the
// quotes), as encoding/json would.
func Key(raw []byte) string {
	if plain(raw) {
		return string(raw)
	}
	var s string
	// raw came from a checked string, so re-quoting it cannot fail.
	buf := make([]byte, 0, len(raw)+2)
	buf = append(append(append(buf, '"'), raw...), '"')
	_ = json.Unmarshal(buf, &s)
	return s
}

// KeyBytes is Key without the string: raw itself when the key needs no
// decoding (no escapes, valid UTF-8), so that comparing keys allocates
// nothing; otherwise a decoded copy.
func KeyBytes(raw []byte) []byte {
	if plain(raw) {
		return raw
	}
	return []byte(Key(raw))
}

// KeyIs reports whether the raw key equals name, without allocating when the
// key has no escapes.
func KeyIs(raw []byte, name string) bool {
	if plain(raw) {
		return string(raw) == name
	}
	return Key(raw) == name
}

// plain reports whether string contents need no decoding: no escapes and
// valid UTF-8. Keys are compared on every member of a merge, so ASCII is
// taken 8 bytes at a time.
func plain(b []byte) bool {
	i := 0
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		s := x ^ slash8
		if (x|(s-ones8)&^s)&highs8 != 0 {
			break // a backslash or a byte from 0x80 up: look closer
		}
		i += 8
	}
	ascii := true
	for _, c := range b[i:] {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return ascii || utf8.Valid(b[i:])
}

// Iter walks the members of an object or the elements of an array, checking
// syntax as it goes. The zero Iter yields nothing.
//
//	it := jsonscan.Members(obj)
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
//
// To read a value in the same pass instead of skipping it, use Step, then
// either SkipValue or Enter and Leave:
//
//	for it.Step() {
//		if child, ok := it.Enter(); ok {
//			for child.Next() { ... }
//			it.Leave(&child)
//		} else {
//			it.SkipValue()
//		}
//	}
type Iter struct {
	b     []byte
	i     int
	close byte
	depth int
	n     int
	// The current member's key and value as offsets into b, not slices:
	// Step and SkipValue then store no pointers, which would each cost a
	// write barrier while the garbage collector runs.
	keyOff, keyEnd int // keyEnd 0: no key
	valOff, valEnd int
	hasVal         bool
	end            int
	err            error
	done           bool
	// pending: Step has read a key, the value is not read yet.
	pending bool
	// valid: the input is known to be valid JSON, so values are skipped
	// without checking them (skipValid).
	valid bool
}

// Members iterates over the members of the object v holds. If v is not an
// object, Err reports it after the first Next.
func Members(v []byte) Iter { return newIter(v, '{', 1) }

// Elements iterates over the elements of the array v holds. If v is not an
// array, Err reports it after the first Next.
func Elements(v []byte) Iter { return newIter(v, '[', 1) }

// ValidMembers is Members for v already known to be valid JSON (checked by
// Check or json.Valid, or stored by this program after checking): values are
// skipped without being checked again, which is what makes walking large
// stored documents cheap. Keys and the object's own punctuation are still
// read with care; on invalid input the results are unspecified but it does
// not panic.
func ValidMembers(v []byte) Iter {
	it := newIter(v, '{', 1)
	it.valid = true
	return it
}

func newIter(v []byte, open byte, depth int) Iter {
	it := Iter{b: v, close: '}', depth: depth}
	if open == '[' {
		it.close = ']'
	}
	i := skipSpace(v, 0)
	if i == len(v) || v[i] != open {
		want := "an object"
		if open == '[' {
			want = "an array"
		}
		it.fail(i, "expected "+want)
		return it
	}
	it.i = i + 1
	return it
}

func (it *Iter) fail(at int, msg string) {
	it.err = &SyntaxError{Offset: at, Msg: msg}
	it.done = true
}

// Next advances to the next member or element, reading its value, and
// reports whether there is one.
func (it *Iter) Next() bool {
	return it.Step() && it.SkipValue()
}

// Step advances to the next member or element and stops before its value,
// which the caller must then read with SkipValue or Enter and Leave.
func (it *Iter) Step() bool {
	if it.pending && !it.SkipValue() {
		return false
	}
	if it.done {
		return false
	}
	b := it.b
	i := skipSpace(b, it.i)
	if i == len(b) {
		it.fail(i, "unexpected end of input")
		return false
	}
	if b[i] == it.close && it.n == 0 {
		it.done, it.end = true, i+1
		return false
	}
	if it.n > 0 {
		if b[i] == it.close {
			it.done, it.end = true, i+1
			return false
		}
		if b[i] != ',' {
			it.fail(i, "expected ',' or '"+string(it.close)+"', got "+describe(b[i]))
			return false
		}
		i = skipSpace(b, i+1)
	}
	if it.close == '}' {
		if i == len(b) || b[i] != '"' {
			it.fail(i, "expected a string key")
			return false
		}
		end, err := skipString(b, i)
		if err != nil {
			it.err, it.done = err, true
			return false
		}
		it.keyOff, it.keyEnd = i, end
		i = skipSpace(b, end)
		if i == len(b) || b[i] != ':' {
			it.fail(i, "expected ':' after an object key")
			return false
		}
		i = skipSpace(b, i+1)
	}
	if i == len(b) {
		it.fail(i, "unexpected end of input")
		return false
	}
	it.i, it.valOff, it.hasVal = i, i, false
	it.n++
	it.pending = true
	return true
}

// SkipValue reads the value Step stopped before; false on a syntax error.
func (it *Iter) SkipValue() bool {
	if !it.pending {
		return !it.done
	}
	it.pending = false
	if it.valid {
		end := skipValid(it.b, it.i)
		it.valEnd, it.hasVal, it.i = end, true, end
		return true
	}
	end, err := skipValue(it.b, it.i, it.depth)
	if err != nil {
		it.err, it.done = err, true
		return false
	}
	it.valEnd, it.hasVal, it.i = end, true, end
	return true
}

// ValueKind is the kind of the value Step stopped before (see Kind).
func (it *Iter) ValueKind() byte {
	if !it.pending {
		return Kind(it.Value())
	}
	return Kind(it.b[it.i:])
}

// Enter returns an Iter over the value Step stopped before, when it is an
// object or an array; ok is false otherwise, and the value is still to be
// read. Iterate the child to its end, then call Leave.
func (it *Iter) Enter() (child Iter, ok bool) {
	if !it.pending {
		return Iter{}, false
	}
	c := it.b[it.i]
	if c != '{' && c != '[' {
		return Iter{}, false
	}
	if it.depth+1 > MaxDepth {
		it.pending = false
		it.fail(it.i, "nested too deeply")
		return Iter{}, false
	}
	return newIter(it.b[it.i:], c, it.depth+1), true
}

// Leave resumes after a value read with Enter. If the child stopped early or
// on an error, the rest of the value is read, or the error becomes it's.
func (it *Iter) Leave(child *Iter) {
	for !child.done {
		child.Next()
	}
	it.pending = false
	if child.err != nil {
		var se *SyntaxError
		if errors.As(child.err, &se) {
			it.err = &SyntaxError{Offset: it.i + se.Offset, Msg: se.Msg}
		} else {
			it.err = child.err
		}
		it.done = true
		return
	}
	end := it.i + child.end
	it.valEnd, it.hasVal, it.i = end, true, end
}

// Key is the current member's key as it is written, without the quotes:
// decode it with Key or compare it with KeyIs. It is nil for array elements.
func (it *Iter) Key() []byte {
	if it.keyEnd == 0 {
		return nil
	}
	return it.b[it.keyOff+1 : it.keyEnd-1]
}

// Value is the current member's value or the current element, exactly as
// written, without surrounding whitespace. It is nil between Step and the
// reading of the value.
func (it *Iter) Value() []byte {
	if !it.hasVal {
		return nil
	}
	return it.b[it.valOff:it.valEnd]
}

// Offset is where the current value starts in the slice the Iter was made from.
func (it *Iter) Offset() int { return it.valOff }

// KeyOffset is where the current member's key starts (its opening quote) in
// the slice the Iter was made from; for array elements it is Offset.
func (it *Iter) KeyOffset() int {
	if it.close != '}' {
		return it.valOff
	}
	return it.keyOff
}

// Index is the position of the current member or element, from 0.
func (it *Iter) Index() int { return it.n - 1 }

// Err is the syntax error that stopped the iteration, if any.
func (it *Iter) Err() error { return it.err }

// End is the offset just past the closing bracket, once Next has returned
// false without an error; 0 before that.
func (it *Iter) End() int { return it.end }

// Get returns the value of the last member named name in the object v holds,
// as encoding/json would when decoding into a map (the last duplicate wins).
// ok is false when v is not a valid object or has no such member.
func Get(v []byte, name string) (val []byte, ok bool) {
	it := Members(v)
	for it.Next() {
		if KeyIs(it.Key(), name) {
			val, ok = it.Value(), true
		}
	}
	if it.Err() != nil {
		return nil, false
	}
	return val, ok
}

// Path follows keys through nested objects from v, taking the last duplicate
// at each step as Get does. It reads v once: a member on the path is walked
// into instead of being skipped and walked again.
func Path(v []byte, keys ...string) ([]byte, bool) {
	if len(keys) == 0 {
		return Trim(v), Valid(v)
	}
	i := skipSpace(v, 0)
	if i == len(v) || v[i] != '{' {
		return nil, false
	}
	_, val, ok, err := pathAt(v, i, keys, 1)
	if err != nil || !ok {
		return nil, false
	}
	return val, true
}

// pathAt walks the object at b[i] == '{' and returns its end, and the value
// at keys inside it. depth is the object's nesting depth.
func pathAt(b []byte, i int, keys []string, depth int) (end int, val []byte, ok bool, err error) {
	if depth > MaxDepth {
		return 0, nil, false, &SyntaxError{Offset: i, Msg: "nested too deeply"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil, false, nil
	}
	for {
		if i == len(b) || b[i] != '"' {
			return 0, nil, false, &SyntaxError{Offset: i, Msg: "expected a string key"}
		}
		kend, err := skipString(b, i)
		if err != nil {
			return 0, nil, false, err
		}
		match := KeyIs(b[i+1:kend-1], keys[0])
		i = skipSpace(b, kend)
		if i == len(b) || b[i] != ':' {
			return 0, nil, false, &SyntaxError{Offset: i, Msg: "expected ':' after an object key"}
		}
		i = skipSpace(b, i+1)
		if i == len(b) {
			return 0, nil, false, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
		}
		var vend int
		switch {
		case match && len(keys) > 1 && b[i] == '{':
			var sub []byte
			var found bool
			if vend, sub, found, err = pathAt(b, i, keys[1:], depth+1); err != nil {
				return 0, nil, false, err
			}
			// A later duplicate replaces an earlier one, found or not.
			val, ok = sub, found
		default:
			if vend, err = skipValue(b, i, depth); err != nil {
				return 0, nil, false, err
			}
			if match {
				val, ok = nil, false
				if len(keys) == 1 {
					val, ok = b[i:vend], true
				}
			}
		}
		i = skipSpace(b, vend)
		if i == len(b) {
			return 0, nil, false, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, val, ok, nil
		default:
			return 0, nil, false, &SyntaxError{Offset: i, Msg: "expected ',' or '}'"}
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first byte at or after i in b that is
// not JSON whitespace, or len(b). Callers that cut or splice members use it to
// find the comma or bracket after a value.
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }

func skipSpace(b []byte, i int) int {
	// Compact documents (stored ones, most message bodies) have no space
	// between tokens at all.
	if i < len(b) && b[i] > ' ' {
		return i
	}
	// Pretty-printed bodies indent with runs of spaces: take 8 at a time.
	for i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:]) == spaces8 {
		i += 8
	}
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// Eight-byte words for scanning a word at a time (SWAR).
const (
	spaces8 = 0x2020202020202020
	ones8   = 0x0101010101010101
	highs8  = 0x8080808080808080
	quotes8 = 0x2222222222222222
	slash8  = 0x5C5C5C5C5C5C5C5C
)

// special8 reports whether any byte of x is a quote, a backslash or below
// 0x20: the bytes a string scan must stop at.
func special8(x uint64) bool {
	q := x ^ quotes8
	s := x ^ slash8
	return ((q-ones8)&^q|(s-ones8)&^s|(x-spaces8)&^x)&highs8 != 0
}

func describe(c byte) string {
	if c < 0x20 || c >= 0x7f {
		return "byte 0x" + strconv.FormatUint(uint64(c), 16)
	}
	return strconv.QuoteRune(rune(c))
}

// skipValue returns the offset just past the value starting at b[i], which is
// not whitespace. depth is how many containers enclose it.
func skipValue(b []byte, i, depth int) (int, error) {
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		return skipContainer(b, i, depth)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	default:
		return 0, &SyntaxError{Offset: i, Msg: "unexpected " + describe(c) + " at the start of a value"}
	}
}

// skipValid returns the offset just past the value starting at b[i], for
// input known to be valid: strings by their closing quote alone
// (skipValidString), containers by counting brackets outside strings, scalars
// up to the next delimiter. Nothing is checked, which is what makes walking
// stored documents cheap; on invalid input the offset is unspecified but
// never past len(b).
func skipValid(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipValidString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			// Most bytes of a container are neither brackets nor quotes:
			// one table load each, not a switch.
			c := validStop[b[i]]
			if c == 0 {
				i++
				continue
			}
			switch c {
			case '"':
				i = skipValidString(b, i)
				continue
			case '{':
				depth++
			case '}':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && validScalar[b[i]] {
		i++
	}
	return i
}

// validStop maps the bytes skipValid stops at inside a container: a quote to
// '"', an opening bracket to '{' and a closing one to '}'. Every other byte
// maps to 0.
var validStop = func() (t [256]byte) {
	t['"'] = '"'
	t['{'], t['['] = '{', '{'
	t['}'], t[']'] = '}', '}'
	return t
}()

// validScalar marks the bytes a scalar (number or literal) of valid input
// may continue with: every byte but the delimiters that can follow a value.
var validScalar = func() (t [256]bool) {
	for c := range t {
		t[c] = true
	}
	for _, c := range []byte{',', '}', ']', ' ', '\t', '\r', '\n'} {
		t[c] = false
	}
	return t
}()

// skipValidString returns the offset just past the string starting at
// b[i] == '"', for a string known to be valid, or len(b) for one that is not
// terminated. Escapes and control characters are not checked: a backslash
// skips the byte after it, and the first other quote ends the string. A
// table-driven byte loop, since most strings in stored documents are a few
// bytes long.
func skipValidString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		if !strPlain[b[i]] {
			switch b[i] {
			case '"':
				return i + 1
			case '\\':
				i++
			}
		}
	}
	return len(b)
}

func skipContainer(b []byte, i, depth int) (int, error) {
	if depth+1 > MaxDepth {
		return 0, &SyntaxError{Offset: i, Msg: "nested too deeply"}
	}
	closer := byte('}')
	if b[i] == '[' {
		closer = ']'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1, nil
	}
	for {
		if i == len(b) {
			return 0, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
		}
		if closer == '}' {
			if b[i] != '"' {
				return 0, &SyntaxError{Offset: i, Msg: "expected a string key, got " + describe(b[i])}
			}
			end, err := skipString(b, i)
			if err != nil {
				return 0, err
			}
			i = skipSpace(b, end)
			if i == len(b) {
				return 0, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
			}
			if b[i] != ':' {
				return 0, &SyntaxError{Offset: i, Msg: "expected ':' after an object key, got " + describe(b[i])}
			}
			i = skipSpace(b, i+1)
			if i == len(b) {
				return 0, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
			}
		}
		end, err := skipValue(b, i, depth+1)
		if err != nil {
			return 0, err
		}
		i = skipSpace(b, end)
		if i == len(b) {
			return 0, &SyntaxError{Offset: i, Msg: "unexpected end of input"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case closer:
			return i + 1, nil
		default:
			return 0, &SyntaxError{Offset: i, Msg: "expected ',' or '" + string(closer) + "', got " + describe(b[i])}
		}
	}
}

// strPlain marks the bytes a string may hold as they are: everything from
// 0x20 up, except the quote and the backslash. Bytes of invalid UTF-8 are
// plain, as they are to encoding/json's scanner.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString returns the offset just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	start := i
	i++
	for {
		// The hot loop: most of a Chef message is plain string bytes.
		for i+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		if i == len(b) {
			return 0, &SyntaxError{Offset: i, Msg: "unexpected end of input in the string starting at byte " + strconv.Itoa(start)}
		}
		switch c := b[i]; c {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 == len(b) {
				return 0, &SyntaxError{Offset: i + 1, Msg: "unexpected end of input in an escape"}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k == len(b) {
						return 0, &SyntaxError{Offset: i + k, Msg: "unexpected end of input in a \\u escape"}
					}
					if !isHex(b[i+k]) {
						return 0, &SyntaxError{Offset: i + k, Msg: "invalid " + describe(b[i+k]) + " in a \\u escape"}
					}
				}
				i += 6
			default:
				return 0, &SyntaxError{Offset: i + 1, Msg: "invalid escape \\" + string(rune(b[i+1]))}
			}
		default:
			return 0, &SyntaxError{Offset: i, Msg: "control character " + describe(c) + " in a string"}
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i == len(b):
		return 0, &SyntaxError{Offset: i, Msg: "unexpected end of input in a number"}
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, &SyntaxError{Offset: i, Msg: "invalid " + describe(b[i]) + " in a number"}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i == len(b) || !isDigit(b[i]) {
			return 0, numberError(b, i)
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || !isDigit(b[i]) {
			return 0, numberError(b, i)
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func numberError(b []byte, i int) error {
	if i == len(b) {
		return &SyntaxError{Offset: i, Msg: "unexpected end of input in a number"}
	}
	return &SyntaxError{Offset: i, Msg: "invalid " + describe(b[i]) + " in a number"}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k == len(b) {
			return 0, &SyntaxError{Offset: i + k, Msg: "unexpected end of input in " + lit}
		}
		if b[i+k] != lit[k] {
			return 0, &SyntaxError{Offset: i + k, Msg: "invalid " + describe(b[i+k]) + " in " + lit}
		}
	}
	return i + len(lit), nil
}
