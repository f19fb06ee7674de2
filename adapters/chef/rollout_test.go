package chef

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

func openTestStore(t testing.TB, dir string, maxNodes int) *rolloutStore {
	t.Helper()
	s, err := openRollout(dir, maxNodes, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cbs parses "mysql=8.0.1 ntp=3.6.2" into sorted cookbook versions.
func cbs(s string) []chefpayload.CookbookVersion {
	var out []chefpayload.CookbookVersion
	for _, f := range strings.Fields(s) {
		name, version, _ := strings.Cut(f, "=")
		out = append(out, chefpayload.CookbookVersion{Name: name, Version: version})
	}
	slices.SortFunc(out, func(a, b chefpayload.CookbookVersion) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// events renders a change's events as "mysql 8.0.2 (was 8.0.1)".
func events(c *change) string {
	if c == nil {
		return "none"
	}
	var out []string
	for _, e := range c.events {
		s := e.cookbook + " " + e.version
		if e.previous != nil {
			s += " (was " + *e.previous + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// tallies renders every tally as "o/mysql 8.0.1:1n1s0f".
func tallies(s *rolloutStore) string {
	s.tallyMu.Lock()
	defer s.tallyMu.Unlock()
	var out []string
	for k, t := range s.tallies {
		for v, c := range t {
			out = append(out, fmt.Sprintf("%s/%s %s:%dn%ds%df", k.org, k.cookbook, v, c.Nodes, c.Success, c.Failure))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func observe(t *testing.T, s *rolloutStore, node, status, cookbooks string) *change {
	t.Helper()
	c, err := s.observe("o", node, status, s.digest(status, cbs(cookbooks)), func() []chefpayload.CookbookVersion { return cbs(cookbooks) })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func commit(t *testing.T, c *change) {
	t.Helper()
	if c != nil {
		if err := c.commit(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRolloutStore(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 0)
	steps := []struct {
		name, node, status, cookbooks, events, tallies string
	}{
		{"first run ever: every cookbook", "db01", "success", "mysql=8.0.1 ntp=3.6.2", "mysql 8.0.1, ntp 3.6.2",
			"o/mysql 8.0.1:1n1s0f o/ntp 3.6.2:1n1s0f"},
		{"the same again: nothing", "db01", "success", "mysql=8.0.1 ntp=3.6.2", "none",
			"o/mysql 8.0.1:1n1s0f o/ntp 3.6.2:1n1s0f"},
		{"a second node", "db02", "success", "mysql=8.0.1", "mysql 8.0.1",
			"o/mysql 8.0.1:2n2s0f o/ntp 3.6.2:1n1s0f"},
		{"a new version that fails", "db01", "failure", "mysql=8.0.2 ntp=3.6.2", "mysql 8.0.2 (was 8.0.1)",
			"o/mysql 8.0.1:1n1s0f o/mysql 8.0.2:1n0s1f o/ntp 3.6.2:1n0s1f"},
		{"the same versions, now succeeding: counts only", "db01", "success", "mysql=8.0.2 ntp=3.6.2", "",
			"o/mysql 8.0.1:1n1s0f o/mysql 8.0.2:1n1s0f o/ntp 3.6.2:1n1s0f"},
		{"a cookbook dropped, one added", "db01", "success", "mysql=8.0.2 chrony=1.0.0", "chrony 1.0.0",
			"o/chrony 1.0.0:1n1s0f o/mysql 8.0.1:1n1s0f o/mysql 8.0.2:1n1s0f"},
	}
	for _, st := range steps {
		c := observe(t, s, st.node, st.status, st.cookbooks)
		if got := events(c); got != st.events {
			t.Errorf("%s: events %q, want %q", st.name, got, st.events)
		}
		commit(t, c)
		if got := tallies(s); got != st.tallies {
			t.Errorf("%s: tallies %q, want %q", st.name, got, st.tallies)
		}
	}

	// Not published: nothing stored, and the retry finds the same change.
	c := observe(t, s, "db02", "success", "mysql=8.0.2")
	c.abort()
	c = observe(t, s, "db02", "success", "mysql=8.0.2")
	if got := events(c); got != "mysql 8.0.2 (was 8.0.1)" {
		t.Errorf("after an abort: %q", got)
	}
	commit(t, c)
	before := tallies(s)
	if n, _, _, _ := s.stats(); n != 2 {
		t.Errorf("%d nodes", n)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}

	// A restart keeps the versions and the tallies, and every tally is to
	// be published again.
	s = openTestStore(t, dir, 0)
	defer s.close()
	if got := tallies(s); got != before {
		t.Errorf("after a restart: %q, want %q", got, before)
	}
	if dirty := s.takeDirty(); len(dirty) != 2 {
		t.Errorf("%d tallies to publish after a restart", len(dirty))
	}
	if c := observe(t, s, "db01", "success", "mysql=8.0.2 chrony=1.0.0"); c != nil {
		t.Errorf("after a restart, an unchanged run: %q", events(c))
	}
	if got := events(observe(t, s, "db02", "success", "mysql=8.0.3")); got != "mysql 8.0.3 (was 8.0.2)" {
		t.Errorf("after a restart: %q", got)
	}

	// A deleted node's counts go.
	if err := s.forget("o", "db01"); err != nil {
		t.Fatal(err)
	}
	if got := tallies(s); got != "o/mysql 8.0.2:1n1s0f" {
		t.Errorf("after forgetting db01: %q", got)
	}
	if n, _, _, _ := s.stats(); n != 1 {
		t.Errorf("%d nodes", n)
	}
}

func TestRolloutMaxNodes(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 2)
	defer s.close()
	commit(t, observe(t, s, "a", "success", "x=1"))
	commit(t, observe(t, s, "b", "success", "x=1"))
	if _, err := s.observe("o", "c", "success", s.digest("success", cbs("x=1")), func() []chefpayload.CookbookVersion { return cbs("x=1") }); err != errUntracked {
		t.Fatalf("a third node: %v", err)
	}
	// Nodes already tracked still are.
	if got := events(observe(t, s, "a", "success", "x=2")); got != "x 2 (was 1)" {
		t.Errorf("%q", got)
	}
}

// Runs of many nodes at once, some of the same node: the tallies add up.
func TestRolloutConcurrent(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	defer s.close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				node := fmt.Sprintf("n%d", (w*50+i)%100) // each node twice
				c, err := s.observe("o", node, "success", s.digest("success", cbs("x=1 y=2")), func() []chefpayload.CookbookVersion { return cbs("x=1 y=2") })
				if err != nil {
					t.Error(err)
					return
				}
				if c != nil {
					if err := c.commit(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if got := tallies(s); got != "o/x 1:100n100s0f o/y 2:100n100s0f" {
		t.Errorf("tallies %q", got)
	}
}

// BenchmarkRolloutFleet fills a rollout store with a fleet (100,000 nodes
// of 100 cookbooks, or FIREHOSE_BENCH_FLEET_NODES nodes), rolls one
// cookbook's new version out to every node, then sends every node a run that
// changes nothing, and reports what the store holds: the Go heap in use
// after a collection (the per-node digests and the tallies), pebble's
// memory (its block cache and memtables, fixed by openRollout), and the
// data directory. Run it once:
//
//	go test ./adapters/chef -run '^$' -bench RolloutFleet -benchtime 1x
func BenchmarkRolloutFleet(b *testing.B) {
	nodes := 100_000
	if v := os.Getenv("FIREHOSE_BENCH_FLEET_NODES"); v != "" {
		nodes, _ = strconv.Atoi(v)
	}
	const cookbooks = 100
	fleet := func(i, bump int) []chefpayload.CookbookVersion {
		out := make([]chefpayload.CookbookVersion, cookbooks)
		for c := range out {
			out[c] = chefpayload.CookbookVersion{Name: fmt.Sprintf("cookbook-%03d", c), Version: fmt.Sprintf("1.%d.%d", c%5, i%3)}
			if c == bump {
				out[c].Version = "2.0.0"
			}
		}
		return out
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	for b.Loop() {
		dir := b.TempDir()
		base := heap()
		s := openTestStore(b, dir, 0)
		phases := []struct {
			name string
			bump int
		}{{"first", -1}, {"rollout", 7}, {"steady", 7}}
		for _, ph := range phases {
			start := time.Now()
			for i := range nodes {
				cookbooks := fleet(i, ph.bump)
				c, err := s.observe("fleet", fmt.Sprintf("node-%06d", i), "success", s.digest("success", cookbooks),
					func() []chefpayload.CookbookVersion { return cookbooks })
				if err != nil {
					b.Fatal(err)
				}
				if c != nil {
					if err := c.commit(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(nodes), "µs/"+ph.name+"-run")
		}
		m := s.db.Metrics()
		b.ReportMetric(float64(heap()-base)/float64(nodes), "heap-B/node")
		b.ReportMetric(float64(heap()-base)/1e6, "heap-MB")
		b.ReportMetric(float64(m.BlockCache.Size+int64(m.MemTable.Size))/1e6, "pebble-MB")
		if err := s.close(); err != nil {
			b.Fatal(err)
		}
		var disk int64
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					disk += fi.Size()
				}
			}
			return nil
		})
		b.ReportMetric(float64(disk)/1e6, "disk-MB")
		b.ReportMetric(float64(disk)/float64(nodes*cookbooks), "disk-B/node-cookbook")
	}
}
