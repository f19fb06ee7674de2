package chef

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/datadir"
	"github.com/opsfirehose/firehose/internal/logging"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

// Rollout is the chef.rollout section: each node's cookbook versions,
// remembered in the data directory, give each cookbook version's rollout
// node by node.
type Rollout struct {
	// Enabled tracks cookbook versions; it needs the bridge's data_dir.
	// Default true.
	Enabled bool `yaml:"enabled"`
	// MaxNodes bounds the nodes tracked; a node first seen beyond it is not
	// tracked (and counted). Default 200000.
	MaxNodes int `yaml:"max_nodes"`
	// TallyInterval is how often the retained tally of each cookbook whose
	// counts changed is published. Default 1s.
	TallyInterval time.Duration `yaml:"tally_interval"`
}

// The rollout's fixed bounds, so that memory and disk stay bounded whatever
// senders send: cookbooks read per run, tallies (one per org and cookbook),
// and versions per tally.
const (
	maxCookbooksPerNode = 256
	maxTallies          = 10_000
	maxVersionsPerTally = 1_000
)

// Validate checks the section.
func (r *Rollout) Validate() error {
	var p strictyaml.Problems
	if r.MaxNodes < 0 {
		p.Add("max_nodes", "must be positive, for example 200000 (0: no bound)")
	}
	if r.TallyInterval < 0 {
		p.Add("tally_interval", "must be positive, for example 1s")
	}
	return p.Err()
}

// Run statuses as stored.
const (
	statusSuccess byte = 1
	statusFailure byte = 2
)

func runStatus(s string) byte {
	if s == "success" {
		return statusSuccess
	}
	return statusFailure
}

// nodeState is what is remembered of a node: its last run's status and
// cookbook versions, sorted by name.
type nodeState struct {
	status    byte
	cookbooks []chefpayload.CookbookVersion
}

// encodeVersion is the first byte of every stored node state.
const encodeVersion = 1

func (s *nodeState) encode() []byte {
	n := 3
	for _, c := range s.cookbooks {
		n += len(c.Name) + len(c.Version) + 2*binary.MaxVarintLen16
	}
	b := make([]byte, 0, n)
	b = append(b, encodeVersion, s.status)
	b = binary.AppendUvarint(b, uint64(len(s.cookbooks)))
	for _, c := range s.cookbooks {
		b = appendString(b, c.Name)
		b = appendString(b, c.Version)
	}
	return b
}

