package configdb

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		`{"b": 1, "a": [1, 2.50, "x<y"]}`: `{"a":[1,2.50,"x<y"],"b":1}`,
		` null `:                          `null`,
		`12345678901234567890123`:         `12345678901234567890123`,
		`{"a": {"a": 1, "a": 2}}`:         `{"a":{"a":2}}`,
	} {
		got, err := Canonical([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `  `, `{`, `{"a":1} x`, `[1,]`, `nope`} {
		if _, err := Canonical([]byte(bad)); KindOf(err) != Invalid {
			t.Errorf("Canonical(%q): %v, want Invalid", bad, err)
		}
	}
}

func TestSplitObject(t *testing.T) {
	members, err := splitObject([]byte(` { "a" : 1 , "b\"c": {"x": [1, "}"]}, "d": "\\", "e": true } `))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		got = append(got, string(m.key)+"="+string(m.val()))
	}
	want := []string{`a=1`, `b"c={"x": [1, "}"]}`, `d="\\"`, `e=true`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q", got)
	}
	for _, notObject := range []string{`[1]`, `"s"`, `1`, `null`} {
		if _, err := splitObject([]byte(notObject)); err != errNotObject {
			t.Errorf("%s: %v", notObject, err)
		}
	}
}

func TestKeysBatch(t *testing.T) {
	doc := []byte(`{"a":{"b":[1,2,3]},"s":"x"}`)
	tests := []struct {
		op   KeysOp
		body string
		want string // the new document, or "409"/"400"/"404"
	}{
		{KeysSet, `[["a","b",1,"two"]]`, `{"a":{"b":[1,"two",3]},"s":"x"}`},
		{KeysSet, `[["a","b","0",0]]`, `{"a":{"b":[0,2,3]},"s":"x"}`},
		{KeysSet, `[["new",{"n":null}]]`, `{"a":{"b":[1,2,3]},"new":{"n":null},"s":"x"}`},
		{KeysSet, `[["a","c",1]]`, `{"a":{"b":[1,2,3],"c":1},"s":"x"}`},
		{KeysSet, `[["a","c","d",1]]`, "409"},
		{KeysSet, `[["s","x",1]]`, "409"},
		{KeysSet, `[["a","b",3,1]]`, "409"},
		{KeysSet, `[["a"]]`, "409"},
		{KeysSet, `[[]]`, "409"},
		{KeysSet, `[["a",1],[true,1]]`, "400"},
		{KeysSet, `[["a",1.5,1]]`, "400"},
		{KeysSet, `{}`, "400"},
		{KeysDelete, `[["a","b",1]]`, `{"a":{"b":[1,3]},"s":"x"}`},
		{KeysDelete, `[["a","b"],["s"]]`, `{"a":{}}`},
		{KeysDelete, `[["a","b"],["a","b"]]`, "409"},
		{KeysDelete, `[["s","x"]]`, "409"},
		{KeysDelete, `[[]]`, "409"},
		{"get", `[["a"]]`, "404"},
	}
	for _, tt := range tests {
		var got string
		paths, err := ParseKeysBatch(tt.op, []byte(tt.body))
		if err == nil {
			var out []byte
			out, err = applyKeys(doc, tt.op, paths)
			got = string(out)
		}
		if err != nil {
			got = map[ErrorKind]string{Invalid: "400", NotFound: "404", Conflict: "409"}[KindOf(err)]
		}
		if got != tt.want {
			t.Errorf("%s %s: %s (%v), want %s", tt.op, tt.body, got, err, tt.want)
		}
	}
}

func TestLookupKey(t *testing.T) {
	doc := []byte(`{"a":{"b":[{"c":1}]},"s":"x"}`)
	for key, want := range map[string]string{"a.b.0.c": `1`, "a.b": `[{"c":1}]`, "s": `"x"`} {
		got, err := LookupKey(doc, SplitKey(key))
		if err != nil || string(got) != want {
			t.Errorf("%s: %s %v", key, got, err)
		}
	}
	for _, key := range []string{"x", "a.c", "a.b.1", "a.b.-1", "a.b.x", "s.t", ""} {
		_, err := LookupKey(doc, SplitKey(key))
		if KindOf(err) != Conflict || !strings.Contains(err.Error(), "keys path") {
			t.Errorf("%q: %v", key, err)
		}
	}
}

