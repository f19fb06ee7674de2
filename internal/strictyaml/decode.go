package strictyaml

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

const (
	strTag   = "!!str"
	nullTag  = "!!null"
	mergeTag = "!!merge"
)

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	setDefaulterType    = reflect.TypeFor[interface{ SetDefaults() }]()
	validatorType       = reflect.TypeFor[interface{ Validate() error }]()
)

// mode says where a scalar comes from.
type mode uint8

const (
	// modeExpand is a value written in the document: ${VAR} is expanded.
	modeExpand mode = iota
	// modeSecret is the content of a *_file secret: used as is, and never
	// shown in a message.
	modeSecret
	// modeKey is a mapping key: used as is.
	modeKey
)

type decoder struct {
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)

	errs    []error
	structs map[reflect.Type]*structInfo
	// active holds the anchored nodes being decoded, to stop recursive
	// aliases.
	active map[*yaml.Node]bool
	// lines maps decoded key paths to their line, to give Validate problems
	// a line.
	lines map[string]int
	// visited holds the pointers seen by the validation walk.
	visited map[visit]bool

	steps, maxSteps int
	aborted         bool

	// unread holds the keys whose decoding failed, for Decode.
	unread map[string]bool
}

type visit struct {
	ptr uintptr
	typ reflect.Type
}

// parseDocument parses data into a node tree and returns the root value
// node (nil for an empty document) and a syntax or multi-document problem.
func parseDocument(data []byte) (*yaml.Node, *KeyError) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(err, data)
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return root, nil
	case err != nil:
		return root, syntaxError(err, nil) // in a second document: yaml.v3's line
	default:
		return root, &KeyError{Line: next.Line, Err: fmt.Errorf(
			"a second YAML document starts on line %d; put all settings in one document", next.Line)}
	}
}

func syntaxError(err error, data []byte) *KeyError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	_, problem, _ := splitLine(msg)
	if line, col, ok := locate(data, problem); ok {
		return &KeyError{Line: line, Err: fmt.Errorf("invalid YAML on line %d, column %d: %s", line, col, problem)}
	}
	if line, rest, ok := splitLine(msg); ok {
		return &KeyError{Line: line, Err: fmt.Errorf("invalid YAML on line %d: %s", line, rest)}
	}
	return &KeyError{Err: fmt.Errorf("invalid YAML: %s", msg)}
}

// maxLocate bounds the documents whose syntax errors locate looks for: it
// parses a prefix per line, which is quadratic in the size. Config files
// are far smaller.
const maxLocate = 64 << 10

// locate finds the line and column (1-based, in characters; the start of
// the token the error is found in) of a syntax error whose message is
// problem. yaml.v3 names the line where the
// construct around the error starts (often the line before the bad one,
// or none for line 1), not the error's; the error is where the shortest
// prefix of the document that fails with the same problem ends. ok is
// false when no prefix does, or the document is too large to look.
func locate(data []byte, problem string) (line, col int, ok bool) {
	if len(data) == 0 || len(data) > maxLocate {
		return 0, 0, false
	}
	failsSame := func(n int) bool { return firstProblem(data[:n]) == problem }
	for start, line := 0, 1; start < len(data); line++ {
		end := len(data)
		if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		if failsSame(end) {
			col := 1
			for c := start + 1; c <= end; c++ {
				if failsSame(c) {
					// The error shows at the end of the token it is
					// found in (an alias's name): name the token's start.
					tok := c - 1
					for tok > start && data[tok] != ' ' && data[tok] != '\t' && data[tok-1] != ' ' && data[tok-1] != '\t' {
						tok--
					}
					col = utf8.RuneCount(data[start:tok]) + 1
					break
				}
			}
			return line, col, true
		}
		start = end
	}
	return 0, 0, false
}

// firstProblem is the syntax problem of data's first document, without
// its line, or "" when it parses.
func firstProblem(data []byte) string {
	var doc yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc)
	if err == nil || errors.Is(err, io.EOF) {
		return ""
	}
	_, problem, _ := splitLine(strings.TrimPrefix(err.Error(), "yaml: "))
	return problem
}