func decodeNode(b []byte) (nodeState, error) {
	if len(b) < 2 || b[0] != encodeVersion {
		return nodeState{}, errors.New("unknown node state encoding")
	}
	s := nodeState{status: b[1]}
	b = b[2:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxCookbooksPerNode {
		return nodeState{}, errors.New("bad node state")
	}
	b = b[k:]
	s.cookbooks = make([]chefpayload.CookbookVersion, n)
	for i := range s.cookbooks {
		var ok bool
		if s.cookbooks[i].Name, b, ok = readString(b); !ok {
			return nodeState{}, errors.New("bad node state")
		}
		if s.cookbooks[i].Version, b, ok = readString(b); !ok {
			return nodeState{}, errors.New("bad node state")
		}
	}
	return s, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// version returns the version of cookbook name, "" when the node has none.
func (s *nodeState) version(name string) (string, bool) {
	i, ok := slices.BinarySearchFunc(s.cookbooks, name, func(c chefpayload.CookbookVersion, n string) int {
		return strings.Compare(c.Name, n)
	})
	if !ok {
		return "", false
	}
	return s.cookbooks[i].Version, true
}

// Store keys: 'n' node states, 't' tally counts, 'c' the number of nodes.
var countKey = []byte("c")

func nodeKey(org, node string) []byte {
	b := make([]byte, 0, 2+len(org)+len(node))
	b = append(b, 'n')
	b = appendString(b, org)
	return append(b, node...)
}

func tallyDBKey(k tallyKey, version string) []byte {
	b := make([]byte, 0, 3+len(k.org)+len(k.cookbook)+len(version))
	b = append(b, 't')
	b = appendString(b, k.org)
	b = appendString(b, k.cookbook)
	return append(b, version...)
}

func parseTallyKey(b []byte) (tallyKey, string, bool) {
	if len(b) == 0 || b[0] != 't' {
		return tallyKey{}, "", false
	}
	org, rest, ok := readString(b[1:])
	if !ok {
		return tallyKey{}, "", false
	}
	cookbook, rest, ok := readString(rest)
	if !ok {
		return tallyKey{}, "", false
	}
	return tallyKey{org, cookbook}, string(rest), true
}

// tallyKey names one tally: a cookbook in an org.
type tallyKey struct{ org, cookbook string }

// encodeCount is a tally line as the rollout store keeps it.
func encodeCount(v *chefpayload.VersionCount) []byte {
	b := binary.AppendUvarint(nil, uint64(v.Nodes))
	b = binary.AppendUvarint(b, uint64(v.Success))
	return binary.AppendUvarint(b, uint64(v.Failure))
}

func decodeCount(b []byte) (chefpayload.VersionCount, bool) {
	var out [3]uint64
	for i := range out {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return chefpayload.VersionCount{}, false
		}
		out[i], b = n, b[k:]
	}
	return chefpayload.VersionCount{Nodes: int64(out[0]), Success: int64(out[1]), Failure: int64(out[2])}, true
}

// delta is one change to a tally line.
type delta struct {
	key     tallyKey
	version string
	status  byte
	sign    int64
}

// rolloutEvent is a node's first run with a version of a cookbook.
type rolloutEvent struct {
	cookbook, version string
	previous          *string
}

// rolloutStore remembers each node's cookbook versions in a pebble database
// in the data directory, and keeps the tallies in memory. Its memory is
// bounded by the nodes tracked (an 8-byte digest of each one's last state)
// and the tallies, whatever the fleet's size; the node states are on disk.
// It is safe for concurrent use.
type rolloutStore struct {
	db       *pebble.DB
	maxNodes int64
	seed     maphash.Seed

	// stripes serialise the runs of one node, from reading its state to
	// committing the new one after the run's messages are published.
	stripes [256]sync.Mutex

	mu      sync.Mutex
	digests map[string]uint64 // node key → digest of its last state
	nodes   int64             // nodes stored

	tallyMu sync.Mutex
	tallies map[tallyKey]map[string]*chefpayload.VersionCount
	dirty   map[tallyKey]bool

	closeOnce sync.Once
}

// openRollout opens (or creates) the store in dir, and loads the tallies.
func openRollout(dir string, maxNodes int, log zerolog.Logger) (*rolloutStore, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("rollout store: %w", err)
	}
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{
		Logger: logging.Pebble{Log: log},
		// Bounded memory, whatever the fleet: node states are read once a
		// run changes something, so a small cache does.
		Cache:        cache,
		MemTableSize: 4 << 20,
	})
	if datadir.InUse(err) {
		return nil, fmt.Errorf("rollout store %s is open in another process (a bridge on the same data_dir?): %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("rollout store %s: %w", dir, err)
	}
	s := &rolloutStore{db: db, maxNodes: int64(maxNodes), seed: maphash.MakeSeed(),
		digests: map[string]uint64{}, tallies: map[tallyKey]map[string]*chefpayload.VersionCount{}, dirty: map[tallyKey]bool{}}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("rollout store %s: %w", dir, err)
	}
	return s, nil
}

// load reads the node count and every tally; every tally is dirty, so that
// it is published (retained) again once the bridge runs.
func (s *rolloutStore) load() error {
	v, closer, err := s.db.Get(countKey)
	switch {
	case err == nil:
		n, _ := binary.Uvarint(v)
		s.nodes = int64(n)
		_ = closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("t"), UpperBound: []byte("u")})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k, version, ok := parseTallyKey(it.Key())
		c, ok2 := decodeCount(it.Value())
		if !ok || !ok2 {
			continue
		}
		if s.tallies[k] == nil {
			s.tallies[k] = map[string]*chefpayload.VersionCount{}
		}
		s.tallies[k][version] = &c
		s.dirty[k] = true
	}
	return it.Close()
}

// close closes the database; a second close does nothing.
func (s *rolloutStore) close() error {
	var err error
	s.closeOnce.Do(func() { err = s.db.Close() })
	return err
}

// digest hashes a state, so that a run that changes nothing costs no disk
// access.
func (s *rolloutStore) digest(status string, cookbooks []chefpayload.CookbookVersion) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(status)
	h.WriteByte(1)
	for _, c := range cookbooks {
		h.WriteString(c.Name)
		h.WriteByte(0)
		h.WriteString(c.Version)
		h.WriteByte(0)
	}
	return h.Sum64()
}

func (s *rolloutStore) stripe(key []byte) *sync.Mutex {
	return &s.stripes[maphash.Bytes(s.seed, key)%uint64(len(s.stripes))]
}

