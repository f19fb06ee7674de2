package configdb_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/internal/dbtest"
	"github.com/opsfirehose/firehose/topics"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func open(t *testing.T, dsn string) *configdb.Store {
	t.Helper()
	s, err := configdb.Open(context.Background(), dsn, configdb.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fixture creates component "fuel" with astute and override/plugins, and
// environment 1 with levels rack and nodes.
func fixture(t *testing.T, s *configdb.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateComponent(ctx, "test", configdb.NewComponent{Name: "fuel", ResourceDefinitions: []configdb.NewResourceDefinition{
		{Name: "astute"}, {Name: "override/plugins"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateEnvironment(ctx, "test", configdb.NewEnvironment{ID: 1, Components: []configdb.Ref{{Name: "fuel"}}, HierarchyLevels: []string{"rack", "nodes"}}); err != nil {
		t.Fatal(err)
	}
}

func addr(res string, levels ...string) configdb.Address {
	a := configdb.Address{Env: 1, Resource: res}
	for i := 0; i+1 < len(levels); i += 2 {
		a.Levels = append(a.Levels, topics.LevelValue{Name: levels[i], Value: levels[i+1]})
	}
	return a
}

func put(t *testing.T, s *configdb.Store, a configdb.Address, kind configdb.DocKind, doc string) configdb.Document {
	t.Helper()
	d, err := s.Put(context.Background(), "test", a, kind, []byte(doc), configdb.Precondition{})
	if err != nil {
		t.Fatalf("put %v %s: %v", a, kind, err)
	}
	return d
}

func effective(t *testing.T, s *configdb.Store, a configdb.Address, lookup bool) string {
	t.Helper()
	e, err := s.Effective(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return string(e.JSON(lookup))
}

func TestMigrationsRunOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		fixture(t, s)
		put(t, s, addr("astute"), configdb.Values, `{"a":1}`)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// Reopening applies nothing twice and keeps the data.
		s = open(t, dsn)
		if got := effective(t, s, addr("astute"), false); got != `{"a":1}` {
			t.Fatalf("after reopening: %s", got)
		}
	})
}

func TestEffectiveMergeOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		fixture(t, s)
		put(t, s, addr("astute"), configdb.Values, `{"a":"root","b":"root","c":"root","d":"root"}`)
		put(t, s, addr("astute"), configdb.Overrides, `{"b":"root-override","c":"root-override"}`)
		put(t, s, addr("astute", "rack", "r1"), configdb.Values, `{"c":"rack-value"}`)
		put(t, s, addr("astute", "rack", "r1", "nodes", "n1"), configdb.Overrides, `{"d":"node-override","e":"new"}`)
		got := effective(t, s, addr("astute", "rack", "r1", "nodes", "n1"), true)
		want := `{"a":["root","/"],"b":["root-override","/"],"c":["rack-value","/rack/r1/"],"d":["node-override","/rack/r1/nodes/n1/"],"e":["new","/rack/r1/nodes/n1/"]}`
		if got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		// A sibling sees the root and its own rack only.
		if got := effective(t, s, addr("astute", "rack", "r2", "nodes", "n1"), false); got != `{"a":"root","b":"root-override","c":"root-override","d":"root"}` {
			t.Fatalf("sibling: %s", got)
		}
	})
}

// TestSQLiteServesOneBridge: a second store on the same SQLite file is
// refused, since its cache could not see the first one's writes.
func TestSQLiteServesOneBridge(t *testing.T) {
	dsn := dbtest.SQLite(t)
	a := open(t, dsn)
	if _, err := configdb.Open(context.Background(), dsn, configdb.Options{}); err == nil || !strings.Contains(err.Error(), "in use by another bridge") {
		t.Fatalf("second open: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dsn) // released on Close
}

// TestCacheSeesOtherWriters: two stores on one PostgreSQL database stand for
// two bridges; a write through one is seen by the other's cached merge.
func TestCacheSeesOtherWriters(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := dbtest.Postgres(t)
		a, b := open(t, dsn), open(t, dsn)
		fixture(t, a)
		put(t, a, addr("astute"), configdb.Values, `{"k":1}`)
		node := addr("astute", "rack", "r", "nodes", "n")
		if got := effective(t, b, node, false); got != `{"k":1}` {
			t.Fatal(got)
		}
		if got := effective(t, b, node, false); got != `{"k":1}` {
			t.Fatal(got)
		}
		if hits, _ := b.CacheStats(); hits != 1 {
			t.Fatalf("hits = %d, want 1", hits)
		}
		put(t, a, addr("astute"), configdb.Values, `{"k":2}`)
		if got := effective(t, b, node, false); got != `{"k":2}` {
			t.Fatalf("stale merge after another store's write: %s", got)
		}
		// A catalog change (renaming the resource) invalidates too.
		defs, err := a.ListResourceDefinitions(context.Background(), configdb.ResourceDefinitionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		name := "renamed"
		if err := a.UpdateResourceDefinition(context.Background(), "test", defs[0].ID, configdb.ResourceDefinitionUpdate{Name: &name}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Effective(context.Background(), node); configdb.KindOf(err) != configdb.NotFound {
			t.Fatalf("old name after rename: %v", err)
		}
	})
}

func TestOutboxHoldsEveryWrite(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		fixture(t, s)
		put(t, s, addr("override/plugins", "rack", "r1", "nodes", "node/1"), configdb.Overrides, `{"x":1}`)
		events, err := s.Pending(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		var topicsSeen []string
		for _, e := range events {
			topicsSeen = append(topicsSeen, e.Topic)
		}
		want := []string{"configdb/components/1/created", "configdb/1/environment/created",
			"configdb/1/override%2Fplugins/overrides/rack/r1/nodes/node%2F1"}
		if strings.Join(topicsSeen, " ") != strings.Join(want, " ") {
			t.Fatalf("topics %v, want %v", topicsSeen, want)
		}
		var ev configdb.ValuesEvent
		if err := json.Unmarshal(events[2].Payload, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Version != 1 || ev.Author != "test" || string(ev.Document) != `{"x":1}` || ev.Changed.Set[0] != "x" {
			t.Fatalf("%+v", ev)
		}
		if err := s.Delete(context.Background(), events[:2]); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.PendingCount(context.Background()); n != 1 {
			t.Fatalf("pending %d", n)
		}
	})
}

func TestConcurrentKeysSetLoseNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		fixture(t, s)
		a := addr("astute")
		put(t, s, a, configdb.Values, `{}`)
		const writers, each = 8, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					key := "w" + string(rune('a'+w)) + "-" + string(rune('a'+i))
					_, err := s.Keys(context.Background(), "test", a, configdb.Values, configdb.KeysSet,
						[]configdb.KeyPath{{Keys: []any{key}, Value: true}}, configdb.Precondition{})
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		doc, err := s.Get(context.Background(), a, configdb.Values, 0)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]bool
		if err := json.Unmarshal(doc.Body, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != writers*each || doc.Version != writers*each+1 {
			t.Fatalf("%d keys at version %d, want %d keys", len(m), doc.Version, writers*each)
		}
	})
}

func TestPutManyOneTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		fixture(t, s)
		docs := []configdb.PutDoc{
			{Address: addr("astute"), Kind: configdb.Values, Body: []byte(`{"a":1}`)},
			{Address: addr("astute", "rack", "r1"), Kind: configdb.Values, Body: []byte(`{"b":2}`)},
			{Address: addr("astute", "nodes", "x"), Kind: configdb.Values, Body: []byte(`{"c":3}`)}, // wrong level
		}
		if err := s.PutMany(context.Background(), "test", docs); configdb.KindOf(err) != configdb.NotFound {
			t.Fatalf("bad level in a batch: %v", err)
		}
		if got := effective(t, s, addr("astute", "rack", "r1"), false); got != `{}` {
			t.Fatalf("a failed batch stored something: %s", got)
		}
		if err := s.PutMany(context.Background(), "test", docs[:2]); err != nil {
			t.Fatal(err)
		}
		if got := effective(t, s, addr("astute", "rack", "r1"), false); got != `{"a":1,"b":2}` {
			t.Fatal(got)
		}
	})
}

func TestHistoryTimesAndAuthors(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
		s, err := configdb.Open(context.Background(), dsn, configdb.Options{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fixture(t, s)
		put(t, s, addr("astute"), configdb.Values, `{"a":1,"b":2}`)
		now = now.Add(time.Minute)
		if _, err := s.Put(context.Background(), "alice", addr("astute"), configdb.Values, []byte(`{"a":1,"c":3}`), configdb.Precondition{}); err != nil {
			t.Fatal(err)
		}
		h, err := s.History(context.Background(), addr("astute"), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[1].Author != "alice" || !h[1].Time.Equal(now) ||
			strings.Join(h[1].Changed.Set, ",") != "c" || strings.Join(h[1].Changed.Deleted, ",") != "b" {
			t.Fatalf("%+v", h)
		}
		old, err := s.Get(context.Background(), addr("astute"), configdb.Values, 1)
		if err != nil || string(old.Body) != `{"a":1,"b":2}` {
			t.Fatalf("%s %v", old.Body, err)
		}
	})
}

// TestCacheInvalidatedOnWrite: every kind of write that changes a merge is
// seen by the next effective read.
func TestCacheInvalidatedOnWrite(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		ctx := context.Background()
		fixture(t, s)
		node := addr("astute", "rack", "r", "nodes", "n")
		put(t, s, addr("astute"), configdb.Values, `{"k":1}`)
		effective(t, s, node, false)
		put(t, s, addr("astute", "rack", "r"), configdb.Overrides, `{"k":2}`)
		if got := effective(t, s, node, false); got != `{"k":2}` {
			t.Fatal(got)
		}
		if _, err := s.Keys(ctx, "t", addr("astute", "rack", "r"), configdb.Overrides, configdb.KeysSet, []configdb.KeyPath{{Keys: []any{"k"}, Value: 3}}, configdb.Precondition{}); err != nil {
			t.Fatal(err)
		}
		if got := effective(t, s, node, false); got != `{"k":3}` {
			t.Fatal(got)
		}
		// Dropping the rack level deletes its data: the node path is gone.
		levels := []string{"nodes"}
		if err := s.UpdateEnvironment(ctx, "t", 1, configdb.EnvironmentUpdate{HierarchyLevels: &levels}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Effective(ctx, node); configdb.KindOf(err) != configdb.NotFound {
			t.Fatalf("after dropping the level: %v", err)
		}
		if got := effective(t, s, addr("astute", "nodes", "n"), false); got != `{"k":1}` {
			t.Fatal(got)
		}
		if err := s.DeleteEnvironment(ctx, "t", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Effective(ctx, addr("astute", "nodes", "n")); configdb.KindOf(err) != configdb.NotFound {
			t.Fatalf("after deleting the environment: %v", err)
		}
	})
}

// rowCount counts a table's rows through a connection of its own, to see
// what the store keeps beyond what its API shows.
func rowCount(t *testing.T, dsn, table string) int {
	t.Helper()
	driver := "sqlite"
	if configdb.IsPostgres(dsn) {
		driver = "pgx"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReorderedLevelsPruneDocuments: after a PUT of hierarchy_levels, the
// documents whose level path is no longer a prefix of the levels, in their
// new order, are deleted with every version, and so are the level values
// only they were stored under; the others are untouched.
func TestReorderedLevelsPruneDocuments(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		ctx := context.Background()
		fixture(t, s) // levels rack, nodes
		put(t, s, addr("astute"), configdb.Values, `{"root":1}`)
		put(t, s, addr("astute", "rack", "r1"), configdb.Values, `{"rack":1}`)
		put(t, s, addr("astute", "rack", "r1"), configdb.Values, `{"rack":2}`)
		put(t, s, addr("astute", "rack", "r1", "nodes", "n1"), configdb.Overrides, `{"node":1}`)
		put(t, s, addr("astute", "rack", "r2", "nodes", "n2"), configdb.Values, `{"node":2}`)
		if n := rowCount(t, dsn, "document_versions"); n != 5 {
			t.Fatalf("%d versions before", n)
		}
		setLevels := func(names ...string) {
			t.Helper()
			if err := s.UpdateEnvironment(ctx, "t", 1, configdb.EnvironmentUpdate{HierarchyLevels: &names}); err != nil {
				t.Fatal(err)
			}
		}
		values := func() map[string][]string {
			t.Helper()
			levels, err := s.ListLevels(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string][]string{}
			for _, l := range levels {
				out[l.Name] = l.Values
			}
			return out
		}

		// A new level appended: every path is still a prefix.
		setLevels("rack", "nodes", "az")
		if n := rowCount(t, dsn, "documents"); n != 4 {
			t.Fatalf("%d documents after appending a level", n)
		}
		// A level inserted in between: the two-level paths are gone, with
		// their versions, and so is r2, which only they were stored under.
		setLevels("rack", "row", "nodes")
		if got := values(); !reflect.DeepEqual(got, map[string][]string{"rack": {"r1"}, "row": {}, "nodes": {}}) {
			t.Fatalf("level values after inserting a level: %v", got)
		}
		if n := rowCount(t, dsn, "document_versions"); n != 3 {
			t.Fatalf("%d versions after inserting a level, want the root's and r1's 3", n)
		}
		// Swapped: only the root stays.
		setLevels("nodes", "rack")
		if got := values(); !reflect.DeepEqual(got, map[string][]string{"rack": {}, "nodes": {}}) {
			t.Fatalf("level values after swapping: %v", got)
		}
		if d, v := rowCount(t, dsn, "documents"), rowCount(t, dsn, "document_versions"); d != 1 || v != 1 {
			t.Fatalf("%d documents, %d versions after swapping; want the root's 1 and 1", d, v)
		}
		// Back to the first order: what was deleted stays deleted.
		setLevels("rack", "nodes")
		if got := effective(t, s, addr("astute", "rack", "r1", "nodes", "n1"), false); got != `{"root":1}` {
			t.Fatal(got)
		}
		h, err := s.History(ctx, addr("astute", "rack", "r1"), "")
		if err != nil || len(h) != 0 {
			t.Fatalf("history of a deleted document: %v %v", h, err)
		}
	})
}
