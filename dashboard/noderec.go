package dashboard

import "strings"

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

func newNodeRec(n *Node) *nodeRec {
	r := &nodeRec{received: n.Received, end: n.end.UnixNano()}
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