// change is what a run changed in its node's state: the rollout events to
// publish with the run's messages, and, once they are published, what
// commit writes. It holds its node's stripe until commit or abort.
type change struct {
	s       *rolloutStore
	key     []byte
	lock    *sync.Mutex
	state   nodeState
	digest  uint64
	isNew   bool
	events  []rolloutEvent
	deltas  []delta
	org     string
	settled bool
}

// errUntracked is observe's answer for a node beyond MaxNodes.
var errUntracked = errors.New("the rollout store tracks max_nodes nodes already")

// observeRun is observe for a converge: the digest is taken of its
// cookbooks as written, so that a run that changes nothing (nearly every
// run) decodes and allocates nothing besides the node's key. It returns
// nil, nil for a run without cookbooks (an early failure: nothing known).
func (s *rolloutStore) observeRun(c *chefpayload.RunConverge) (*change, error) {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(c.Status)
	h.WriteByte(0)
	n := c.EachCookbook(func(name, version []byte) {
		h.Write(name)
		h.WriteByte(0)
		h.Write(version)
		h.WriteByte(0)
	})
	if n == 0 {
		return nil, nil
	}
	return s.observe(c.OrganizationName, c.NodeName, c.Status, h.Sum64(), c.Cookbooks)
}

// observe compares a run's cookbook versions with its node's last state;
// d is the digest that stands for them (observeRun's, or digest's). It
// returns nil when nothing changed. Otherwise the change holds the node
// until commit (after the run's messages are published) or abort.
func (s *rolloutStore) observe(org, node, status string, d uint64, cookbooks func() []chefpayload.CookbookVersion) (*change, error) {
	key := nodeKey(org, node)
	s.mu.Lock()
	last, known := s.digests[string(key)]
	s.mu.Unlock()
	if known && last == d {
		return nil, nil
	}
	cbs := cookbooks()
	if len(cbs) > maxCookbooksPerNode {
		cbs = cbs[:maxCookbooksPerNode]
	}
	st := nodeState{status: runStatus(status), cookbooks: cbs}
	lock := s.stripe(key)
	lock.Lock()
	c := &change{s: s, key: key, lock: lock, state: st, digest: d, org: org}
	old, found, err := s.read(key)
	if err != nil {
		lock.Unlock()
		return nil, err
	}
	if !found {
		s.mu.Lock()
		full := s.maxNodes > 0 && s.nodes >= s.maxNodes
		s.mu.Unlock()
		if full {
			lock.Unlock()
			return nil, errUntracked
		}
		c.isNew = true
	}
	c.plan(old, found)
	if len(c.deltas) == 0 && !c.isNew {
		// Nothing changed; the digest was not known (since a restart).
		s.mu.Lock()
		s.digests[string(key)] = d
		s.mu.Unlock()
		lock.Unlock()
		return nil, nil
	}
	return c, nil
}

// read returns the node's stored state.
func (s *rolloutStore) read(key []byte) (nodeState, bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nodeState{}, false, nil
	}
	if err != nil {
		return nodeState{}, false, fmt.Errorf("rollout store: %w", err)
	}
	defer closer.Close()
	st, err := decodeNode(v)
	if err != nil {
		return nodeState{}, false, nil // unreadable: as if first seen
	}
	return st, true, nil
}

// plan lists the rollout events (cookbooks whose version is new on the node,
// every one on its first run) and the tally deltas.
func (c *change) plan(old nodeState, found bool) {
	for _, cb := range c.state.cookbooks {
		prev, had := old.version(cb.Name)
		if !found || !had || prev != cb.Version {
			ev := rolloutEvent{cookbook: cb.Name, version: cb.Version}
			if had {
				ev.previous = &prev
			}
			c.events = append(c.events, ev)
		}
		if !had || prev != cb.Version || old.status != c.state.status {
			if had {
				c.deltas = append(c.deltas, delta{tallyKey{c.org, cb.Name}, prev, old.status, -1})
			}
			c.deltas = append(c.deltas, delta{tallyKey{c.org, cb.Name}, cb.Version, c.state.status, +1})
		}
	}
	for _, cb := range old.cookbooks { // cookbooks the node no longer has
		if _, has := c.state.version(cb.Name); !has {
			c.deltas = append(c.deltas, delta{tallyKey{c.org, cb.Name}, cb.Version, old.status, -1})
		}
	}
}

