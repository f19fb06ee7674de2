package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var validityCases = []string{
	``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e5`, `1E+5`, `1e-`, `1.5e`, `.5`, `+1`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `nullx`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a":}`,
	`{a:1}`, `{"a":1 "b":2}`, `[1 2]`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"\/"`, "\"a\x01b\"", "\"a\x7fb\"",
	"\"\xff\xfe\"", `"abc`, `"abc\`, `{"a":[1,{"b":null}]}`, ` {"a" : 1 } `, `{} {}`, `[] x`, "\t[\n]\r",
	`{"a":"b","a":"c"}`, `[[[[]]]]`, `1 `, ` "x"`, `"\u12"`, `-01`, `-1.0e+10`, `[-]`, `[true,false,null]`,
}

func TestCheckMatchesEncodingJSON(t *testing.T) {
	for _, c := range validityCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid = %v (%v)", c, got, want, Check([]byte(c)))
		}
	}
}

func TestDepthLimit(t *testing.T) {
	for _, n := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		doc := strings.Repeat("[", n) + strings.Repeat("]", n)
		if got, want := Valid([]byte(doc)), json.Valid([]byte(doc)); got != want {
			t.Errorf("depth %d: Valid %v, json.Valid %v", n, got, want)
		}
		obj := strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
		if got, want := Valid([]byte(obj)), json.Valid([]byte(obj)); got != want {
			t.Errorf("object depth %d: Valid %v, json.Valid %v", n, got, want)
		}
	}
}

func TestSyntaxErrorOffset(t *testing.T) {
	tests := []struct {
		in     string
		offset int
	}{
		{`{"a":1`, 6},
		{`{"a":tru}`, 8},
		{`[1,2,,3]`, 5},
		{`{"node_name": "x"} extra`, 19},
		{``, 0},
	}
	for _, tt := range tests {
		err := Check([]byte(tt.in))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != tt.offset {
			t.Errorf("Check(%q) = %v, want an error at byte %d", tt.in, err, tt.offset)
		}
	}
}

func TestMembersAndElements(t *testing.T) {
	doc := []byte(` { "a" : 1, "b\u0021": [true, {"c": "d"}], "a": "again" } `)
	var keys []string
	var vals []string
	it := Members(doc)
	for it.Next() {
		keys = append(keys, Key(it.Key()))
		vals = append(vals, string(it.Value()))
		if !bytes.Equal(doc[it.Offset():it.Offset()+len(it.Value())], it.Value()) {
			t.Errorf("Offset %d does not locate %q", it.Offset(), it.Value())
		}
		if k := it.KeyOffset(); doc[k] != '"' || !bytes.Equal(doc[k+1:k+1+len(it.Key())], it.Key()) {
			t.Errorf("KeyOffset %d does not locate the key %q", k, it.Key())
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if !reflect.DeepEqual(keys, []string{"a", "b!", "a"}) ||
		!reflect.DeepEqual(vals, []string{`1`, `[true, {"c": "d"}]`, `"again"`}) {
		t.Fatalf("keys %q values %q", keys, vals)
	}
	if doc[it.End()-1] != '}' {
		t.Fatalf("End %d", it.End())
	}
	if v, ok := Get(doc, "a"); !ok || string(v) != `"again"` {
		t.Fatalf("Get a = %s %v; the last duplicate should win", v, ok)
	}
	if v, ok := Path(doc, "b!"); !ok || Kind(v) != Array {
		t.Fatalf("Path = %s", v)
	}
	arr, _ := Get(doc, "b!")
	el := Elements(arr)
	var n int
	for el.Next() {
		n++
	}
	if n != 2 || el.Err() != nil {
		t.Fatalf("%d elements, %v", n, el.Err())
	}
	bad := Members([]byte(`[1]`))
	if bad.Next() || bad.Err() == nil {
		t.Fatal("Members of an array should fail")
	}
	trunc := Members([]byte(`{"a":1,"b":`))
	for trunc.Next() {
	}
	if trunc.Err() == nil {
		t.Fatal("truncated object iterated without error")
	}
}

func TestKindName(t *testing.T) {
	for v, want := range map[string]string{
		` {"a":1}`: "an object",
		`[]`:       "an array",
		`"x"`:      "a string",
		`-1.5`:     "a number",
		`0`:        "a number",
		`true`:     "a boolean",
		`false`:    "a boolean",
		`null`:     "null",
		``:         "",
		`  `:       "",
		`x`:        "",
	} {
		if got := KindName(Kind([]byte(v))); got != want {
			t.Errorf("KindName(Kind(%q)) = %q, want %q", v, got, want)
		}
	}
}

func TestStr(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{`"plain"`, "plain", true},
		{` "spaced" `, "spaced", true},
		{`"esc\"aped\n\u00e9"`, "esc\"aped\né", true},
		{"\"bad\xffutf8\"", "bad\ufffdutf8", true},
		{`"\ud800"`, "\ufffd", true},
		{`5`, "", false},
		{`"unterminated`, "", false},
		{`"a" "b"`, "", false},
	}
	for _, tt := range tests {
		got, ok := Str([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("Str(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if !KeyIs([]byte(`pass\u0077ord`), "password") || KeyIs([]byte("password"), "passwor") {
		t.Fatal("KeyIs")
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t cr\r nul\x00 del\x7f", "é ☃ 𝄞", "bad\xff\xfe", "\u2028\u2029", "<&>"} {
		enc := AppendString(nil, s)
		want, _ := json.Marshal(s)
		// encoding/json escapes <, > and & for HTML; AppendString does not.
		if s == "<&>" {
			want = []byte(`"<&>"`)
		}
		if !bytes.Equal(enc, want) {
			t.Errorf("%q: got %s, encoding/json %s", s, enc, want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, c := range validityCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"node":{"automatic":{"a":[1,2,{"b":"c"}]}},"x":-1.5e3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := Valid(b), json.Valid(b)
		if got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v (%v)", b, got, want, Check(b))
		}
		if !got {
			return
		}
		// Every member and element of a valid document is itself valid, and
		// decodes as encoding/json decodes it.
		var walk func(v []byte)
		walk = func(v []byte) {
			if !json.Valid(v) {
				t.Fatalf("sub-value %q is not valid JSON", v)
			}
			var it Iter
			switch Kind(v) {
			case Object:
				it = Members(v)
				// Walking it as known to be valid yields the same members.
				trusted, checked := ValidMembers(v), Members(v)
				for checked.Next() {
					if !trusted.Next() || !bytes.Equal(trusted.Key(), checked.Key()) || !bytes.Equal(trusted.Value(), checked.Value()) ||
						trusted.KeyOffset() != checked.KeyOffset() || trusted.Offset() != checked.Offset() {
						t.Fatalf("ValidMembers(%q) differs from Members at member %d: %q=%q, want %q=%q",
							v, checked.Index(), trusted.Key(), trusted.Value(), checked.Key(), checked.Value())
					}
				}
				if trusted.Next() || trusted.Err() != nil || trusted.End() != checked.End() {
					t.Fatalf("ValidMembers(%q) ends at %d (%v), Members at %d", v, trusted.End(), trusted.Err(), checked.End())
				}
			case Array:
				it = Elements(v)
			case String:
				s, ok := Str(v)
				var want string
				if err := json.Unmarshal(v, &want); !ok || err != nil || s != want {
					t.Fatalf("Str(%q) = %q %v, encoding/json %q %v", v, s, ok, want, err)
				}
				return
			default:
				return
			}
			for it.Next() {
				if it.Key() != nil {
					k := Key(it.Key())
					if !utf8.ValidString(k) {
						t.Fatalf("key %q decoded to invalid UTF-8", it.Key())
					}
					var want string
					quoted := v[it.KeyOffset() : it.KeyOffset()+len(it.Key())+2]
					if err := json.Unmarshal(quoted, &want); err != nil || k != want || string(KeyBytes(it.Key())) != want {
						t.Fatalf("key %s: Key %q, KeyBytes %q, encoding/json %q %v", quoted, k, KeyBytes(it.Key()), want, err)
					}
				}
				// The value ends where the next comma or bracket begins.
				if end := it.Offset() + len(it.Value()); !bytes.ContainsAny(v[SkipSpace(v, end):][:1], ",]}") {
					t.Fatalf("after the value %q of %q comes %q", it.Value(), v, v[SkipSpace(v, end):])
				}
				walk(it.Value())
			}
			if it.Err() != nil {
				t.Fatalf("iterating valid %q: %v", v, it.Err())
			}
		}
		walk(b)
	})
}

// ValidMembers on invalid input must not panic, whatever it returns.
func FuzzValidMembers(f *testing.F) {
	for _, c := range validityCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		it := ValidMembers(b)
		for it.Next() {
			_ = Key(it.Key())
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "\x00\x1f\"\\", "é\xff", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := AppendString(nil, s)
		var back, want string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%q encoded as invalid %s: %v", s, enc, err)
		}
		std, _ := json.Marshal(s)
		_ = json.Unmarshal(std, &want)
		if back != want {
			t.Fatalf("%q round-tripped to %q, encoding/json to %q", s, back, want)
		}
		if !Valid(enc) {
			t.Fatalf("%s is not valid to Check", enc)
		}
	})
}

// getChain is Path the slow way: Get at each step.
func getChain(v []byte, keys ...string) ([]byte, bool) {
	for _, k := range keys {
		var ok bool
		if v, ok = Get(v, k); !ok {
			return nil, false
		}
	}
	return v, true
}

func FuzzPath(f *testing.F) {
	f.Add([]byte(`{"node":{"automatic":{"chef_packages":{"chef":{"version":"18.1"}}}}}`), "node", "automatic")
	f.Add([]byte(`{"a":{"b":1},"a":{"c":2}}`), "a", "b")
	f.Add([]byte(`{"a":{"b":1},"a":5,"a":{"b":[2]}}`), "a", "b")
	f.Add([]byte(`{"a":{"b":{"b":{}}}}`), "a", "b")
	f.Fuzz(func(t *testing.T, doc []byte, k1, k2 string) {
		for _, keys := range [][]string{{k1}, {k1, k2}, {k1, k2, k1}} {
			got, ok := Path(doc, keys...)
			want, wok := getChain(doc, keys...)
			if ok != wok || string(got) != string(want) {
				t.Fatalf("Path(%s, %q) = %s %v; Get chain %s %v", doc, keys, got, ok, want, wok)
			}
		}
	})
}

// deepWalk reads the container it iterates with Step and Enter all the way
// down, and returns each value's bytes in document order.
func deepWalk(it *Iter, out *[]string) {
	for it.Step() {
		if child, ok := it.Enter(); ok {
			deepWalk(&child, out)
			it.Leave(&child)
		} else {
			it.SkipValue()
		}
		*out = append(*out, string(it.Value()))
	}
}

func flatWalk(it *Iter, out *[]string) {
	for it.Next() {
		v := it.Value()
		var child Iter
		switch Kind(v) {
		case Object:
			child = Members(v)
		case Array:
			child = Elements(v)
		}
		if child.b != nil {
			flatWalk(&child, out)
		}
		*out = append(*out, string(v))
	}
}

func FuzzStepEnter(f *testing.F) {
	for _, c := range validityCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"a":[1,{"b":[]}],"c":{"d":"e"}}`))
	f.Add([]byte(`[[[],{}],{"x":[{"y":1},]}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var it Iter
		switch Kind(b) {
		case Object:
			it = Members(b)
		case Array:
			it = Elements(b)
		default:
			return
		}
		flat := it
		var deep, shallow []string
		deepWalk(&it, &deep)
		flatWalk(&flat, &shallow)
		trailing := len(Trim(b[min(it.End(), len(b)):]))
		if (it.Err() == nil && trailing == 0) != Valid(b) && it.End() > 0 {
			t.Fatalf("Step/Enter walk err %v, Valid %v, for %q", it.Err(), Valid(b), b)
		}
		if (it.Err() == nil) != (flat.Err() == nil) {
			t.Fatalf("Enter walk err %v, Next walk err %v, for %q", it.Err(), flat.Err(), b)
		}
		if it.Err() == nil && strings.Join(deep, "\x00") != strings.Join(shallow, "\x00") {
			t.Fatalf("walks differ for %q:\n%q\n%q", b, deep, shallow)
		}
	})
}