// splitLine splits "line 3: message" into 3 and "message".
func splitLine(msg string) (int, string, bool) {
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0, msg, false
	}
	num, text, ok := strings.Cut(rest, ": ")
	if !ok {
		return 0, msg, false
	}
	line, err := strconv.Atoi(num)
	if err != nil {
		return 0, msg, false
	}
	return line, text, true
}

// start sets the work budget: aliases can make a small document expand
// into a huge one, so decoding stops after a number of steps proportional
// to the document's size.
func (d *decoder) start(root *yaml.Node) {
	d.maxSteps = 100_000 + 10*countNodes(root)
}

func countNodes(n *yaml.Node) int {
	c := 1
	for _, child := range n.Content {
		c += countNodes(child)
	}
	return c
}

func (d *decoder) fail(path string, n *yaml.Node, err error) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &KeyError{Key: path, Line: line, Err: err})
}

func (d *decoder) failf(path string, n *yaml.Node, format string, args ...any) {
	d.fail(path, n, fmt.Errorf(format, args...))
}

// record remembers the line where a key path is written.
func (d *decoder) record(path string, line int) {
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = line
	}
}

// deref follows aliases and refuses an alias to a value being decoded.
func (d *decoder) deref(n *yaml.Node, path string) (*yaml.Node, bool) {
	alias := n
	for i := 0; n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 1000 {
			d.failf(path, alias, "invalid alias *%s", alias.Value)
			return nil, false
		}
		n = n.Alias
	}
	if d.active[n] {
		d.failf(path, alias, "alias *%s refers to a value that contains it; aliases cannot be recursive", alias.Value)
		return nil, false
	}
	return n, true
}

// derefKey follows the aliases of a mapping key.
func derefKey(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i <= 1000; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == nullTag
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == mergeTag
}

// describe names what a node is, for "expected X, got Y".
func describe(n *yaml.Node, m mode) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a sequence"
	case n.Kind != yaml.ScalarNode:
		return "an invalid node"
	case isNull(n):
		return "null"
	default:
		return quoted(n.Value, m)
	}
}

// quoted shows a scalar in a message, unless it is a secret.
func quoted(s string, m mode) string {
	if m == modeSecret {
		return "the file's content (not shown)"
	}
	return strconv.Quote(clip(s))
}

// keyKind names the type of a key that is not a string.
func keyKind(k *yaml.Node) string {
	if k.Kind != yaml.ScalarNode {
		return describe(k, modeKey)
	}
	switch k.ShortTag() {
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case nullTag:
		return "null"
	case "!!timestamp":
		return "a timestamp"
	default:
		return "a " + strings.TrimPrefix(k.ShortTag(), "!!")
	}
}

// text returns a scalar's text after ${VAR} expansion. Problems are
// reported at path and false is returned.
func (d *decoder) text(n *yaml.Node, path string, m mode) (string, bool) {
	if isNull(n) {
		return "", true
	}
	if m != modeExpand {
		return n.Value, true
	}
	s, errs := expandEnv(n.Value, d.lookupEnv)
	for _, err := range errs {
		d.fail(path, n, err)
	}
	return s, len(errs) == 0
}

// scalar returns the text of a scalar that must not be null.
func (d *decoder) scalar(n *yaml.Node, path string, m mode, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.failf(path, n, "expected %s, got %s", what, describe(n, m))
		return "", false
	}
	if isNull(n) {
		d.failf(path, n, "expected %s, got null (remove the key to keep the default)", what)
		return "", false
	}
	return d.text(n, path, m)
}

// tick counts one step of work, and reports false once the budget set by
// start is spent.
func (d *decoder) tick(path string, n *yaml.Node) bool {
	if d.aborted {
		return false
	}
	d.steps++
	if d.steps > d.maxSteps {
		d.aborted = true
		d.failf(path, n, "the document is too large once its aliases are expanded; use fewer aliases")
		return false
	}
	return true
}

