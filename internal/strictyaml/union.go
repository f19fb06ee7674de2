package strictyaml

import (
	"reflect"

	"go.yaml.in/yaml/v3"
)

// Union is a mapping whose keys belong to one of several Go types, chosen by
// the value of one of them: a sink's `type` says which sink's settings the
// rest of its keys are. Implement it on the pointer of a struct, which then
// holds the chosen value (its own fields are not keys).
//
// Decode reads the key UnionKey names first, gives its value ("" when the
// key is absent) to Choose, and decodes the other keys into the pointer
// Choose returns (a pointer to a struct, with its defaults), as strictly as
// anywhere: a key the chosen type does not have is unknown. An error from
// Choose is reported at the key. The validation walk goes into Chosen in the
// union's place, before the union's own Validate.
type Union interface {
	// UnionKey is the key whose value chooses.
	UnionKey() string
	// Choose returns where the mapping is decoded for the key's value, and
	// remembers it for Chosen; an error says which values there are.
	Choose(value string) (any, error)
	// Chosen is what Choose returned, or nil when nothing was chosen.
	Chosen() any
}

var unionType = reflect.TypeFor[Union]()

func unionOf(v reflect.Value) Union {
	if !v.CanAddr() {
		return nil
	}
	p := v.Addr()
	if !p.CanInterface() || !p.Type().Implements(unionType) {
		return nil
	}
	return p.Interface().(Union)
}

// decodeUnion decodes mapping n into what u chooses for its key's value.
func (d *decoder) decodeUnion(n *yaml.Node, u Union, path string) {
	key := u.UnionKey()
	kp := keyPath(path, key)
	value, line := "", n.Line
	for _, e := range d.flatten(n, path, false) {
		if e.err != nil || e.key.Kind != yaml.ScalarNode || e.key.Value != key {
			continue
		}
		line = e.key.Line
		val := derefKey(e.val)
		if val.Kind != yaml.ScalarNode || isNull(val) {
			d.failf(kp, e.key, "expected a string, got %s", describe(val, modeExpand))
			return
		}
		s, ok := d.text(val, kp, modeExpand)
		if !ok {
			return
		}
		value = s
		break
	}
	d.record(kp, line)
	target, err := u.Choose(value)
	if err != nil {
		d.errs = append(d.errs, &KeyError{Key: kp, Line: line, Err: err})
		return
	}
	tv := reflect.ValueOf(target)
	if tv.Kind() != reflect.Pointer || tv.IsNil() || tv.Elem().Kind() != reflect.Struct {
		d.failf(path, n, "strictyaml: Choose returned %T, not a pointer to a struct", target)
		return
	}
	d.decodeFields(n, tv.Elem(), path, key)
}
