package dashboard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"
	"unsafe"

	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

// The fleet keeps its display order through inserts, replacements and
// deletions, as a full sort would give it.
func TestFleetOrderKeptIncrementally(t *testing.T) {
	f := newFleet()
	f.sorted.chunk = 8 // many chunks: splits, and chunks emptied
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []string{"success", "failure", "unknown"}
	for i := 0; i < 5000; i++ {
		topic := fmt.Sprintf("chef/o/n%03d/status", r.IntN(300))
		if r.IntN(10) == 0 {
			f.set(topic, nil)
			continue
		}
		end := base.Add(time.Duration(r.IntN(50)) * time.Minute)
		n := &Node{Topic: topic, Name: topic[7:11], Status: statuses[r.IntN(3)], end: end}
		f.set(topic, n)
	}
	want := make([]*Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		want = append(want, n)
	}
	sort.Slice(want, func(i, j int) bool { return before(want[i], want[j]) })
	got := slices.Collect(f.sorted.all())
	if len(want) != len(got) || f.sorted.len() != len(got) {
		t.Fatalf("%d sorted (len %d), %d nodes", len(got), f.sorted.len(), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("position %d: %s, want %s", i, got[i].Topic, want[i].Topic)
		}
	}
	for _, ch := range f.sorted.chunks {
		if len(ch) == 0 || len(ch) > f.sorted.chunk {
			t.Fatalf("a chunk of %d nodes; want 1 to %d", len(ch), f.sorted.chunk)
		}
	}
	if len(f.sorted.chunks) < 10 {
		t.Errorf("%d chunks for %d nodes: the test does not exercise splitting", len(f.sorted.chunks), len(got))
	}
	for _, n := range got {
		f.set(n.Topic, nil)
	}
	if f.sorted.len() != 0 || len(f.sorted.chunks) != 0 || len(f.nodes) != 0 {
		t.Errorf("after deleting every node: %d sorted in %d chunks, %d nodes", f.sorted.len(), len(f.sorted.chunks), len(f.nodes))
	}
}

func BenchmarkFleetQuery10k(b *testing.B) {
	f := newFleet()
	now := time.Now()
	for i := 0; i < 10000; i++ {
		topic := fmt.Sprintf("chef/o/n%05d/status", i)
		f.set(topic, &Node{Topic: topic, Name: topic, Status: "success", end: now.Add(-time.Duration(i) * time.Second)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		topic := fmt.Sprintf("chef/o/n%05d/status", i%10000)
		f.set(topic, &Node{Topic: topic, Name: topic, Status: "failure", end: now})
		f.query(FleetQuery{Limit: 300})
	}
}

// TestNodeReadsTheAdaptersSummary: a status the Chef adapter publishes
// (chefpayload.Summary, the one declaration) shows every field the fleet
// has a column for; a hand-published one with a string failed_cookbook and
// no counts still shows, without a made-up failed count.
func TestNodeReadsTheAdaptersSummary(t *testing.T) {
	s := func(v string) *string { return &v }
	i := func(v int64) *int64 { return &v }
	sum := chefpayload.Summary{
		NodeName: "web 01", OrganizationName: "acme", RunID: "r1", Status: "failure",
		StartTime: s("2026-01-01T00:00:00Z"), EndTime: s("2026-01-01T00:01:00Z"), DurationMS: i(60000),
		TotalResourceCount: i(10), UpdatedResourceCount: i(2), FailedResourceCount: 1,
		PolicyName: s("web"), PolicyGroup: s("prod"), ChefVersion: s("18.2.7"),
		ErrorClass: s("Mixlib::ShellOut::ShellCommandFailed"), ErrorMessage: s("exit 1"),
		FailedCookbook: &chefpayload.FailedCookbook{Name: "nginx", Version: s("1.2.0"), BlamedBy: chefpayload.BlamedByResource},
		Owner:          s("web-team"),
	}
	payload, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	n, ok := parseNode("chef/acme/web%2001/status", "topic-org", "topic-node", payload, now)
	if !ok {
		t.Fatal("the adapter's summary was not read")
	}
	want := Node{Topic: "chef/acme/web%2001/status", Org: "acme", Name: "web 01", Status: "failure", RunID: "r1",
		PolicyName: "web", PolicyGroup: "prod", StartTime: "2026-01-01T00:00:00Z", EndTime: "2026-01-01T00:01:00Z",
		DurationMS: i(60000), Total: i(10), Updated: i(2), Failed: i(1), ChefVersion: "18.2.7",
		ErrorClass: "Mixlib::ShellOut::ShellCommandFailed", ErrorMessage: "exit 1", FailedCookbook: "nginx 1.2.0",
		Owner: "web-team", Received: now.UnixMilli()}
	n.end = time.Time{}
	if !reflect.DeepEqual(*n, want) {
		t.Errorf("got  %+v\nwant %+v", *n, want)
	}

	n, ok = parseNode("chef/o/n/status", "o", "n", []byte(`{"status":"success","failed_cookbook":"mysql"}`), now)
	if !ok || n.Name != "n" || n.Org != "o" || n.Failed != nil || n.FailedCookbook != "mysql" {
		t.Errorf("hand-published status: %+v, %v", n, ok)
	}
	// Read as encoding/json would: the last of duplicate names, invalid
	// UTF-8 replaced, unknown names ignored.
	n, ok = parseNode("chef/o/n/status", "o", "n", []byte("{\"status\":\"success\",\"status\":\"failure\",\"error_message\":\"bad \xff byte\",\"extra\":[1]}"), now)
	if !ok || n.Status != "failure" || n.ErrorMessage != "bad \uFFFD byte" {
		t.Errorf("a status with duplicate names and invalid UTF-8: %+v, %v", n, ok)
	}
	if _, ok := parseNode("chef/o/n/status", "o", "n", []byte(`["not an object"]`), now); ok {
		t.Error("a payload that is not an object was read")
	}
}

// An empty fleet's page has empty arrays, not nulls: the page's script
// reads them as arrays (a null stopped the view before its empty state).
func TestAnEmptyFleetPageHasArrays(t *testing.T) {
	b, err := json.Marshal(newFleet().query(FleetQuery{Limit: 10}))
	if err != nil {
		t.Fatal(err)
	}
	var page map[string]any
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"orgs", "policy_groups", "rows"} {
		if _, ok := page[k].([]any); !ok {
			t.Errorf("%s is %v in %s, want an array", k, page[k], b)
		}
	}
}

// BenchmarkFleetSet is a node's new status (its run ended now) in fleets
// of growing size: what the aggregator spends per Chef converge. It must
// not grow with the fleet (issue 25: CPU per converge within 1.2x of an
// empty bridge with 100,000 nodes held).
func BenchmarkFleetSet(b *testing.B) {
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			f := newFleet()
			now := time.Now()
			topics := make([]string, size)
			for i := range size {
				topics[i] = fmt.Sprintf("chef/o/n%06d/status", i)
				f.set(topics[i], &Node{Topic: topics[i], Name: topics[i], Status: "success", end: now.Add(-time.Duration(i) * time.Second)})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				topic := topics[i%size]
				f.set(topic, &Node{Topic: topic, Name: topic, Status: "success", end: now.Add(time.Duration(i) * time.Millisecond)})
			}
		})
	}
}

