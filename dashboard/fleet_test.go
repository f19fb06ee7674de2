package dashboard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
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
	var want []int32
	for slot := range f.nodes.recs {
		if f.nodes.recs[slot].blob != "" {
			want = append(want, int32(slot))
		}
	}
	sort.Slice(want, func(i, j int) bool { return f.sorted.before(want[i], want[j]) })
	got := slices.Collect(f.sorted.all())
	if len(want) != len(got) || f.sorted.len() != len(got) || f.nodes.len() != len(got) {
		t.Fatalf("%d sorted (len %d), %d nodes", len(got), f.sorted.len(), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("position %d: %s, want %s", i, f.nodes.at(got[i]).field(fieldTopic), f.nodes.at(want[i]).field(fieldTopic))
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
	var topics []string
	for _, slot := range got {
		topics = append(topics, f.nodes.at(slot).field(fieldTopic))
	}
	for _, topic := range topics {
		f.set(topic, nil)
	}
	if f.sorted.len() != 0 || len(f.sorted.chunks) != 0 || f.nodes.len() != 0 || len(f.nodes.byHash)+len(f.nodes.collided) != 0 {
		t.Errorf("after deleting every node: %d sorted in %d chunks, %d nodes", f.sorted.len(), len(f.sorted.chunks), f.nodes.len())
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

// TestNodeRecordRoundTrip: a node held reads back as it was set, optional
// numbers set or not, and the record holds no pointer but its strings'.
func TestNodeRecordRoundTrip(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	in := Node{Topic: "chef/o/web%2F1/status", Org: "o", Name: "web/1", Status: "failure", RunID: "r-1", PolicyName: "web",
		PolicyGroup: "prod", StartTime: "2026-01-01T00:00:00Z", EndTime: "2026-01-01T00:01:00Z", DurationMS: i(60000), Total: i(0),
		Failed: i(3), ChefVersion: "18.2.7", ErrorClass: "E", ErrorMessage: "bad \xff", FailedCookbook: "mysql", Owner: "db-team", Received: 42}
	f := newFleet()
	f.set(in.Topic, &in)
	page := f.query(FleetQuery{Limit: 10})
	if len(page.Rows) != 1 {
		t.Fatalf("%d rows", len(page.Rows))
	}
	got, _ := json.Marshal(page.Rows[0])
	want, _ := json.Marshal(&in)
	if string(got) != string(want) {
		t.Fatalf("read back %s\nwant %s", got, want)
	}
	if strings.Contains(string(got), "updated_resource_count") {
		t.Error("a count the status lacked is shown")
	}
	typ := reflect.TypeFor[nodeRec]()
	for k := range typ.NumField() {
		if fld := typ.Field(k); fld.Name != "blob" && fld.Type.Kind() != reflect.Array && fld.Type.Kind() != reflect.Int64 && fld.Type.Kind() != reflect.Uint8 {
			t.Errorf("nodeRec.%s is a %s: every node held would give the GC more to scan", fld.Name, fld.Type)
		}
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
	slot, ok := f.nodes.lookup(topic)
	if !ok {
		t.Fatal("not held")
	}
	n := f.nodes.at(slot)
	start, end := uintptr(unsafe.Pointer(&packet[0])), uintptr(unsafe.Pointer(&packet[0]))+uintptr(len(packet))
	for _, s := range []string{n.blob, n.field(fieldOrg), n.field(fieldName)} {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p >= start && p < end {
			t.Fatalf("%q shares the packet's memory", s)
		}
	}
	for k := range f.nodes.collided {
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

// TestFleetNodesAreFewObjects: a node held costs the garbage collector
// one object to mark (its strings; its record is in a slot of the fleet's
// slab, its counts in the record), whatever its status held: with 100,000
// nodes, marking the fleet is most of a GC cycle's work, which each Chef
// converge pays for (issue 25).
func TestFleetNodesAreFewObjects(t *testing.T) {
	s := func(v string) *string { return &v }
	i := func(v int64) *int64 { return &v }
	const nodes = 20_000
	payloads := make([][]byte, nodes)
	for k := range payloads {
		var err error
		payloads[k], err = json.Marshal(chefpayload.Summary{
			NodeName: fmt.Sprintf("web%05d.example.com", k), OrganizationName: "acme", RunID: fmt.Sprintf("3f1c0b6e-8f0e-4a4b-9a6e-2d4f6c1b%04d", k), Status: "failure",
			StartTime: s("2026-01-01T00:00:00+02:00"), EndTime: s(fmt.Sprintf("2026-01-01T00:%02d:00+02:00", k%60)), DurationMS: i(60000),
			TotalResourceCount: i(120), UpdatedResourceCount: i(2), FailedResourceCount: 1, PolicyName: s("web"), PolicyGroup: s("prod"),
			ChefVersion: s("18.2.7"), ErrorClass: s("Mixlib::ShellOut::ShellCommandFailed"), ErrorMessage: s(fmt.Sprintf("Expected process to exit with [0], but received '%d'", k%3)),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f := newFleet()
	now := time.Now()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for k, payload := range payloads {
		topic := fmt.Sprintf("chef/acme/web%05d.example.com/status", k)
		n, ok := parseNode(topic, "acme", "", payload, now)
		if !ok {
			t.Fatal("not parsed")
		}
		f.set(topic, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perNode := float64(after.HeapObjects-before.HeapObjects) / nodes
	t.Logf("%.2f heap objects per node held", perNode)
	if perNode > 1.5 {
		t.Fatalf("%.1f heap objects per node held, want at most 1.5", perNode)
	}
	runtime.KeepAlive(f)
	runtime.KeepAlive(payloads) // counted in before: they must be alive in after too
}

// TestFleetOrdersEndTimesBeyondNanoseconds: an end time that Unix
// nanoseconds cannot hold (before 1678, after 2262: a hand-published
// status may say anything) still sorts newest first, as time.Time did,
// instead of wrapping around.
func TestFleetOrdersEndTimesBeyondNanoseconds(t *testing.T) {
	now := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	f := newFleet()
	for _, c := range []struct{ name, end string }{
		{"past", "1000-01-01T00:00:00Z"}, {"today", "2026-11-28T04:00:00Z"}, {"future", "3000-01-01T00:00:00Z"},
	} {
		n, ok := parseNode("chef/o/"+c.name+"/status", "o", c.name, []byte(`{"status":"success","end_time":"`+c.end+`"}`), now)
		if !ok {
			t.Fatal("not parsed")
		}
		f.set(n.Topic, n)
	}
	var got []string
	for _, r := range f.query(FleetQuery{Limit: 10}).Rows {
		got = append(got, r.Name)
	}
	if want := []string{"future", "today", "past"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v (newest first)", got, want)
	}
}
