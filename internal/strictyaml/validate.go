package strictyaml

import (
	"fmt"
	"reflect"
	"sort"
)

// validate walks the decoded value depth first and calls Validate on every
// value whose pointer implements it, children before parents. skipSelf is
// set for an embedded struct whose Validate method is promoted to (or
// shadowed by) its parent's, so that it is called once, as Go would.
func (d *decoder) validate(v reflect.Value, path string, skipSelf bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		key := visit{ptr: v.Pointer(), typ: v.Type()}
		if d.visited[key] {
			return
		}
		d.visited[key] = true
		d.validate(v.Elem(), path, false)
		return
	case reflect.Struct:
		if u := unionOf(v); u != nil {
			if c := u.Chosen(); c != nil {
				d.validate(reflect.ValueOf(c), path, false)
			}
		}
		info := d.structInfo(v.Type(), path, d.lines[path])
		self := validator(v) != nil
		for _, mem := range info.members {
			fv := v.Field(mem.index)
			skip := mem.anonymous && self
			if mem.inline {
				d.validate(fv, path, skip)
			} else {
				d.validate(fv, keyPath(path, mem.name), skip)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			d.validate(v.Index(i), indexPath(path, i), false)
		}
	case reflect.Map:
		type kv struct {
			key string
			val reflect.Value
		}
		var items []kv
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			name := ""
			if k.Kind() == reflect.String {
				name = k.String()
			} else if k.CanInterface() {
				name = fmt.Sprint(k.Interface())
			}
			// Map values are not addressable: validate a copy.
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(it.Value())
			items = append(items, kv{name, val})
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].key < items[j].key })
		for _, it := range items {
			d.validate(it.val, keyPath(path, it.key), false)
		}
	}
	if skipSelf {
		return
	}
	if vd := validator(v); vd != nil {
		for _, ke := range reroot(path, vd.Validate(), 0) {
			if d.unread[ke.Key] || d.unread[ke.Key+"_file"] {
				continue
			}
			if ke.Line == 0 {
				ke.Line = d.lines[ke.Key]
			}
			d.errs = append(d.errs, ke)
		}
	}
}

func validator(v reflect.Value) interface{ Validate() error } {
	if !v.CanAddr() {
		return nil
	}
	p := v.Addr()
	if !p.CanInterface() || !p.Type().Implements(validatorType) {
		return nil
	}
	return p.Interface().(interface{ Validate() error })
}
