package dashboard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
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