// decodeValue decodes node n into v, which must be addressable.
func (d *decoder) decodeValue(n *yaml.Node, v reflect.Value, path string, m mode) {
	if !d.tick(path, n) {
		return
	}
	n, ok := d.deref(n, path)
	if !ok {
		return
	}
	if n.Anchor != "" {
		d.active[n] = true
		defer delete(d.active, n)
	}
	d.decodeInto(n, v, path, m)
}

// decodeInto decodes n, which is not an alias, into v.
func (d *decoder) decodeInto(n *yaml.Node, v reflect.Value, path string, m mode) {
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if isNull(n) {
			v.SetZero()
			return
		}
		if v.IsNil() {
			p := reflect.New(t.Elem())
			setDefaults(p)
			v.Set(p)
		}
		d.decodeInto(n, v.Elem(), path, m)
		return
	}
	if tu, ok := textUnmarshaler(v); ok {
		if n.Kind == yaml.ScalarNode {
			text, ok := d.text(n, path, m)
			if !ok {
				return
			}
			if err := tu.UnmarshalText([]byte(text)); err != nil {
				d.fail(path, n, err)
			}
			return
		}
		if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
			d.failf(path, n, "expected a string, got %s", describe(n, m))
			return
		}
	}
	if t == durationType {
		d.decodeScalar(n, v, path, m, "a duration", (*decoder).decodeDuration)
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		d.decodeAny(n, v, path, m)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path, m)
	case reflect.Array:
		d.decodeArray(n, v, path, m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.failf(path, n, "expected a string, got %s", describe(n, m))
			return
		}
		if s, ok := d.text(n, path, m); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		d.decodeScalar(n, v, path, m, "true or false", (*decoder).decodeBool)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.decodeScalar(n, v, path, m, "an integer", (*decoder).decodeInt)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		d.decodeScalar(n, v, path, m, "an integer", (*decoder).decodeUint)
	case reflect.Float32, reflect.Float64:
		d.decodeScalar(n, v, path, m, "a number", (*decoder).decodeFloat)
	default:
		d.failf(path, n, "strictyaml: cannot decode into Go type %s", t)
	}
}

// decodeScalar decodes a scalar that must not be null with set, which
// parses its text s into v; what names the expected value in messages.
func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string, m mode, what string,
	set func(d *decoder, n *yaml.Node, v reflect.Value, path string, m mode, s string)) {
	if s, ok := d.scalar(n, path, m, what); ok {
		set(d, n, v, path, m, s)
	}
}

func textUnmarshaler(v reflect.Value) (encoding.TextUnmarshaler, bool) {
	if !v.CanAddr() {
		return nil, false
	}
	p := v.Addr()
	if !p.CanInterface() || !p.Type().Implements(textUnmarshalerType) {
		return nil, false
	}
	return p.Interface().(encoding.TextUnmarshaler), true
}

// setDefaults calls SetDefaults on a freshly allocated value, given by
// pointer, when it has one.
func setDefaults(p reflect.Value) {
	if p.CanInterface() && p.Type().Implements(setDefaulterType) {
		p.Interface().(interface{ SetDefaults() }).SetDefaults()
	}
}

func (d *decoder) decodeBool(n *yaml.Node, v reflect.Value, path string, m mode, s string) {
	switch {
	case strings.EqualFold(s, "true"):
		v.SetBool(true)
	case strings.EqualFold(s, "false"):
		v.SetBool(false)
	default:
		hint := ""
		switch strings.ToLower(s) {
		case "yes", "y", "on":
			hint = "; use true instead"
		case "no", "n", "off":
			hint = "; use false instead"
		}
		d.failf(path, n, "expected true or false, got %s%s", quoted(s, m), hint)
	}
}

func (d *decoder) decodeInt(n *yaml.Node, v reflect.Value, path string, m mode, s string) {
	bits := v.Type().Bits()
	lo, hi := int64(math.MinInt64)>>(64-bits), int64(math.MaxInt64)>>(64-bits)
	neg, mag, err := parseInteger(s)
	var i int64
	if err == nil {
		switch {
		case neg && mag > 1<<63, !neg && mag > math.MaxInt64:
			err = strconv.ErrRange
		case neg:
			i = -int64(mag) // also right for 1<<63
		default:
			i = int64(mag)
		}
	}
	switch {
	case errors.Is(err, strconv.ErrRange), err == nil && v.OverflowInt(i):
		d.failf(path, n, "%s is out of range (must be from %d to %d)", number(s, m), lo, hi)
	case err != nil:
		d.intError(path, n, s, m, err)
	default:
		v.SetInt(i)
	}
}

