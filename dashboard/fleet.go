package dashboard

import (
	"bytes"
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

// Node is one Chef node's last run, from its retained status message. Fields
// the payload lacks are empty; fields it adds (the chef adapter grows) are
// ignored, but for failed_cookbook and owner, which are shown when present.
type Node struct {
	Topic          string `json:"topic"`
	Org            string `json:"org"`
	Name           string `json:"name"`
	Status         string `json:"status"`
	RunID          string `json:"run_id,omitempty"`
	PolicyName     string `json:"policy_name,omitempty"`
	PolicyGroup    string `json:"policy_group,omitempty"`
	StartTime      string `json:"start_time,omitempty"`
	EndTime        string `json:"end_time,omitempty"`
	DurationMS     *int64 `json:"duration_ms,omitempty"`
	Total          *int64 `json:"total_resource_count,omitempty"`
	Updated        *int64 `json:"updated_resource_count,omitempty"`
	Failed         *int64 `json:"failed_resource_count,omitempty"`
	ChefVersion    string `json:"chef_version,omitempty"`
	ErrorClass     string `json:"error_class,omitempty"`
	ErrorMessage   string `json:"error_message,omitempty"`
	FailedCookbook string `json:"failed_cookbook,omitempty"`
	Owner          string `json:"owner,omitempty"`
	// Received is when the dashboard got the status, in Unix milliseconds.
	Received int64 `json:"received"`

	end time.Time // EndTime parsed, for sorting
}

// statusPayload is chef/<org>/<node>/status as the Chef adapter publishes it
// (chefpayload.Summary), read leniently where a hand-published status may
// differ: a missing failed_resource_count is not shown as 0, and
// failed_cookbook and owner may also be plain strings.
type statusPayload struct {
	chefpayload.Summary
	FailedResourceCount *int64          `json:"failed_resource_count"`
	FailedCookbook      json.RawMessage `json:"failed_cookbook"`
	Owner               json.RawMessage `json:"owner"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// label renders a field that may be a string, or an object with a name (and
// a version), such as {"name":"mysql","version":"8.0.2"}.
func label(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Name    any `json:"name"`
		Team    any `json:"team"`
		Version any `json:"version"`
	}
	if json.Unmarshal(raw, &o) == nil {
		name := scalar(o.Name)
		if name == "" {
			name = scalar(o.Team)
		}
		if v := scalar(o.Version); v != "" && name != "" {
			return name + " " + v
		}
		if name != "" {
			return name
		}
	}
	return string(raw)
}

func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64, bool:
		b, _ := json.Marshal(v)
		return string(b)
	}
	return ""
}

// parseNode reads a status message; org and name come from the topic when
// the payload lacks them. ok is false for a payload that is not a JSON object.
func parseNode(topic, org, name string, payload []byte, now time.Time) (*Node, bool) {
	var p statusPayload
	// JSON v2 (the Go team's, to be encoding/json/v2) reads a status in a
	// third of encoding/json's time, and this runs for every status
	// published (a fleet's first publish is one per node). Names match
	// exactly, as the schema spells them; duplicate names and invalid UTF-8
	// are let through, as encoding/json does.
	if err := jsonv2.Unmarshal(payload, &p, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)); err != nil {
		return nil, false
	}
	n := &Node{
		Topic: topic, Org: org, Name: name, Status: p.Status, RunID: p.RunID,
		PolicyName: str(p.PolicyName), PolicyGroup: str(p.PolicyGroup),
		StartTime: str(p.StartTime), EndTime: str(p.EndTime), DurationMS: p.DurationMS,
		Total: p.TotalResourceCount, Updated: p.UpdatedResourceCount, Failed: p.FailedResourceCount, ChefVersion: str(p.ChefVersion),
		ErrorClass: str(p.ErrorClass), ErrorMessage: str(p.ErrorMessage),
		FailedCookbook: label(p.FailedCookbook), Owner: label(p.Owner),
		Received: now.UnixMilli(),
	}
	if p.NodeName != "" {
		n.Name = p.NodeName
	}
	if p.OrganizationName != "" {
		n.Org = p.OrganizationName
	}
	if n.Status == "" {
		n.Status = "unknown"
	}
	n.end, _ = time.Parse(time.RFC3339, n.EndTime)
	if n.end.IsZero() {
		n.end = now
	}
	return n, true
}

// fleet holds every node's last status, keyed by topic, and the same nodes
// kept in display order, so that a query only filters: with 10,000 nodes
// and hundreds of status updates a second, sorting per query would cost
// more than everything else.
type fleet struct {
	mu      sync.Mutex
	nodes   nodeSlab
	sorted  order // the nodes' slots: failures first, newest first, then by name
	orgs    map[string]int
	groups  map[string]int
	version uint64
}

func newFleet() *fleet {
	f := &fleet{nodes: newNodeSlab(), orgs: map[string]int{}, groups: map[string]int{}}
	f.sorted.before = func(a, b int32) bool { return before(f.nodes.at(a), f.nodes.at(b)) }
	return f
}

// count adds d to the node counts of r's org and policy group.
func (f *fleet) count(r *nodeRec, d int) {
	for _, c := range []struct {
		m map[string]int
		k string
	}{{f.orgs, r.field(fieldOrg)}, {f.groups, r.field(fieldPolicyGroup)}} {
		if c.k == "" {
			continue
		}
		if _, ok := c.m[c.k]; !ok {
			c.k = strings.Clone(c.k) // a key would keep its node's strings alive
		}
		if c.m[c.k] += d; c.m[c.k] <= 0 {
			delete(c.m, c.k)
		}
	}
}

// before is the display order.
func before(a, b *nodeRec) bool {
	if ra, rb := statusRank(a.field(fieldStatus)), statusRank(b.field(fieldStatus)); ra != rb {
		return ra < rb
	}
	if a.end != b.end {
		return a.end > b.end
	}
	if an, bn := a.field(fieldName), b.field(fieldName); an != bn {
		return an < bn
	}
	return a.field(fieldTopic) < b.field(fieldTopic)
}

// set records a node's status; a nil node deletes it (a cleared retained message).
func (f *fleet) set(topic string, n *Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.nodes.lookup(topic); ok {
		f.sorted.remove(old)
		f.count(f.nodes.at(old), -1)
		f.nodes.remove(old)
	} else if n == nil {
		return
	}
	if n != nil {
		n.Topic = topic
		slot := f.nodes.add(newNodeRec(n))
		f.count(f.nodes.at(slot), 1)
		f.sorted.insert(slot)
	}
	f.version++
}

// defaultChunk is the most nodes an order's chunk holds.
const defaultChunk = 512

// order keeps nodes sorted by before, in chunks of at most chunk nodes
// (defaultChunk when 0), so that a status update moves at most one chunk's
// pointers, not the whole fleet's: every converge updates its node, and
// with 100,000 nodes in one slice that was two 800 KB moves per converge
// (issue 25: CPU per converge must not grow with the fleet). Nodes are
// told apart by before, which orders any two distinct topics.
type order struct {
	chunks [][]int32 // slots of a nodeSlab; none empty
	n      int
	chunk  int
	before func(a, b int32) bool // the order of two slots' nodes
}

// find returns the chunk where slot is or would go, and its place there.
func (o *order) find(slot int32) (c, i int) {
	c = sort.Search(len(o.chunks), func(i int) bool { ch := o.chunks[i]; return !o.before(ch[len(ch)-1], slot) })
	if c == len(o.chunks) {
		if c == 0 {
			return 0, 0
		}
		c-- // after every node: at the end of the last chunk
	}
	ch := o.chunks[c]
	return c, sort.Search(len(ch), func(i int) bool { return !o.before(ch[i], slot) })
}

func (o *order) insert(slot int32) {
	limit := o.chunk
	if limit <= 0 {
		limit = defaultChunk
	}
	o.n++
	if len(o.chunks) == 0 {
		o.chunks = append(o.chunks, append(make([]int32, 0, limit), slot))
		return
	}
	c, i := o.find(slot)
	ch := slices.Insert(o.chunks[c], i, slot)
	if len(ch) > limit { // split in two halves
		tail := append(make([]int32, 0, limit), ch[len(ch)/2:]...)
		ch = ch[:len(ch)/2]
		o.chunks = slices.Insert(o.chunks, c+1, tail)
	}
	o.chunks[c] = ch
}

// remove takes slot out; false when it is not there.
func (o *order) remove(slot int32) bool {
	if len(o.chunks) == 0 {
		return false
	}
	c, i := o.find(slot)
	ch := o.chunks[c]
	if i >= len(ch) || ch[i] != slot {
		return false
	}
	o.n--
	if ch = slices.Delete(ch, i, i+1); len(ch) == 0 {
		o.chunks = slices.Delete(o.chunks, c, c+1)
		return true
	}
	o.chunks[c] = ch
	return true
}

// len is the number of nodes.
func (o *order) len() int { return o.n }

// all yields the slots in order.
func (o *order) all() iter.Seq[int32] {
	return func(yield func(int32) bool) {
		for _, ch := range o.chunks {
			for _, slot := range ch {
				if !yield(slot) {
					return
				}
			}
		}
	}
}

// FleetQuery narrows and pages the fleet.
type FleetQuery struct {
	Org, PolicyGroup, Status string
	// Search matches a substring of the node name, case-insensitively.
	Search        string
	Offset, Limit int
}

// FleetPage is the answer to a FleetQuery.
type FleetPage struct {
	// Total is every node; Matched those that pass the org, group and search
	// filters; Counts splits Matched by status; Rows are the page of Matched
	// (and of Status, when given) from Offset.
	Total   int            `json:"total"`
	Matched int            `json:"matched"`
	Counts  map[string]int `json:"counts"`
	// Listed is how many rows the status filter leaves, the length to scroll.
	Listed       int      `json:"listed"`
	Offset       int      `json:"offset"`
	Orgs         []string `json:"orgs"`
	PolicyGroups []string `json:"policy_groups"`
	Rows         []*Node  `json:"rows"`
	Version      uint64   `json:"version"`
}

// statusRank sorts failures first, then anything unusual, then successes.
func statusRank(s string) int {
	switch s {
	case "failure":
		return 0
	case "success":
		return 2
	}
	return 1
}

func (f *fleet) query(q FleetQuery) FleetPage {
	f.mu.Lock()
	defer f.mu.Unlock()
	page := FleetPage{Total: f.sorted.len(), Counts: map[string]int{}, Offset: q.Offset, Rows: []*Node{}, Version: f.version}
	search := strings.ToLower(q.Search)
	failed, succeeded := 0, 0
	for slot := range f.sorted.all() {
		r := f.nodes.at(slot)
		if (q.Org != "" && r.field(fieldOrg) != q.Org) || (q.PolicyGroup != "" && r.field(fieldPolicyGroup) != q.PolicyGroup) ||
			(search != "" && !strings.Contains(strings.ToLower(r.field(fieldName)), search)) {
			continue
		}
		page.Matched++
		status := r.field(fieldStatus)
		switch status { // two counters, not a map update per node
		case "failure":
			failed++
		case "success":
			succeeded++
		default:
			page.Counts[status]++
		}
		if q.Status != "" && status != q.Status {
			continue
		}
		if page.Listed >= q.Offset && len(page.Rows) < q.Limit {
			page.Rows = append(page.Rows, r.node())
		}
		page.Listed++
	}
	if failed > 0 {
		page.Counts["failure"] = failed
	}
	if succeeded > 0 {
		page.Counts["success"] = succeeded
	}
	// Arrays even when empty: the page (and any client) reads them as such;
	// a null stopped the Fleet view before it showed its empty state.
	page.Orgs = append([]string{}, slices.Sorted(maps.Keys(f.orgs))...)
	page.PolicyGroups = append([]string{}, slices.Sorted(maps.Keys(f.groups))...)
	return page
}
