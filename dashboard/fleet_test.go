package dashboard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

// The fleet keeps its display order through inserts, replacements and
// deletions, as a full sort would give it.
func TestFleetOrderKeptIncrementally(t *testing.T) {
	f := newFleet()
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
	if len(want) != len(f.sorted) {
		t.Fatalf("%d sorted, %d nodes", len(f.sorted), len(want))
	}
	for i := range want {
		if want[i] != f.sorted[i] {
			t.Fatalf("position %d: %s, want %s", i, f.sorted[i].Topic, want[i].Topic)
		}
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
}