func (d *decoder) decodeUint(n *yaml.Node, v reflect.Value, path string, m mode, s string) {
	hi := uint64(math.MaxUint64) >> (64 - v.Type().Bits())
	neg, u, err := parseInteger(s)
	if err == nil && neg && u != 0 {
		err = strconv.ErrRange
	}
	switch {
	case errors.Is(err, strconv.ErrRange), err == nil && v.OverflowUint(u):
		d.failf(path, n, "%s is out of range (must be from 0 to %d)", number(s, m), hi)
	case err != nil:
		d.intError(path, n, s, m, err)
	default:
		v.SetUint(u)
	}
}

func (d *decoder) intError(path string, n *yaml.Node, s string, m mode, err error) {
	if errors.Is(err, errLeadingZero) && m != modeSecret {
		sign := ""
		if strings.HasPrefix(s, "-") {
			sign = "-"
		}
		digits := strings.TrimLeft(strings.TrimLeft(s, "+-"), "0")
		if digits == "" {
			digits = "0"
		}
		d.failf(path, n, "ambiguous number %q: write %s0o%s for octal or %s%s for decimal", s, sign, digits, sign, digits)
		return
	}
	d.failf(path, n, "expected an integer, got %s", quoted(s, m))
}

var errLeadingZero = errors.New("leading zero")

// parseInteger parses a YAML 1.2 integer: an optional sign, then decimal
// digits, or 0x hex, 0o octal or 0b binary digits. A decimal number with a
// leading zero (0644) is refused, because YAML 1.1 reads it as octal and
// YAML 1.2 as decimal.
func parseInteger(s string) (neg bool, mag uint64, err error) {
	t := s
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	base := 10
	if len(t) > 2 && t[0] == '0' {
		switch t[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 10 {
			t = t[2:]
		}
	}
	if base == 10 && len(t) > 1 && t[0] == '0' && strings.Trim(t, "0123456789") == "" {
		return neg, 0, errLeadingZero
	}
	mag, err = strconv.ParseUint(t, base, 64)
	return neg, mag, err
}

// number shows a number-like scalar in a message, unless it is a secret.
func number(s string, m mode) string {
	if m == modeSecret {
		return "the file's content (not shown)"
	}
	return clip(s)
}

func (d *decoder) decodeFloat(n *yaml.Node, v reflect.Value, path string, m mode, s string) {
	switch s {
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		v.SetFloat(math.Inf(1))
		return
	case "-.inf", "-.Inf", "-.INF":
		v.SetFloat(math.Inf(-1))
		return
	case ".nan", ".NaN", ".NAN":
		v.SetFloat(math.NaN())
		return
	}
	f, err := strconv.ParseFloat(s, v.Type().Bits())
	switch {
	case errors.Is(err, strconv.ErrRange):
		d.failf(path, n, "%s is out of range", number(s, m))
	case err != nil:
		d.failf(path, n, "expected a number, got %s", quoted(s, m))
	default:
		v.SetFloat(f)
	}
}

func (d *decoder) decodeDuration(n *yaml.Node, v reflect.Value, path string, m mode, s string) {
	dur, err := time.ParseDuration(s)
	if err != nil {
		if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
			d.failf(path, n, "expected a duration, got %s (use a unit, e.g. 10s)", quoted(s, m))
		} else {
			d.failf(path, n, "expected a duration such as 10s or 1m30s, got %s", quoted(s, m))
		}
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.failf(path, n, "expected a mapping, got %s", describe(n, modeExpand))
		return
	}
	if u := unionOf(v); u != nil {
		d.decodeUnion(n, u, path)
		return
	}
	d.decodeFields(n, v, path, "")
}