// TestFleetSharesCommonStrings: nodes with the same organisation, status and
// Chef version hold one copy of each, however they were decoded.
func TestFleetSharesCommonStrings(t *testing.T) {
	f := newFleet()
	for i := range 3 {
		n := &Node{Topic: fmt.Sprintf("chef/o/n%d/status", i), Org: string([]byte("org")), Status: string([]byte("success")), ChefVersion: string([]byte("18.2.7"))}
		f.set(n.Topic, n)
	}
	a, b := f.nodes["chef/o/n0/status"], f.nodes["chef/o/n2/status"]
	if unsafe.StringData(a.Org) != unsafe.StringData(b.Org) || unsafe.StringData(a.Status) != unsafe.StringData(b.Status) || unsafe.StringData(a.ChefVersion) != unsafe.StringData(b.ChefVersion) {
		t.Fatal("two nodes hold their own copies of the strings they share")
	}
}

// TestFleetKeepsNoPacketAlive: a node's strings do not share the memory of
// the packet its status came in (mochi decodes topics without a copy), or
// every node would hold a whole packet.
func TestFleetKeepsNoPacketAlive(t *testing.T) {
	packet := make([]byte, 4096)
	copy(packet, "chef/org/web1/status")
	topic := unsafe.String(&packet[0], len("chef/org/web1/status"))
	f := newFleet()
	f.set(topic, &Node{Topic: topic, Org: topic[5:8], Name: topic[9:13], Status: "success"})
	n := f.nodes[topic]
	start, end := uintptr(unsafe.Pointer(&packet[0])), uintptr(unsafe.Pointer(&packet[0]))+uintptr(len(packet))
	for _, s := range []string{n.Topic, n.Org, n.Name} {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p >= start && p < end {
			t.Fatalf("%q shares the packet's memory", s)
		}
	}
	for k := range f.nodes {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(k))); p >= start && p < end {
			t.Fatal("the fleet's key shares the packet's memory")
		}
	}
}

// BenchmarkParseNode is the dashboard's cost of one Chef status: it runs for
// every retained status published (a fleet's first publish is 100,000 of
// them) on one of the bridge's cores.
func BenchmarkParseNode(b *testing.B) {
	s := func(v string) *string { return &v }
	i := func(v int64) *int64 { return &v }
	payload, err := json.Marshal(chefpayload.Summary{
		NodeName: "web01.example.com", OrganizationName: "acme", RunID: "3f1c0b6e-8f0e-4a4b-9a6e-2d4f6c1b9e11", Status: "success",
		StartTime: s("2026-01-01T00:00:00Z"), EndTime: s("2026-01-01T00:01:00Z"), DurationMS: i(60000),
		TotalResourceCount: i(120), UpdatedResourceCount: i(2), PolicyName: s("web"), PolicyGroup: s("prod"), ChefVersion: s("18.2.7"),
		Owner: s("web-team"),
	})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseNode("chef/acme/web01.example.com/status", "acme", "web01.example.com", payload, now); !ok {
			b.Fatal("not parsed")
		}
	}
}
