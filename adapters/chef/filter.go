package chef

import (
	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// attrPath is one allow or block entry, split into keys.
type attrPath []string

// levelRules are the lists of one attribute level.
type levelRules struct {
	// allowSet: an allow list is configured; allow may then be empty, which
	// keeps nothing.
	allowSet bool
	allow    []attrPath
	block    []attrPath
}

// apply filters one level's raw value: allow list, then block list.
func (r levelRules) apply(raw []byte) []byte {
	if r.allowSet {
		raw = allow(raw, r.allow)
	}
	if len(r.block) > 0 {
		raw = block(raw, newBlockTrie(r.block))
	}
	return raw
}

// selection is the allow list's result under construction: either a whole
// value taken from the data, or an object of selected keys in the order they
// were first selected (a Ruby Hash's insertion order).
type selection struct {
	whole []byte
	keys  []string
	kids  map[string]*selection
}

func (s *selection) child(key string) *selection {
	if c, ok := s.kids[key]; ok {
		return c
	}
	if s.kids == nil {
		s.kids = map[string]*selection{}
	}
	c := &selection{}
	s.kids[key] = c
	s.keys = append(s.keys, key)
	return c
}

// allow keeps only the allowed paths of raw, as chef-client's
// AttributeAllowlist.filter does:
//
//   - each path adds its subtree to a new object; paths merge, and a key
//     keeps the position of the first path that selected it;
//   - a path whose last key is missing adds nothing, but the objects on the
//     way that do exist are still created, empty ({"network": {}} for
//     "network/nope"), as chef-client does;
//   - a path through a value that is not an object is treated as missing
//     where chef-client would raise;
//   - a path that selects inside a subtree already selected whole changes
//     nothing, and selecting a subtree whole replaces what was selected in it;
//   - keys are compared decoded, and where a key is duplicated the last one
//     counts, as when the JSON is decoded.
//
// raw that is not an object gives {}. The selected values are copied byte for
// byte.
func allow(raw []byte, paths []attrPath) []byte {
	root := &selection{}
	for _, path := range paths {
		if len(path) == 0 {
			continue
		}
		data, sel := raw, root
		ok := true
		for _, part := range path[:len(path)-1] {
			var v []byte
			if v, ok = jsonscan.Get(data, part); !ok {
				break
			}
			sel = sel.child(part)
			if sel.whole != nil {
				ok = false // already selected whole: nothing to add
				break
			}
			data = v
		}
		if !ok {
			continue
		}
		last := path[len(path)-1]
		if v, found := jsonscan.Get(data, last); found {
			c := sel.child(last)
			c.whole, c.keys, c.kids = v, nil, nil
		}
	}
	return root.appendTo(make([]byte, 0, 256))
}

func (s *selection) appendTo(dst []byte) []byte {
	if s.whole != nil {
		return append(dst, s.whole...)
	}
	dst = append(dst, '{')
	for i, k := range s.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, k)
		dst = append(dst, ':')
		dst = s.kids[k].appendTo(dst)
	}
	return append(dst, '}')
}

// blockTrie holds the block list as a tree of keys.
type blockTrie struct {
	drop bool
	kids map[string]*blockTrie
}

func newBlockTrie(paths []attrPath) *blockTrie {
	root := &blockTrie{}
	for _, path := range paths {
		if len(path) == 0 {
			continue
		}
		n := root
		for _, part := range path {
			c, ok := n.kids[part]
			if !ok {
				if n.kids == nil {
					n.kids = map[string]*blockTrie{}
				}
				c = &blockTrie{}
				n.kids[part] = c
			}
			n = c
		}
		n.drop = true
	}
	return root
}

// block removes the blocked paths from raw, as chef-client's
// AttributeBlocklist.filter does: a path is removed where it exists, and
// ignored where a key on the way is missing, null, false or not an object.
// The order of the entries does not matter. Every duplicate of a removed key
// goes, so that no reader can pick a surviving copy. Everything else is
// copied byte for byte, whitespace aside.
func block(raw []byte, trie *blockTrie) []byte {
	if jsonscan.Kind(raw) != jsonscan.Object || len(trie.kids) == 0 {
		return raw
	}
	dst := make([]byte, 0, len(raw))
	return trie.appendFiltered(dst, raw)
}

func (t *blockTrie) appendFiltered(dst, obj []byte) []byte {
	return rewriteMembers(dst, obj, func(dst []byte, key string, val []byte) ([]byte, bool) {
		kid := t.kids[key]
		switch {
		case kid == nil:
			return append(dst, val...), true
		case kid.drop:
			return dst, false
		case len(kid.kids) > 0 && jsonscan.Kind(val) == jsonscan.Object:
			return kid.appendFiltered(dst, val), true
		}
		return append(dst, val...), true
	})
}