// decodeFields decodes mapping n into the fields of struct v, leaving out
// the key skip (a union's, which its union has read).
func (d *decoder) decodeFields(n *yaml.Node, v reflect.Value, path, skip string) {
	info := d.structInfo(v.Type(), path, n.Line)
	set := make(map[*field]string) // field -> the key that set it
	for e := range d.scalarKeyed(n, path) {
		k := e.key
		name := k.Value
		kp := keyPath(path, name)
		if k.ShortTag() != strTag {
			d.failf(kp, k, "key must be a string, not %s", keyKind(k))
			continue
		}
		if skip != "" && name == skip {
			continue
		}
		f, isFile := info.byName[name], false
		if f == nil {
			if base, ok := strings.CutSuffix(name, "_file"); ok {
				if bf := info.byName[base]; bf != nil && bf.secret {
					f, isFile = bf, true
				}
			}
		}
		if f == nil {
			d.errs = append(d.errs, &KeyError{Key: kp, Line: k.Line, Err: unknownKey(name, info)})
			continue
		}
		if prev, dup := set[f]; dup {
			d.failf(kp, k, "%s and %s are both set; remove one", prev, name)
			continue
		}
		set[f] = name
		d.record(kp, k.Line)
		fv := v.FieldByIndex(f.index)
		if isFile {
			d.decodeSecretFile(e.val, fv, kp)
			continue
		}
		d.decodeValue(e.val, fv, kp, modeExpand)
	}
}

// decodeSecretFile reads the file named by a <name>_file key into the
// secret field fv.
func (d *decoder) decodeSecretFile(n *yaml.Node, fv reflect.Value, path string) {
	n, ok := d.deref(n, path)
	if !ok {
		return
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.failf(path, n, "expected a file path, got %s", describe(n, modeExpand))
		return
	}
	name, ok := d.text(n, path, modeExpand)
	if !ok {
		return
	}
	if name == "" {
		d.failf(path, n, "the file path is empty; give the path of the file that holds the secret")
		return
	}
	data, err := d.readFile(name)
	if err != nil {
		d.fail(path, n, err)
		return
	}
	content := string(data)
	if s, ok := strings.CutSuffix(content, "\r\n"); ok {
		content = s
	} else {
		content = strings.TrimSuffix(content, "\n")
	}
	secret := &yaml.Node{Kind: yaml.ScalarNode, Tag: strTag, Value: content, Line: n.Line, Column: n.Column}
	d.decodeInto(secret, fv, path, modeSecret)
}