func TestEffectiveKeyAndLookup(t *testing.T) {
	e, err := new(merger).merge([]source{
		{body: []byte(`{"a":1,"n":{"x":[1,2]}}`), level: 0},
		{body: []byte(`{"a":2,"b":3}`), level: 1},
	}, []string{"/", "/l/v/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.JSON(false)); got != `{"a":2,"b":3,"n":{"x":[1,2]}}` {
		t.Fatal(got)
	}
	if got := string(e.JSON(true)); got != `{"a":[2,"/l/v/"],"b":[3,"/l/v/"],"n":[{"x":[1,2]},"/"]}` {
		t.Fatal(got)
	}
	if got, err := e.Key([]string{"n", "x", "1"}, true); err != nil || string(got) != `[2,"/"]` {
		t.Fatal(string(got), err)
	}
	if _, err := e.Key([]string{"n", "y"}, false); err == nil || !strings.Contains(err.Error(), `["n","y"]`) {
		t.Fatal(err)
	}
}

// TestMergeAllocatesWhatItKeeps: an effective document holds memory for its
// own members only, not for its sources' (long values overridden here) nor
// for an earlier, larger merge done by the same merger; the cache counts that.
func TestMergeAllocatesWhatItKeeps(t *testing.T) {
	var mg merger
	long := strings.Repeat("x", 4000)
	root := []byte(`{"a":"` + long + `","b":"` + long + `","c":"` + long + `"}`)
	for range 2 { // the second time with the builders the first one grew
		e, err := mg.merge([]source{{body: root}, {body: []byte(`{"a":1,"b":2,"c":3}`), level: 1}}, []string{"/", "/l/v/"})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(e.JSON(false)); got != `{"a":1,"b":2,"c":3}` {
			t.Fatal(got)
		}
		// Allocation rounds up to a size class: at most an eighth more.
		if n := len(e.body); cap(e.body) > n+n/8+8 {
			t.Errorf("body of %d bytes holds %d", n, cap(e.body))
		}
		if n := len(e.entries); cap(e.entries) > n+n/8+1 {
			t.Errorf("%d entries hold room for %d", n, cap(e.entries))
		}
		kept := int64(cap(e.body)) + int64(cap(e.entries))*int64(unsafe.Sizeof(entry{}))
		if got, want := e.size()-new(Effective).size(), kept+int64(len("/")+len("/l/v/"))+2*int64(unsafe.Sizeof("")); got != want {
			t.Errorf("cache counts %d bytes, want %d", got, want)
		}
	}
}

// TestMergeNamesWhatIsNotAnObject: only objects merge, and the error says
// which document is what, in JSON's words.
func TestMergeNamesWhatIsNotAnObject(t *testing.T) {
	for doc, kind := range map[string]string{
		`5`:      "a number",
		`-0.5e3`: "a number",
		`["a"]`:  "an array",
		`"x"`:    "a string",
		`true`:   "a boolean",
		`null`:   "null",
		``:       "empty",
		" \n":    "empty",
		`?`:      "not JSON",
	} {
		_, err := new(merger).merge([]source{{body: []byte(`{"a":1}`), what: "values at /"}, {body: []byte(doc), level: 1, what: "overrides at /l/v/"}}, []string{"/", "/l/v/"})
		want := "effective values merge JSON objects only, and the overrides at /l/v/ are " + kind
		if KindOf(err) != Invalid || err.Error() != want {
			t.Errorf("%q: got %v, want %q", doc, err, want)
		}
	}
}

func TestKeysBatchMessages(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1}`:       `the body must be an array of keys paths such as [["a","b","value"]]; it is an object`,
		`1`:             `the body must be an array of keys paths such as [["a","b","value"]]; it is a number`,
		`"a"`:           `the body must be an array of keys paths such as [["a","b","value"]]; it is a string`,
		`[["a",1],"b"]`: `keys path 1 must be an array, such as ["a","b"]`,
	} {
		_, err := ParseKeysBatch(KeysSet, []byte(body))
		if KindOf(err) != Invalid || err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", body, err, want)
		}
	}
}

// TestMergeUnsortedSources: documents not in canonical order (never stored
// by this package, but possible) merge the same, in first-seen key order.
func TestMergeUnsortedSources(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{`{"b":1,"a":2}`, `{"a":3,"c":4}`, `{"b":1,"a":3,"c":4}`},
		{`{"a":1,"c":2}`, `{"c":3,"b":4}`, `{"a":1,"c":3,"b":4}`},
		{`{"a":1,"b":2}`, `{"a":3,"c":4}`, `{"a":3,"b":2,"c":4}`}, // sorted: the k-way merge
		{`{}`, `{"z":1,"y":2}`, `{"z":1,"y":2}`},
	} {
		e, err := new(merger).merge([]source{{body: []byte(tc.a)}, {body: []byte(tc.b), level: 1}}, []string{"/", "/l/v/"})
		if err != nil || string(e.JSON(false)) != tc.want {
			t.Errorf("%s + %s = %s (%v), want %s", tc.a, tc.b, e.JSON(false), err, tc.want)
		}
		got, err := e.Key([]string{"a"}, false)
		if strings.Contains(tc.want, `"a"`) && (err != nil || !strings.Contains(tc.want, `"a":`+string(got))) {
			t.Errorf("%s: Key(a) = %s %v", tc.want, got, err)
		}
	}
}

// FuzzMerge: the merge agrees with decoding every source and overlaying them.
func FuzzMerge(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"x":2}}`), []byte(`{"b":3,"c":[4]}`), []byte(`{"a":null}`))
	f.Add([]byte(`{"z":1,"a":2}`), []byte(`{}`), []byte(`{"m":1,"a":0}`))
	var mg merger // one for every input, so reused builders are exercised
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		var sources []source
		want := map[string]any{}
		wantFrom := map[string]string{} // the level path of the last source with the key
		paths := []string{"/", "/1/", "/2/"}
		for i, doc := range [][]byte{a, b, c} {
			canon, err := Canonical(doc)
			if i == 1 {
				canon = doc // one source as given, possibly unsorted
			}
			var m map[string]any
			if err != nil || json.Unmarshal(canon, &m) != nil || m == nil {
				return
			}
			for k, v := range m {
				want[k] = v
				wantFrom[k] = paths[i]
			}
			sources = append(sources, source{body: canon, level: i})
		}
		e, err := mg.merge(sources, paths)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(e.JSON(false), &got); err != nil {
			t.Fatalf("%s: %v", e.JSON(false), err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		var from map[string][2]any
		if err := json.Unmarshal(e.JSON(true), &from); err != nil {
			t.Fatalf("%s: %v", e.JSON(true), err)
		}
		for k, v := range from {
			if v[1] != wantFrom[k] {
				t.Fatalf("%q from %v, want %s", k, v[1], wantFrom[k])
			}
		}
		for i := 1; e.sorted && i < len(e.entries); i++ {
			if a, b := e.key(e.entries[i-1]), e.key(e.entries[i]); a >= b {
				t.Fatalf("a sorted merge gave %q before %q", a, b)
			}
		}
	})
}

