package dashboard

import (
	"hash/maphash"
	"math"
	"strings"
	"time"
)

// nodeRec is a node as the fleet holds it: its strings back to back in one
// string, told apart by their ends, and its numbers in place, so that the
// garbage collector finds one pointer in it where a Node has twenty. With
// 100,000 nodes held, marking the fleet is most of what a GC cycle costs,
// and each Chef converge's allocations pace the cycles: a node's pointers
// are CPU that every converge pays for (issue 25: CPU per converge within
// 1.2x of an empty bridge). A page of the Fleet view makes Nodes of the
// records it shows (node).
//
// The strings are copies: a node's topic and names may share the memory of
// the packet they came in (mochi decodes topics without a copy), which a
// node kept as it is would hold alive.
type nodeRec struct {
	blob     string
	ends     [nodeFields]uint32
	counts   [len(countFields)]int64
	has      uint8 // bit i: counts[i] is set
	received int64 // Unix milliseconds
	end      int64 // Node.end in Unix nanoseconds, for sorting
}

// The fields of a nodeRec's blob, in order.
const (
	fieldTopic = iota
	fieldOrg
	fieldName
	fieldStatus
	fieldRunID
	fieldPolicyName
	fieldPolicyGroup
	fieldStartTime
	fieldEndTime
	fieldChefVersion
	fieldErrorClass
	fieldErrorMessage
	fieldFailedCookbook
	fieldOwner
	nodeFields
)

// strings are n's strings, in the order of the fields.
func (n *Node) strings() [nodeFields]*string {
	return [nodeFields]*string{&n.Topic, &n.Org, &n.Name, &n.Status, &n.RunID, &n.PolicyName, &n.PolicyGroup,
		&n.StartTime, &n.EndTime, &n.ChefVersion, &n.ErrorClass, &n.ErrorMessage, &n.FailedCookbook, &n.Owner}
}

// countFields are n's optional numbers, in the order of nodeRec.counts.
var countFields = [...]func(n *Node) **int64{
	func(n *Node) **int64 { return &n.DurationMS },
	func(n *Node) **int64 { return &n.Total },
	func(n *Node) **int64 { return &n.Updated },
	func(n *Node) **int64 { return &n.Failed },
}

func newNodeRec(n *Node) nodeRec {
	r := nodeRec{received: n.Received, end: sortNanos(n.end)}
	fields := n.strings()
	size := 0
	for _, f := range fields {
		size += len(*f)
	}
	var b strings.Builder
	b.Grow(size)
	for i, f := range fields {
		b.WriteString(*f)
		r.ends[i] = uint32(b.Len())
	}
	r.blob = b.String()
	for i, get := range countFields {
		if c := *get(n); c != nil {
			r.counts[i], r.has = *c, r.has|1<<i
		}
	}
	return r
}

// sortNanos is t in Unix nanoseconds, held to what an int64 holds: an end
// time before 1678 or after 2262 (a hand-published status may say anything)
// would wrap around (time.UnixNano), and sort as another time.
func sortNanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// field is the field i of the record's strings.
func (r *nodeRec) field(i int) string {
	start := uint32(0)
	if i > 0 {
		start = r.ends[i-1]
	}
	return r.blob[start:r.ends[i]]
}

// node is the record as a Node, for a page: its strings are the record's.
func (r *nodeRec) node() *Node {
	n := &Node{Received: r.received}
	for i, f := range n.strings() {
		*f = r.field(i)
	}
	for i, get := range countFields {
		if r.has&(1<<i) != 0 {
			c := r.counts[i]
			*get(n) = &c
		}
	}
	return n
}

// nodeSlab holds the fleet's records in slots of one slice, found by the
// hash of their topic: the GC scans one pointer per node (its blob), where
// a map of topics to records had three (the key, the value, and the
// record's blob) and an object per node to mark.
type nodeSlab struct {
	recs   []nodeRec // a free slot's blob is ""
	free   []int32
	byHash map[uint64]int32
	// collided holds the topics whose hash another topic held when they
	// came: looked up first, by their topic.
	collided map[string]int32
	seed     maphash.Seed
}

func newNodeSlab() nodeSlab {
	return nodeSlab{byHash: map[uint64]int32{}, collided: map[string]int32{}, seed: maphash.MakeSeed()}
}

// at is the record in slot.
func (s *nodeSlab) at(slot int32) *nodeRec { return &s.recs[slot] }

// len is the number of records held.
func (s *nodeSlab) len() int { return len(s.recs) - len(s.free) }

// lookup finds topic's slot.
func (s *nodeSlab) lookup(topic string) (int32, bool) {
	if slot, ok := s.collided[topic]; ok {
		return slot, true
	}
	slot, ok := s.byHash[maphash.String(s.seed, topic)]
	if !ok || s.recs[slot].field(fieldTopic) != topic {
		return 0, false
	}
	return slot, true
}

// add holds r, whose topic is not held, and returns its slot.
func (s *nodeSlab) add(r nodeRec) int32 {
	var slot int32
	if n := len(s.free); n > 0 {
		slot, s.free = s.free[n-1], s.free[:n-1]
		s.recs[slot] = r
	} else {
		slot = int32(len(s.recs))
		s.recs = append(s.recs, r)
	}
	topic := r.field(fieldTopic)
	h := maphash.String(s.seed, topic)
	if _, taken := s.byHash[h]; taken {
		s.collided[topic] = slot
	} else {
		s.byHash[h] = slot
	}
	return slot
}

// remove lets slot go.
func (s *nodeSlab) remove(slot int32) {
	topic := s.recs[slot].field(fieldTopic)
	if held, ok := s.collided[topic]; ok && held == slot {
		delete(s.collided, topic)
	} else if h := maphash.String(s.seed, topic); s.byHash[h] == slot {
		delete(s.byHash, h)
	}
	s.recs[slot] = nodeRec{}
	s.free = append(s.free, slot)
}