// collection reports whether n is a node of kind (what, e.g. "a mapping")
// whose items are to be decoded into v, a map or a slice. A null n empties v,
// defaults included; any other kind is reported at path. In either case there
// is nothing more to decode.
func (d *decoder) collection(n *yaml.Node, v reflect.Value, path string, kind yaml.Kind, what string, m mode) bool {
	if isNull(n) {
		v.SetZero()
		return false
	}
	if n.Kind != kind {
		d.failf(path, n, "expected %s, got %s", what, describe(n, m))
		return false
	}
	return true
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if !d.collection(n, v, path, yaml.MappingNode, "a mapping", modeExpand) {
		return
	}
	t := v.Type()
	mv := reflect.MakeMapWithSize(t, len(n.Content)/2)
	for e := range d.scalarKeyed(n, path) {
		k := e.key
		if isNull(k) {
			d.failf(path, k, "key must be a string, not %s", keyKind(k))
			continue
		}
		kp := keyPath(path, k.Value)
		d.record(kp, k.Line)
		kv := reflect.New(t.Key()).Elem()
		before := len(d.errs)
		d.decodeInto(k, kv, kp, modeKey)
		if len(d.errs) > before {
			continue
		}
		ev := reflect.New(t.Elem())
		setDefaults(ev)
		d.decodeValue(e.val, ev.Elem(), kp, modeExpand)
		mv.SetMapIndex(kv, ev.Elem())
	}
	v.Set(mv)
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string, m mode) {
	if !d.collection(n, v, path, yaml.SequenceNode, "a sequence", m) {
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	d.decodeItems(n, s, path)
	v.Set(s)
}

func (d *decoder) decodeArray(n *yaml.Node, v reflect.Value, path string, m mode) {
	if n.Kind != yaml.SequenceNode {
		d.failf(path, n, "expected a sequence of %d items, got %s", v.Len(), describe(n, m))
		return
	}
	if len(n.Content) != v.Len() {
		d.failf(path, n, "expected a sequence of %d items, got %d items", v.Len(), len(n.Content))
		return
	}
	d.decodeItems(n, v, path)
}

// decodeItems decodes the items of sequence n into as many elements of v (a
// slice or an array), each from its zero value and its defaults.
func (d *decoder) decodeItems(n *yaml.Node, v reflect.Value, path string) {
	for i, item := range n.Content {
		ev := v.Index(i)
		ev.SetZero()
		setDefaults(ev.Addr())
		ip := indexPath(path, i)
		d.record(ip, item.Line)
		d.decodeValue(item, ev, ip, modeExpand)
	}
}

// decodeAny decodes n generically (as yaml.Node.Decode does) into an empty
// interface, after expanding ${VAR} in its scalar values.
func (d *decoder) decodeAny(n *yaml.Node, v reflect.Value, path string, m mode) {
	if v.NumMethod() != 0 {
		d.failf(path, n, "strictyaml: cannot decode into Go type %s (only empty interfaces are supported)", v.Type())
		return
	}
	if isNull(n) {
		v.SetZero()
		return
	}
	before := len(d.errs)
	c := d.expandCopy(n, path, m, make(map[*yaml.Node]*yaml.Node))
	if len(d.errs) > before {
		return
	}
	var x any
	if err := c.Decode(&x); err != nil {
		d.yamlErrors(path, n, err)
		return
	}
	if x == nil {
		v.SetZero()
		return
	}
	v.Set(reflect.ValueOf(x))
}

// expandCopy copies the node tree under n with ${VAR} expanded in scalar
// values (not keys). Anchors and aliases keep their structure.
func (d *decoder) expandCopy(n *yaml.Node, path string, m mode, memo map[*yaml.Node]*yaml.Node) *yaml.Node {
	if c, ok := memo[n]; ok {
		return c
	}
	c := new(yaml.Node)
	*c = *n
	memo[n] = c
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias != nil {
			c.Alias = d.expandCopy(n.Alias, path, m, memo)
		}
	case yaml.ScalarNode:
		if m != modeExpand || isNull(n) {
			break
		}
		if s, ok := d.text(n, path, m); ok && s != n.Value {
			c.Value = s
			const fixed = yaml.TaggedStyle | yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle
			if n.Style&fixed == 0 {
				c.Tag = "" // a plain scalar: resolve the expanded text again
			}
		}
	default:
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, child := range n.Content {
			switch {
			case n.Kind != yaml.MappingNode:
				c.Content[i] = d.expandCopy(child, indexPath(path, i), m, memo)
			case i%2 == 0:
				c.Content[i] = child // keys are not expanded
			default:
				kp := path
				if k := derefKey(n.Content[i-1]); k.Kind == yaml.ScalarNode {
					kp = keyPath(path, k.Value)
				}
				c.Content[i] = d.expandCopy(child, kp, m, memo)
			}
		}
	}
	return c
}

// yamlErrors reports an error from yaml.Node.Decode.
func (d *decoder) yamlErrors(path string, n *yaml.Node, err error) {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, msg := range te.Errors {
			line, text, ok := splitLine(msg)
			if !ok {
				line = n.Line
			}
			d.errs = append(d.errs, &KeyError{Key: path, Line: line, Err: errors.New(text)})
		}
		return
	}
	d.fail(path, n, errors.New(strings.TrimPrefix(err.Error(), "yaml: ")))
}

// entry is one key and value of a mapping, after merge keys are applied,
// or (when err is set) a problem to report at this point of the mapping.
type entry struct {
	key, val *yaml.Node
	err      error
}

// entries returns the keys and values of mapping m in document order, with
// merge keys (<<) applied: explicit keys win over merged ones, and earlier
// merged mappings win over later ones. A key given twice is reported and
// only its first value is kept. Problems come back as entries, so that the
// caller reports them in document order.
func (d *decoder) entries(m *yaml.Node, path string) []entry {
	return d.flatten(m, path, true)
}

