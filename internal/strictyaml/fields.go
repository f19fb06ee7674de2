package strictyaml

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// field is one key of a struct, possibly promoted from an inline struct.
type field struct {
	name   string
	index  []int
	secret bool
}

// member is one direct field of a struct, for the validation walk.
type member struct {
	index     int
	name      string // key; "" for inline members
	inline    bool
	anonymous bool
}

type structInfo struct {
	fields  []*field
	byName  map[string]*field
	keys    []string // every accepted key, sorted, including <secret>_file
	members []member
	err     error // a problem with the Go type itself, reported once
}

// structInfo returns the keys of struct type t, computing them once per
// Decode call.
func (d *decoder) structInfo(t reflect.Type, path string, line int) *structInfo {
	if info, ok := d.structs[t]; ok {
		return info
	}
	info := buildStructInfo(t)
	d.structs[t] = info
	if info.err != nil {
		d.errs = append(d.errs, &KeyError{Key: path, Line: line, Err: info.err})
	}
	return info
}

func buildStructInfo(t reflect.Type) *structInfo {
	info := &structInfo{byName: make(map[string]*field)}
	var problems []error
	var visit func(t reflect.Type, prefix []int, top bool)
	visit = func(t reflect.Type, prefix []int, top bool) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name, inline, ok := FieldKey(sf)
			if !ok {
				continue
			}
			if !sf.IsExported() && !(sf.Anonymous && inline) {
				continue
			}
			index := append(append([]int(nil), prefix...), i)
			if inline {
				if sf.Type.Kind() != reflect.Struct {
					problems = append(problems, fmt.Errorf("strictyaml: field %s.%s: inline needs a struct, not %s", t, sf.Name, sf.Type))
					continue
				}
				if top {
					info.members = append(info.members, member{index: i, inline: true, anonymous: sf.Anonymous})
				}
				visit(sf.Type, index, false)
				continue
			}
			if top {
				info.members = append(info.members, member{index: i, name: name, anonymous: sf.Anonymous})
			}
			f := &field{name: name, index: index, secret: sf.Tag.Get("secret") == "true"}
			if prev, dup := info.byName[name]; dup {
				problems = append(problems, fmt.Errorf("strictyaml: type %s has key %q twice (fields %s and %s)", t, name, fieldName(t, prev.index), fieldName(t, index)))
				continue
			}
			info.byName[name] = f
			info.fields = append(info.fields, f)
		}
	}
	visit(t, nil, true)
	for _, f := range info.fields {
		info.keys = append(info.keys, f.name)
		if f.secret {
			if _, clash := info.byName[f.name+"_file"]; clash {
				problems = append(problems, fmt.Errorf("strictyaml: type %s: key %q clashes with the file form of secret %q", t, f.name+"_file", f.name))
				continue
			}
			info.keys = append(info.keys, f.name+"_file")
		}
	}
	sort.Strings(info.keys)
	info.err = errors.Join(problems...)
	return info
}

// FieldKey reads a struct field's yaml tag as Decode does: key is the tag's
// name, else the field's name in lower case; inline says the tag has
// ",inline" (the field's keys are its struct's); ok is false for a field
// tagged "-", which has no key.
func FieldKey(sf reflect.StructField) (key string, inline, ok bool) {
	tag := sf.Tag.Get("yaml")
	if tag == "-" {
		return "", false, false
	}
	key, opts, _ := strings.Cut(tag, ",")
	if key == "" {
		key = strings.ToLower(sf.Name)
	}
	return key, slices.Contains(strings.Split(opts, ","), "inline"), true
}

func fieldName(t reflect.Type, index []int) string {
	var parts []string
	for _, i := range index {
		sf := t.Field(i)
		parts = append(parts, sf.Name)
		t = sf.Type
	}
	return strings.Join(parts, ".")
}

// unknownKey explains why key is not accepted and suggests what to write.
func unknownKey(key string, info *structInfo) error {
	if base, ok := strings.CutSuffix(key, "_file"); ok {
		if f, ok := info.byName[base]; ok && !f.secret {
			return fmt.Errorf("unknown key (%s is not a secret, so it cannot be read from a file; set %s directly)", base, base)
		}
	}
	if s := suggest(key, info.keys); s != "" {
		return fmt.Errorf("unknown key (did you mean %q?)", s)
	}
	if len(info.keys) == 0 {
		return errors.New("unknown key; no keys are allowed here")
	}
	return fmt.Errorf("unknown key; valid keys: %s", strings.Join(info.keys, ", "))
}

// suggest returns the valid key closest to key, when it is close: a
// case-insensitive match or an edit distance of at most 2.
func suggest(key string, valid []string) string {
	best, bestDist := "", 3
	for _, v := range valid {
		if strings.EqualFold(v, key) {
			return v
		}
	}
	for _, v := range valid {
		if diff := len(v) - len(key); diff > 2 || diff < -2 {
			continue
		}
		if dist := editDistance(key, v); dist < bestDist {
			best, bestDist = v, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