// commit stores the node's new state and applies the tally deltas, after
// the run's messages are published. A failed write is logged by the caller;
// the node's next run then looks new, and its events come again, which is
// what at-least-once allows.
func (c *change) commit() error {
	if c.settled {
		return nil
	}
	c.settled = true
	defer c.lock.Unlock()
	s := c.s
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(c.key, c.state.encode(), nil)
	s.mu.Lock()
	if c.isNew {
		s.nodes++
		_ = b.Set(countKey, binary.AppendUvarint(nil, uint64(s.nodes)), nil)
	}
	s.mu.Unlock()
	s.applyDeltas(b, c.deltas)
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("rollout store: %w", err)
	}
	s.mu.Lock()
	s.digests[string(c.key)] = c.digest
	s.mu.Unlock()
	return nil
}

// abort releases the node without storing anything: the run's messages were
// not published, and its retry must find the same change.
func (c *change) abort() {
	if c.settled {
		return
	}
	c.settled = true
	c.lock.Unlock()
}

// applyDeltas changes the tallies in memory and writes the lines it touched
// into b.
func (s *rolloutStore) applyDeltas(b *pebble.Batch, deltas []delta) {
	if len(deltas) == 0 {
		return
	}
	s.tallyMu.Lock()
	defer s.tallyMu.Unlock()
	for _, d := range deltas {
		t := s.tallies[d.key]
		if t == nil {
			if d.sign < 0 || len(s.tallies) >= maxTallies {
				continue
			}
			t = map[string]*chefpayload.VersionCount{}
			s.tallies[d.key] = t
		}
		v := t[d.version]
		if v == nil {
			if d.sign < 0 || len(t) >= maxVersionsPerTally {
				continue
			}
			v = &chefpayload.VersionCount{}
			t[d.version] = v
		}
		v.Nodes += d.sign
		if d.status == statusSuccess {
			v.Success += d.sign
		} else {
			v.Failure += d.sign
		}
		key := tallyDBKey(d.key, d.version)
		if v.Nodes <= 0 {
			delete(t, d.version)
			_ = b.Delete(key, nil)
		} else {
			_ = b.Set(key, encodeCount(v), nil)
		}
		if len(t) == 0 {
			delete(s.tallies, d.key)
		}
		s.dirty[d.key] = true
	}
}

// forget removes a node (deleted from Chef Infra Server) and its counts.
func (s *rolloutStore) forget(org, node string) error {
	key := nodeKey(org, node)
	lock := s.stripe(key)
	lock.Lock()
	defer lock.Unlock()
	old, found, err := s.read(key)
	if err != nil || !found {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(key, nil)
	s.mu.Lock()
	s.nodes--
	_ = b.Set(countKey, binary.AppendUvarint(nil, uint64(max(s.nodes, 0))), nil)
	delete(s.digests, string(key))
	s.mu.Unlock()
	deltas := make([]delta, 0, len(old.cookbooks))
	for _, cb := range old.cookbooks {
		deltas = append(deltas, delta{tallyKey{org, cb.Name}, cb.Version, old.status, -1})
	}
	s.applyDeltas(b, deltas)
	return b.Commit(pebble.NoSync)
}

// tallySnapshot is one tally to publish.
type tallySnapshot struct {
	key      tallyKey
	versions map[string]chefpayload.VersionCount
}

// takeDirty returns the tallies changed since the last call, and forgets
// that they changed; a failed publish gives them back with markDirty.
func (s *rolloutStore) takeDirty() []tallySnapshot {
	s.tallyMu.Lock()
	defer s.tallyMu.Unlock()
	out := make([]tallySnapshot, 0, len(s.dirty))
	for k := range s.dirty {
		snap := tallySnapshot{key: k, versions: map[string]chefpayload.VersionCount{}}
		for v, c := range s.tallies[k] {
			snap.versions[v] = *c
		}
		out = append(out, snap)
	}
	clear(s.dirty)
	slices.SortFunc(out, func(a, b tallySnapshot) int {
		if c := strings.Compare(a.key.org, b.key.org); c != 0 {
			return c
		}
		return strings.Compare(a.key.cookbook, b.key.cookbook)
	})
	return out
}

func (s *rolloutStore) markDirty(snaps []tallySnapshot) {
	s.tallyMu.Lock()
	defer s.tallyMu.Unlock()
	for _, t := range snaps {
		s.dirty[t.key] = true
	}
}

// stats are the store's sizes, for metrics and the benchmark.
func (s *rolloutStore) stats() (nodes int64, digests, tallies, lines int) {
	s.mu.Lock()
	nodes, digests = s.nodes, len(s.digests)
	s.mu.Unlock()
	s.tallyMu.Lock()
	defer s.tallyMu.Unlock()
	for _, t := range s.tallies {
		lines += len(t)
	}
	return nodes, digests, len(s.tallies), lines
}