// scalarKeyed yields the entries of mapping m whose key is a scalar, once it
// has reported the others (duplicate keys, keys that are mappings or
// sequences). It counts a step of work per entry and stops when the budget
// is spent.
func (d *decoder) scalarKeyed(m *yaml.Node, path string) iter.Seq[entry] {
	return func(yield func(entry) bool) {
		for _, e := range d.entries(m, path) {
			if !d.tick(path, m) {
				return
			}
			if e.err != nil {
				d.errs = append(d.errs, e.err)
				continue
			}
			if e.key.Kind != yaml.ScalarNode {
				d.failf(path, e.key, "key must be a string, not %s", keyKind(e.key))
				continue
			}
			if !yield(e) {
				return
			}
		}
	}
}

func (d *decoder) flatten(m *yaml.Node, path string, report bool) []entry {
	first := make(map[string]int) // scalar key -> index of its first occurrence
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := derefKey(m.Content[i])
		if k.Kind != yaml.ScalarNode || isMergeKey(k) {
			continue
		}
		if _, ok := first[k.Value]; !ok {
			first[k.Value] = i
		}
	}
	var out []entry
	merged := make(map[string]bool)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, val := derefKey(m.Content[i]), m.Content[i+1]
		if isMergeKey(k) {
			for _, e := range d.mergeSources(val, path, report) {
				if e.err == nil && e.key.Kind == yaml.ScalarNode {
					if _, explicit := first[e.key.Value]; explicit || merged[e.key.Value] {
						continue
					}
					merged[e.key.Value] = true
				}
				out = append(out, e)
			}
			continue
		}
		if k.Kind == yaml.ScalarNode && first[k.Value] != i {
			if report {
				out = append(out, entry{err: &KeyError{Key: keyPath(path, k.Value), Line: k.Line, Err: fmt.Errorf(
					"duplicate key (first given on line %d); remove one", derefKey(m.Content[first[k.Value]]).Line)}})
			}
			continue
		}
		out = append(out, entry{key: k, val: val})
	}
	return out
}

// mergeSources returns the entries merged by a << key whose value is v.
// Duplicate keys inside a merged mapping are reported only when the mapping
// is written in place; one reached through an alias is reported where its
// anchor is decoded.
func (d *decoder) mergeSources(v *yaml.Node, path string, report bool) []entry {
	mpath := keyPath(path, "<<")
	report = report && v.Kind != yaml.AliasNode
	v, ok := d.deref(v, mpath)
	if !ok {
		return d.takeLastErr()
	}
	switch v.Kind {
	case yaml.MappingNode:
		return d.flattenMerged(v, path, report)
	case yaml.SequenceNode:
		var out []entry
		for _, item := range v.Content {
			itemReport := report && item.Kind != yaml.AliasNode
			it, ok := d.deref(item, mpath)
			switch {
			case !ok:
				out = append(out, d.takeLastErr()...)
			case it.Kind != yaml.MappingNode:
				out = append(out, entry{err: &KeyError{Key: mpath, Line: it.Line, Err: fmt.Errorf(
					"expected a mapping to merge, got %s", describe(it, modeExpand))}})
			default:
				out = append(out, d.flattenMerged(it, path, itemReport)...)
			}
		}
		return out
	default:
		return []entry{{err: &KeyError{Key: mpath, Line: v.Line, Err: fmt.Errorf(
			"expected a mapping or a sequence of mappings to merge, got %s", describe(v, modeExpand))}}}
	}
}

// takeLastErr removes the last problem reported by deref and returns it as an
// entry, so that it is reported in document order.
func (d *decoder) takeLastErr() []entry {
	last := d.errs[len(d.errs)-1]
	d.errs = d.errs[:len(d.errs)-1]
	return []entry{{err: last}}
}

func (d *decoder) flattenMerged(m *yaml.Node, path string, report bool) []entry {
	d.active[m] = true
	defer delete(d.active, m)
	return d.flatten(m, path, report)
}
