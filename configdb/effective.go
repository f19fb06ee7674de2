package configdb

import (
	"bytes"
	"container/list"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Effective is the merge of every document on the way from the root to a
// level path: root values, root overrides, level-1 values, level-1
// overrides, and so on, top-level keys only, later ones winning. It is
// immutable and shared between requests through the cache.
//
// It holds the rendered document and, per key, offsets into it: no pointers
// for the garbage collector to scan, and the stored documents it was merged
// from are not kept.
type Effective struct {
	body    []byte
	entries []entry
	// paths[i] is the lookup path of source level i: "/", "/lvl1/v1/", ...
	paths []string
	// sorted says entries are in key order, so Key can search.
	sorted bool
}

// entry locates one member in body: the key as written (quotes included),
// the value, and the level that set it.
type entry struct {
	keyStart, keyEnd, valStart, valEnd int32
	level                              int32
}

// size is the memory an Effective holds, for the cache's byte budget: what
// its slices have allocated (cap, not len), the level paths and the struct.
// A merge allocates body and entries at their final length (see merger), so
// this is close to the document's own size.
func (e *Effective) size() int64 {
	n := int64(unsafe.Sizeof(*e)) + int64(cap(e.body)) + int64(cap(e.entries))*int64(unsafe.Sizeof(entry{}))
	for _, p := range e.paths {
		n += int64(unsafe.Sizeof(p)) + int64(len(p))
	}
	return n
}

func (e *Effective) rawKey(en entry) []byte { return e.body[en.keyStart:en.keyEnd] }
func (e *Effective) val(en entry) []byte    { return e.body[en.valStart:en.valEnd] }

// key decodes an entry's key.
func (e *Effective) key(en entry) string {
	raw := e.rawKey(en)
	var k string
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	_ = json.Unmarshal(raw, &k)
	return k
}

// builder renders the plain document while members are merged in. Its
// buffers are scratch, reused between merges (merger): how many members win
// and how long the document gets are only known at the end, so done copies
// them out at their exact size.
type builder struct {
	body    []byte
	entries []entry
}

func (b *builder) reset() {
	b.body = append(b.body[:0], '{')
	b.entries = b.entries[:0]
}

func (b *builder) add(m member, level int) {
	if len(b.entries) > 0 {
		b.body = append(b.body, ',')
	}
	en := entry{keyStart: int32(len(b.body)), level: int32(level)}
	b.body = append(b.body, m.rawKey()...)
	en.keyEnd = int32(len(b.body))
	b.body = append(b.body, ':')
	en.valStart = int32(len(b.body))
	b.body = append(b.body, m.val()...)
	en.valEnd = int32(len(b.body))
	b.entries = append(b.entries, en)
}

// done returns the document built, in memory of its own: three allocations
// (the Effective, its body and its entries), each of the length used.
func (b *builder) done(paths []string, sorted bool) *Effective {
	b.body = append(b.body, '}')
	return &Effective{
		body:    bytes.Clone(b.body),
		entries: slices.Clone(b.entries),
		paths:   paths,
		sorted:  sorted,
	}
}

// merger merges documents (merge, mergeUnsorted), keeping builders for reuse.
// Sizing an Effective up front from its sources over-allocates (shadowed
// members are counted, and how many keys they hold is only known by scanning
// them), and the cache then holds that memory; growing it as members come
// allocates over and over. A reused builder grows once, to the largest merge
// it has done, and every Effective is copied out of it at its exact size.
// The zero merger is ready to use; it is safe for concurrent use.
type merger struct {
	// builders holds *builder. sync.Pool lets the garbage collector free the
	// ones unused for two cycles.
	builders sync.Pool
}

// maxScratch is the largest builder (bytes of body, or of entries) kept for
// reuse: one rare huge merge must not leave its scratch behind.
const maxScratch = 4 << 20

// builder returns a builder whose body has room for size bytes: the sum of
// the sources is what the merge can write at most, so the body never grows
// member by member.
func (mg *merger) builder(size int) *builder {
	b, _ := mg.builders.Get().(*builder)
	if b == nil {
		b = new(builder)
	}
	if cap(b.body) < size+2 {
		b.body = make([]byte, 0, size+2)
	}
	b.reset()
	return b
}

func (mg *merger) release(b *builder) {
	if cap(b.body) <= maxScratch && cap(b.entries)*int(unsafe.Sizeof(entry{})) <= maxScratch {
		mg.builders.Put(b)
	}
}

// source is one stored document in merge order. A level path with nothing
// stored has no source.
type source struct {
	body  []byte
	level int
	what  string // "values at /" for messages
}

// maxInline is how many sources the merge keeps on the stack: 2 per level,
// root included.
const maxInline = 16

func notObject(s source) error {
	return &Error{Kind: Invalid, Msg: "effective values merge JSON objects only, and the " + s.what + " are " + jsonKind(s.body)}
}

// merge builds the effective document. A source that is not a JSON object is
// an Invalid error, since only objects can be merged.
//
// Stored documents are canonical, so their keys come sorted, and the merge is
// a k-way merge of sorted member lists: no hash map, output sorted too. A
// source out of order (not written by Canonical) falls back to mergeUnsorted.
// Offsets are 32-bit: a document over 2 GiB is refused (max_body is far less).
func (mg *merger) merge(sources []source, paths []string) (*Effective, error) {
	var cursorBuf [maxInline]cursor
	var headBuf [maxInline]member
	var liveBuf, holdBuf [maxInline]bool
	var levelBuf [maxInline]int
	cursors, heads, live, levels := cursorBuf[:0], headBuf[:0], liveBuf[:0], levelBuf[:0]
	hold := holdBuf[:0]
	size := 0
	for _, s := range sources {
		c, err := openCursor(s.body)
		if err != nil {
			return nil, notObject(s)
		}
		m, ok, err := c.next()
		if err != nil {
			return nil, err
		}
		cursors, heads, live, levels = append(cursors, c), append(heads, m), append(live, ok), append(levels, s.level)
		hold = append(hold, false)
		size += len(s.body)
	}
	if size >= 1<<31-1 {
		return nil, &Error{Kind: Invalid, Msg: "the documents to merge are over 2 GiB"}
	}
	b := mg.builder(size)
	defer mg.release(b)
	for {
		// One pass finds the smallest key, which cursors hold it (hold, read
		// from first on) and the last of them, which wins: one comparison per
		// cursor, not a search and two more passes.
		first, win := -1, -1
		for i := range cursors {
			if !live[i] {
				continue
			}
			c := -1
			if first >= 0 {
				c = bytes.Compare(heads[i].key, heads[first].key)
			}
			hold[i] = c <= 0
			switch {
			case c < 0:
				first, win = i, i
			case c == 0:
				win = i // a later source wins
			}
		}
		if first < 0 {
			return b.done(paths, true), nil
		}
		key := heads[first].key
		b.add(heads[win], levels[win])
		for i := first; i <= win; i++ {
			if !live[i] || !hold[i] {
				continue
			}
			m, ok, err := cursors[i].next()
			if err != nil {
				return nil, err
			}
			if ok && bytes.Compare(m.key, key) <= 0 {
				return mg.mergeUnsorted(sources, paths)
			}
			heads[i], live[i] = m, ok
		}
	}
}

// mergeUnsorted merges sources whose keys are in any order, keeping the
// order in which keys first appear.
func (mg *merger) mergeUnsorted(sources []source, paths []string) (*Effective, error) {
	type winner struct {
		m     member
		level int
	}
	var order []winner
	index := map[string]int{}
	size := 0
	for _, s := range sources {
		members, err := splitObject(s.body)
		if err != nil {
			return nil, notObject(s)
		}
		size += len(s.body)
		for _, m := range members {
			if i, ok := index[string(m.key)]; ok {
				order[i] = winner{m, s.level}
				continue
			}
			index[string(m.key)] = len(order)
			order = append(order, winner{m, s.level})
		}
	}
	b := mg.builder(size)
	defer mg.release(b)
	for _, w := range order {
		b.add(w.m, w.level)
	}
	return b.done(paths, false), nil
}

// JSON renders the effective document. With lookup, each value becomes
// [value, "<level path where it was last set>"].
func (e *Effective) JSON(lookup bool) []byte {
	if !lookup {
		return e.body
	}
	n := len(e.body) + 2
	for _, en := range e.entries {
		n += len(e.paths[en.level]) + 6
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, en := range e.entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.rawKey(en)...)
		b = append(b, ':', '[')
		b = append(b, e.val(en)...)
		b = append(b, ',')
		b = appendJSONString(b, e.paths[en.level])
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// Key returns the value at path (see LookupKey); with lookup, as
// [value, "<level path of the top-level key>"].
func (e *Effective) Key(path []string, lookup bool) ([]byte, error) {
	keys := make([]any, len(path))
	for i, k := range path {
		keys[i] = k
	}
	from := 0
	if e.sorted {
		from = sort.Search(len(e.entries), func(i int) bool { return e.key(e.entries[i]) >= path[0] })
	}
	for _, en := range e.entries[from:] {
		if e.key(en) != path[0] {
			if e.sorted {
				break
			}
			continue
		}
		val, err := LookupKey(e.val(en), path[1:])
		if err != nil {
			if ce, ok := err.(*Error); ok && ce.Kind == Conflict {
				// Re-phrase with the whole path, not the part inside the value.
				v, _ := decodeJSON(e.val(en))
				_, err = lookupPath(map[string]any{path[0]: v}, path)
			}
			return nil, err
		}
		if !lookup {
			return val, nil
		}
		out := append([]byte{'['}, val...)
		out = append(out, ',')
		out = appendJSONString(out, e.paths[en.level])
		return append(out, ']'), nil
	}
	return nil, missingKey(keys, keys[0])
}

// cache keeps effective documents, least recently used first out, within a
// byte budget. Entries carry the generations they were built at; the caller
// checks them against the database before using one.
type cache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[string]*list.Element

	hits, misses int64
}

type cacheItem struct {
	key            string
	envGen, catGen int64
	eff            *Effective
}

func newCache(max int64) *cache {
	return &cache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *cache) get(key string, envGen, catGen int64) *Effective {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		c.misses++
		return nil
	}
	it := el.Value.(*cacheItem)
	if it.envGen != envGen || it.catGen != catGen {
		c.removeElement(el)
		c.misses++
		return nil
	}
	c.ll.MoveToFront(el)
	c.hits++
	return it.eff
}

func (c *cache) put(key string, envGen, catGen int64, eff *Effective) {
	if eff.size() > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeElement(el)
	}
	for c.size+eff.size() > c.max {
		c.removeElement(c.ll.Back())
	}
	c.items[key] = c.ll.PushFront(&cacheItem{key: key, envGen: envGen, catGen: catGen, eff: eff})
	c.size += eff.size()
}

func (c *cache) removeElement(el *list.Element) {
	it := c.ll.Remove(el).(*cacheItem)
	delete(c.items, it.key)
	c.size -= it.eff.size()
}

func (c *cache) stats() (hits, misses int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// cacheKey identifies an effective document by the request's own words: the
// resource as given (id or name) and the level path.
func cacheKey(a Address) string {
	var b bytes.Buffer
	b.WriteString(strconv.FormatInt(a.Env, 10))
	b.WriteByte(0)
	b.WriteString(a.Resource)
	for _, l := range a.Levels {
		b.WriteByte(0)
		b.WriteString(l.Name)
		b.WriteByte(0)
		b.WriteString(l.Value)
	}
	return b.String()
}