func TestCacheEvictsByBytes(t *testing.T) {
	c := newCache(1000)
	base := new(Effective).size()
	e := func(n int64) *Effective { return &Effective{body: make([]byte, 0, n-base)} }
	c.put("a", 1, 1, e(600))
	c.put("b", 1, 1, e(300))
	if c.get("a", 1, 1) == nil {
		t.Fatal("a evicted early")
	}
	c.put("c", 1, 1, e(300)) // evicts b, the least recently used
	if c.get("b", 1, 1) != nil || c.get("a", 1, 1) == nil || c.get("c", 1, 1) == nil {
		t.Fatal("wrong eviction")
	}
	if c.get("a", 2, 1) != nil || c.get("a", 1, 1) != nil {
		t.Fatal("a stale generation must miss, and drop the entry")
	}
	c.put("huge", 1, 1, e(1100))
	if c.get("huge", 1, 1) != nil {
		t.Fatal("an entry over the budget was cached")
	}
}

func FuzzSplitObject(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":1}`, ` {"a" : [1,{"b":"}"}] , "c\"d":null} `, `[1]`, `{"a":`, `{"a":1,}`, `{"\u0041":"x"}`, `"x"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		members, err := splitObject(doc)
		var want map[string]json.RawMessage
		if json.Unmarshal(doc, &want) != nil || want == nil {
			return // invalid or not an object: splitObject must only not panic
		}
		if err != nil {
			t.Fatalf("valid object %q: %v", doc, err)
		}
		got := map[string]json.RawMessage{}
		for _, m := range members {
			got[string(m.key)] = m.val()
		}
		if len(got) != len(want) {
			t.Fatalf("%q: keys %v, want %v", doc, got, want)
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(v)) {
				t.Fatalf("%q: %s = %s, want %s", doc, k, got[k], v)
			}
		}
	})
}

func FuzzKeysBatch(f *testing.F) {
	f.Add("set", `[["a","b",1,"x"]]`)
	f.Add("delete", `[["a","b",0]]`)
	f.Add("set", `[["n",{"deep":[1,2]}],["s",null]]`)
	f.Add("delete", `[[],["s"]]`)
	doc := []byte(`{"a":{"b":[1,2,3]},"s":"x","l":[[1],{"k":true}]}`)
	f.Fuzz(func(t *testing.T, op, body string) {
		paths, err := ParseKeysBatch(KeysOp(op), []byte(body))
		if err != nil {
			if KindOf(err) == 0 {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		out, err := applyKeys(doc, KeysOp(op), paths)
		if err != nil {
			if KindOf(err) != Conflict {
				t.Fatalf("apply: %v", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid result %s", out)
		}
		if again, _ := Canonical(out); !bytes.Equal(again, out) {
			t.Fatalf("result not canonical: %s", out)
		}
	})
}

func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{`{"b":1,"a":2}`, `[1.0, -0, 1e5]`, `"\u00e9<>&"`, `{"a":{"a":1,"a":2}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Canonical(doc)
		if err != nil {
			return
		}
		again, err := Canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not idempotent: %s -> %s (%v)", c, again, err)
		}
		if bytes.HasPrefix(bytes.TrimSpace(c), []byte("{")) {
			if _, err := splitObject(c); err != nil {
				t.Fatalf("canonical object %s does not split: %v", c, err)
			}
		}
	})
}
