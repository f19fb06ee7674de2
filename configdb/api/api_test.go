package api

import (
	"reflect"
	"strings"
	"testing"
)

func equalJSON(t *testing.T, r response, want string) {
	t.Helper()
	var w any
	if err := jsonUnmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if got := r.json(t); !reflect.DeepEqual(got, w) {
		t.Fatalf("got  %s\nwant %s", r.body, want)
	}
}

func TestComponents(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		equalJSON(t, s.must(200, "GET", "/components", nil), `[]`)
		s.fixture()
		component := `{"id":7,"name":"component1","resource_definitions":[{"id":5,"name":"resdef1","component_id":7,"content":{"key":"nsname.key"}}]}`
		equalJSON(t, s.must(200, "GET", "/components", nil), `[`+component+`]`)
		equalJSON(t, s.must(200, "GET", "/components/7", nil), component)
		s.must(404, "GET", "/components/8", nil).msg(t)

		// POST answers 201 with the object; the name is unique.
		r := s.must(201, "POST", "/components", map[string]any{"name": "component2", "resource_definitions": []any{map[string]any{"name": "resdef2"}}})
		equalJSON(t, r, `{"id":8,"name":"component2","resource_definitions":[{"id":6,"name":"resdef2","component_id":8,"content":null}]}`)
		if loc := r.header.Get("Location"); loc != "/api/v1/config/components/8" {
			t.Fatalf("Location %q", loc)
		}
		if msg := s.must(409, "POST", "/components", map[string]any{"name": "component1", "resource_definitions": []any{}}).msg(t); !strings.Contains(msg, "component1") {
			t.Fatal(msg)
		}

		// PUT renames and ignores id and unknown fields; PATCH is the same.
		s.must(204, "PUT", "/components/7", map[string]any{"name": "new_component1", "id": nil, "fake": "xxxx"})
		if got := s.must(200, "GET", "/components/7", nil).json(t).(map[string]any)["name"]; got != "new_component1" {
			t.Fatal(got)
		}
		// resource_definitions replaces the set: resdef2 moves in, resdef1 is deleted.
		s.must(204, "PATCH", "/components/7", map[string]any{"resource_definitions": []any{map[string]any{"id": 6}}})
		equalJSON(t, s.must(200, "GET", "/components/7", nil), `{"id":7,"name":"new_component1","resource_definitions":[{"id":6,"name":"resdef2","component_id":7,"content":null}]}`)
		s.must(404, "GET", "/resource_definitions/5", nil)
		equalJSON(t, s.must(200, "GET", "/components/8", nil), `{"id":8,"name":"component2","resource_definitions":[]}`)
		s.must(404, "PUT", "/components/7", map[string]any{"resource_definitions": []any{map[string]any{"id": 99}}})

		s.must(204, "DELETE", "/components/8", nil)
		s.must(404, "DELETE", "/components/8", nil)
		s.must(404, "PUT", "/components/8", map[string]any{"name": "x"})
		r = s.must(405, "POST", "/components/7", map[string]any{})
		if r.header.Get("Allow") != "GET, PUT, PATCH, DELETE" {
			t.Fatal(r.header)
		}
		s.must(404, "GET", "/components/abc", nil)
	})
}

func TestResourceDefinitions(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		r := s.must(201, "POST", "/resource_definitions", map[string]any{"name": "free", "content": []any{1, 2}})
		equalJSON(t, r, `{"id":6,"name":"free","component_id":null,"content":[1,2]}`)
		s.must(201, "POST", "/resource_definitions", map[string]any{"id": 42, "name": "explicit", "component_id": 7})
		s.must(409, "POST", "/resource_definitions", map[string]any{"id": 42, "name": "again"})
		s.must(409, "POST", "/resource_definitions", map[string]any{"name": "resdef1", "component_id": 7})
		s.must(404, "POST", "/resource_definitions", map[string]any{"name": "x", "component_id": 99})
		// The next automatic id skips the explicit one.
		equalJSON(t, s.must(201, "POST", "/resource_definitions", map[string]any{"name": "auto"}), `{"id":43,"name":"auto","component_id":null,"content":null}`)

		ids := func(path string) []float64 {
			var out []float64
			for _, d := range s.must(200, "GET", path, nil).json(t).([]any) {
				out = append(out, d.(map[string]any)["id"].(float64))
			}
			return out
		}
		if got := ids("/resource_definitions"); !reflect.DeepEqual(got, []float64{5, 6, 42, 43}) {
			t.Fatal(got)
		}
		if got := ids("/resource_definitions?component_id=7"); !reflect.DeepEqual(got, []float64{5, 42}) {
			t.Fatal(got)
		}
		if got := ids("/resource_definitions?component_id="); !reflect.DeepEqual(got, []float64{6, 43}) {
			t.Fatal(got)
		}
		s.must(400, "GET", "/resource_definitions?component_id=x", nil)

		s.must(204, "PATCH", "/resource_definitions/6", map[string]any{"name": "renamed", "component_id": 7, "content": map[string]any{"a": map[string]any{"b": 1}}})
		equalJSON(t, s.must(200, "GET", "/resource_definitions/6", nil), `{"id":6,"name":"renamed","component_id":7,"content":{"a":{"b":1}}}`)
		s.must(204, "PUT", "/resource_definitions/6", map[string]any{"component_id": nil})
		equalJSON(t, s.must(200, "GET", "/resource_definitions/6", nil), `{"id":6,"name":"renamed","component_id":null,"content":{"a":{"b":1}}}`)

		// keys operations edit content.
		s.must(204, "PUT", "/resource_definitions/6/keys/set", [][]any{{"a", "b", 2}, {"a", "c", "new"}})
		s.must(204, "PATCH", "/resource_definitions/6/keys/delete", [][]any{{"a", "b"}})
		equalJSON(t, s.must(200, "GET", "/resource_definitions/6", nil), `{"id":6,"name":"renamed","component_id":null,"content":{"a":{"c":"new"}}}`)
		s.must(409, "PUT", "/resource_definitions/6/keys/set", [][]any{{"x", "y", 1}})
		s.must(409, "PUT", "/resource_definitions/43/keys/set", [][]any{{"x", 1}}) // content is null
		s.must(404, "PUT", "/resource_definitions/99/keys/set", [][]any{{"x", 1}})

		s.must(204, "DELETE", "/resource_definitions/6", nil)
		s.must(404, "GET", "/resource_definitions/6", nil)
		s.must(404, "DELETE", "/resource_definitions/6", nil)
	})
}

func TestEnvironments(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		equalJSON(t, s.must(200, "GET", "/environments", nil), `[]`)
		s.fixture()
		equalJSON(t, s.must(200, "GET", "/environments", nil), `[{"id":9,"components":[7],"hierarchy_levels":["lvl1","lvl2"]}]`)
		equalJSON(t, s.must(200, "GET", "/environments/9", nil), `{"id":9,"components":[7],"hierarchy_levels":["lvl1","lvl2"]}`)
		s.must(404, "GET", "/environments/10", nil)

		// A given id is kept (Fuel's cluster id); a taken one is a conflict.
		equalJSON(t, s.must(201, "POST", "/environments", map[string]any{"id": 42, "components": []any{7}, "hierarchy_levels": []any{"lvla", "lvlb"}}),
			`{"id":42,"components":[7],"hierarchy_levels":["lvla","lvlb"]}`)
		s.must(409, "POST", "/environments", map[string]any{"id": 9, "components": []any{7}, "hierarchy_levels": []any{}}).msg(t)
		// Components by name; automatic ids skip the taken ones.
		equalJSON(t, s.must(201, "POST", "/environments", map[string]any{"components": []any{"component1"}, "hierarchy_levels": []any{"lvl"}}),
			`{"id":1,"components":[7],"hierarchy_levels":["lvl"]}`)
		if msg := s.must(409, "POST", "/environments", map[string]any{"components": []any{"component1", 7}, "hierarchy_levels": []any{"lvl"}}).msg(t); !strings.Contains(msg, "duplicates") {
			t.Fatal(msg)
		}
		s.must(404, "POST", "/environments", map[string]any{"components": []any{8}, "hierarchy_levels": []any{}})
		s.must(404, "POST", "/environments", map[string]any{"components": []any{"component2"}, "hierarchy_levels": []any{}})
		s.must(409, "POST", "/environments", map[string]any{"components": []any{}, "hierarchy_levels": []any{"a", "a"}})

		// Updating components.
		s.must(204, "PUT", "/environments/9", map[string]any{"components": []any{}})
		equalJSON(t, s.must(200, "GET", "/environments/9", nil), `{"id":9,"components":[],"hierarchy_levels":["lvl1","lvl2"]}`)
		s.must(204, "PATCH", "/environments/9", map[string]any{"components": []any{7}})
		s.must(404, "PUT", "/environments/9", map[string]any{"components": []any{8}})
		s.must(404, "PUT", "/environments/7", map[string]any{})

		s.must(204, "DELETE", "/environments/42", nil)
		s.must(404, "DELETE", "/environments/42", nil)
		s.must(404, "GET", "/environments/42", nil)
	})
}

// TestHierarchyLevelsReplace: a PUT of hierarchy_levels re-orders and re-uses
// levels by name, and deletes the dropped ones with their data.
func TestHierarchyLevelsReplace(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		s.must(204, "PUT", "/environments/9/resources/5/values", map[string]any{"root": 1})
		s.must(204, "PUT", "/environments/9/lvl1/a/resources/5/values", map[string]any{"l1": 1})
		s.must(204, "PUT", "/environments/9/lvl1/a/lvl2/b/resources/5/values", map[string]any{"l2": 1})
		levels := s.must(200, "GET", "/environments/9/hierarchy_levels", nil).json(t).([]any)
		lvl1ID := levels[0].(map[string]any)["id"]

		// Drop lvl2: its data goes; lvl1 keeps its id and data.
		s.must(204, "PUT", "/environments/9", map[string]any{"hierarchy_levels": []any{"lvl1", "lvl3"}})
		levels = s.must(200, "GET", "/environments/9/hierarchy_levels", nil).json(t).([]any)
		if levels[0].(map[string]any)["id"] != lvl1ID || levels[1].(map[string]any)["name"] != "lvl3" {
			t.Fatal(levels)
		}
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/a/lvl3/b/resources/5/values?effective", nil), `{"root":1,"l1":1}`)
		s.must(404, "GET", "/environments/9/lvl1/a/lvl2/b/resources/5/values", nil)

		// Back to lvl1, lvl2: the old lvl2 data is gone for good.
		s.must(204, "PUT", "/environments/9", map[string]any{"hierarchy_levels": []any{"lvl1", "lvl2"}})
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/a/lvl2/b/resources/5/values", nil), `{}`)
		// No levels at all.
		s.must(204, "PUT", "/environments/9", map[string]any{"hierarchy_levels": []any{}})
		equalJSON(t, s.must(200, "GET", "/environments/9", nil), `{"id":9,"components":[7],"hierarchy_levels":[]}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/values?effective", nil), `{"root":1}`)
	})
}

// TestHierarchyLevelsReorder: after a PUT that re-orders the levels, the
// documents whose level path is no longer a prefix of the new order are
// deleted, as dropped levels' are, with their history; the level values only
// they were stored under go too. The change publishes what dropping a level
// does: the environment's update, nothing per document.
func TestHierarchyLevelsReorder(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		s.must(204, "PUT", "/environments/9/resources/5/values", map[string]any{"root": 1})
		s.must(204, "PUT", "/environments/9/lvl1/a/resources/5/values", map[string]any{"l1": 1})
		s.must(204, "PUT", "/environments/9/lvl1/a/lvl2/b/resources/5/overrides", map[string]any{"l2": 1})
		levelValues := func() map[string]any {
			out := map[string]any{}
			for _, l := range s.must(200, "GET", "/environments/9/hierarchy_levels", nil).json(t).([]any) {
				l := l.(map[string]any)
				out[l["name"].(string)] = l["values"]
			}
			return out
		}
		if got := levelValues(); !reflect.DeepEqual(got, map[string]any{"lvl1": []any{"a"}, "lvl2": []any{"b"}}) {
			t.Fatal(got)
		}

		all := s.bus.Subscribe(t, "configdb/#")
		s.must(204, "PUT", "/environments/9", map[string]any{"hierarchy_levels": []any{"lvl2", "lvl1"}})
		if got := topicsOf(s.bus.Collect(t, all, "configdb/barrier")); !reflect.DeepEqual(got, []string{"configdb/9/environment/updated"}) {
			t.Fatalf("events of the re-order: %v", got)
		}
		// Nothing stored under lvl1 or lvl2 is reachable, nor listed.
		if got := levelValues(); !reflect.DeepEqual(got, map[string]any{"lvl1": []any{}, "lvl2": []any{}}) {
			t.Fatalf("level values after the re-order: %v", got)
		}
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl2/b/lvl1/a/resources/5/values?effective", nil), `{"root":1}`)

		// Back to the old order: the documents are gone, history and all.
		s.must(204, "PUT", "/environments/9", map[string]any{"hierarchy_levels": []any{"lvl1", "lvl2"}})
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/a/resources/5/values", nil), `{}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/a/lvl2/b/resources/5/overrides", nil), `{}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/a/lvl2/b/resources/5/history", nil), `[]`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/a/lvl2/b/resources/5/values?effective", nil), `{"root":1}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/values", nil), `{"root":1}`)
	})
}

// TestLevelWithoutValue: a level name with no value in the path is a 404
// naming that level, or the expected one when the name is wrong, not a
// generic "no such endpoint".
func TestLevelWithoutValue(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		s.must(204, "PUT", "/environments/9/lvl1/a/resources/5/values", map[string]any{"k": 1})
		tests := []struct{ method, path, msg string }{
			{"GET", "/environments/9/lvl1/resources/5/values", "Level 'lvl1' has no value in the path. Give it as lvl1/<value>/ before resources/."},
			{"GET", "/environments/9/lvl1/a/lvl2/resources/5/values?effective", "Level 'lvl2' has no value in the path. Give it as lvl2/<value>/ before resources/."},
			{"PUT", "/environments/9/lvl1/resources/resdef1/overrides", "Level 'lvl1' has no value in the path. Give it as lvl1/<value>/ before resources/."},
			{"PATCH", "/environments/9/lvl1/a/lvl2/resources/5/values/keys/set", "Level 'lvl2' has no value in the path. Give it as lvl2/<value>/ before resources/."},
			{"GET", "/environments/9/lvl1/a/lvl2/resources/5/history", "Level 'lvl2' has no value in the path. Give it as lvl2/<value>/ before resources/."},
			{"GET", "/environments/9/lvl2/resources/5/values", "Unexpected level name 'lvl2'. Expected 'lvl1'."},
			{"GET", "/environments/9/lvl1/a/lvl2/b/lvl3/resources/5/values", "Levels ['lvl1', 'lvl2', 'lvl3'] can't be matched with environment 9 levels: ['lvl1', 'lvl2']"},
			{"GET", "/environments/8/lvl1/resources/5/values", "environment not found by identifier: 8"},
			{"GET", "/environments/9/lvl1/resources/99/values", "resource_definition not found by 99 in environment 9"},
		}
		for _, tt := range tests {
			if msg := s.must(404, tt.method, tt.path, map[string]any{}).msg(t); msg != tt.msg {
				t.Errorf("%s %s: %q, want %q", tt.method, tt.path, msg, tt.msg)
			}
		}
		// Nothing was written.
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/a/resources/5/values", nil), `{"k":1}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/overrides", nil), `{}`)
	})
}

func TestHierarchyLevels(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		s.must(204, "PUT", "/environments/9/lvl1/1/resources/5/values", map[string]any{})
		s.must(204, "PUT", "/environments/9/lvl1/2/lvl2/x/resources/5/overrides", map[string]any{})
		// A GET never writes: reading under a new value records nothing.
		s.must(200, "GET", "/environments/9/lvl1/3/lvl2/y/resources/5/values?effective", nil)
		s.must(200, "GET", "/environments/9/lvl1/4/resources/5/values", nil)

		r := s.must(200, "GET", "/environments/9/hierarchy_levels", nil)
		levels := r.json(t).([]any)
		if len(levels) != 2 {
			t.Fatal(r)
		}
		l1, l2 := levels[0].(map[string]any), levels[1].(map[string]any)
		if l1["name"] != "lvl1" || l1["parent"] != nil || l1["environment_id"] != 9.0 || !reflect.DeepEqual(l1["values"], []any{"1", "2"}) {
			t.Fatal(l1)
		}
		if l2["name"] != "lvl2" || l2["parent"] != "lvl1" || !reflect.DeepEqual(l2["values"], []any{"x"}) {
			t.Fatal(l2)
		}
		// Show by name and by id.
		equalJSON(t, s.must(200, "GET", "/environments/9/hierarchy_levels/lvl2", nil), string(mustJSON(l2)))
		equalJSON(t, s.must(200, "GET", "/environments/9/hierarchy_levels/"+itoa(int64(l2["id"].(float64))), nil), string(mustJSON(l2)))
		s.must(404, "GET", "/environments/9/hierarchy_levels/nope", nil)
		s.must(404, "GET", "/environments/8/hierarchy_levels", nil)

		// Rename: the data follows.
		s.must(204, "PUT", "/environments/9/hierarchy_levels/lvl1", map[string]any{"name": "rack"})
		equalJSON(t, s.must(200, "GET", "/environments/9", nil), `{"id":9,"components":[7],"hierarchy_levels":["rack","lvl2"]}`)
		s.must(200, "GET", "/environments/9/rack/2/lvl2/x/resources/5/overrides", nil)
		s.must(404, "GET", "/environments/9/lvl1/2/resources/5/values", nil)
		s.must(409, "PATCH", "/environments/9/hierarchy_levels/rack", map[string]any{"name": "lvl2"})
		s.must(404, "PUT", "/environments/9/hierarchy_levels/lvl1", map[string]any{"name": "x"})
		s.must(405, "DELETE", "/environments/9/hierarchy_levels/rack", nil)
	})
}

func TestValuesAndOverrides(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		// Root and deep PUTs answer 204 with an empty body.
		r := s.must(204, "PUT", "/environments/9/resources/5/values", map[string]any{"k": "v"})
		if len(r.body) != 0 {
			t.Fatalf("204 with a body: %q", r.body)
		}
		s.must(204, "PUT", "/environments/9/lvl1/val1/lvl2/val2/resources/5/values", map[string]any{"k": "deep"})
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/values", nil), `{"k":"v"}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/val1/lvl2/val2/resources/5/values", nil), `{"k":"deep"}`)
		// Nothing stored at a level: {} (tuning-box's test_get_resource_values).
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/1/resources/5/values", nil), `{}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/1/resources/5/values?effective", nil), `{"k":"v"}`)
		// By name, and overrides.
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/resdef1/values", nil), `{"k":"v"}`)
		s.must(204, "PUT", "/environments/9/resources/resdef1/overrides", map[string]any{"k": "o"})
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/overrides", nil), `{"k":"o"}`)
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/values", nil), `{"k":"v"}`)
		// A PUT replaces the whole document: no merge on write.
		s.must(204, "PUT", "/environments/9/resources/5/values", map[string]any{"other": 1})
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/values", nil), `{"other":1}`)
		// Any JSON may be stored.
		s.must(204, "PUT", "/environments/9/lvl1/list/resources/5/values", `[1, "two", null]`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/list/resources/5/values", nil), `[1,"two",null]`)
		// Big numbers survive as written.
		s.must(204, "PUT", "/environments/9/lvl1/num/resources/5/values", `{"big":12345678901234567890,"f":1.50}`)
		if got := s.must(200, "GET", "/environments/9/lvl1/num/resources/5/values", nil).String(); got != `{"big":12345678901234567890,"f":1.50}` {
			t.Fatal(got)
		}
		s.must(405, "POST", "/environments/9/resources/5/values", map[string]any{})
		s.must(405, "DELETE", "/environments/9/resources/5/overrides", nil)
	})
}

// TestEffective follows tuning-box's test_get_resource_values_effective_with_lookup
// and adds overrides to show the merge order.
func TestEffective(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		s.must(204, "PUT", "/environments/9/resources/5/values", map[string]any{"key0": "root_value_0", "key1": "root_value_1", "key2": "root_value_2", "key3": "root_value_3"})
		s.must(204, "PUT", "/environments/9/lvl1/1/resources/5/values", map[string]any{"key0": "lvl1_value_0"})
		s.must(204, "PUT", "/environments/9/lvl1/1/lvl2/2/resources/5/values", map[string]any{"key1": "lvl2_value_1", "key2": "lvl2_value_2"})
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/1/lvl2/2/resources/5/values?effective&show_lookup", nil), `{
			"key0": ["lvl1_value_0", "/lvl1/1/"],
			"key1": ["lvl2_value_1", "/lvl1/1/lvl2/2/"],
			"key2": ["lvl2_value_2", "/lvl1/1/lvl2/2/"],
			"key3": ["root_value_3", "/"]}`)

		// Order: root values, root overrides, lvl1 values, lvl1 overrides, ...
		// A more specific level's value beats a less specific level's override.
		s.must(204, "PUT", "/environments/9/resources/5/overrides", map[string]any{"key0": "root_override_0", "key3": "root_override_3", "nested": map[string]any{"a": []any{map[string]any{"c": 1}}}})
		s.must(204, "PUT", "/environments/9/lvl1/1/lvl2/2/resources/5/overrides", map[string]any{"key2": "lvl2_override_2"})
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/1/lvl2/2/resources/5/values?effective&show_lookup", nil), `{
			"key0": ["lvl1_value_0", "/lvl1/1/"],
			"key1": ["lvl2_value_1", "/lvl1/1/lvl2/2/"],
			"key2": ["lvl2_override_2", "/lvl1/1/lvl2/2/"],
			"key3": ["root_override_3", "/"],
			"nested": [{"a":[{"c":1}]}, "/"]}`)
		// Sibling isolation: lvl1/3/lvl2/2 shares nothing with lvl1/1/lvl2/2.
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/3/lvl2/2/resources/5/values?effective", nil),
			`{"key0":"root_override_0","key1":"root_value_1","key2":"root_value_2","key3":"root_override_3","nested":{"a":[{"c":1}]}}`)

		// ?key= reads one nested value, indexing arrays, raw or effective.
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/1/resources/5/values?effective&key=nested.a.0.c", nil), `1`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/1/resources/5/values?effective&show_lookup&key=nested.a.0", nil), `[{"c":1},"/"]`)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/1/resources/5/values?key=key0", nil), `"lvl1_value_0"`)
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/5/overrides?key=nested.a", nil), `[{"c":1}]`)
		for _, key := range []string{"missing", "nested.b", "nested.a.1", "nested.a.x", "key0.deeper", "nested.a.0.c.d"} {
			if msg := s.must(409, "GET", "/environments/9/lvl1/1/resources/5/values?effective&key="+key, nil).msg(t); !strings.Contains(msg, "keys path") {
				t.Fatalf("%s: %s", key, msg)
			}
		}
		s.must(409, "GET", "/environments/9/resources/5/values?key=nope", nil)

		// show_lookup needs effective (409, as tuning-box); effective is read from values.
		s.must(409, "GET", "/environments/9/resources/5/values?show_lookup", nil)
		s.must(400, "GET", "/environments/9/resources/5/overrides?effective", nil)
		// A document that is not an object cannot be merged: 400, not 500,
		// saying which one it is and what it is.
		s.must(204, "PUT", "/environments/9/lvl1/list/resources/5/overrides", `["a"]`)
		if msg, want := s.must(400, "GET", "/environments/9/lvl1/list/resources/5/values?effective", nil).msg(t),
			"effective values merge JSON objects only, and the overrides at /lvl1/list/ are an array"; msg != want {
			t.Errorf("got %q, want %q", msg, want)
		}
		s.must(204, "PUT", "/environments/9/lvl1/number/resources/5/values", `5`)
		if msg, want := s.must(400, "GET", "/environments/9/lvl1/number/resources/5/values?effective", nil).msg(t),
			"effective values merge JSON objects only, and the values at /lvl1/number/ are a number"; msg != want {
			t.Errorf("got %q, want %q", msg, want)
		}
	})
}

func TestLevelPathsAndResources(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		if msg := s.must(404, "PUT", "/environments/9/lvlx/1/resources/5/values", map[string]any{"k": "v"}).msg(t); msg != "Unexpected level name 'lvlx'. Expected 'lvl1'." {
			t.Fatal(msg)
		}
		if msg := s.must(404, "PUT", "/environments/9/lvl1/val1/lvl2/val2/lvl3/val3/resources/5/values", map[string]any{"k": "v"}).msg(t); msg != "Levels ['lvl1', 'lvl2', 'lvl3'] can't be matched with environment 9 levels: ['lvl1', 'lvl2']" {
			t.Fatal(msg)
		}
		s.must(404, "GET", "/environments/9/lvl2/x/resources/5/values", nil)
		s.must(404, "GET", "/environments/8/resources/5/values", nil)
		if msg := s.must(404, "GET", "/environments/9/resources/99/values", nil).msg(t); !strings.Contains(msg, "resource_definition") {
			t.Fatal(msg)
		}
		s.must(404, "GET", "/environments/9/resources/nope/values", nil)
		// A definition outside the environment's components is not found.
		s.must(201, "POST", "/resource_definitions", map[string]any{"name": "outside"})
		s.must(404, "GET", "/environments/9/resources/outside/values", nil)

		// Names with "/", by name and escaped, and level values with "/" escaped.
		s.must(201, "POST", "/resource_definitions", map[string]any{"name": "override/plugins", "component_id": 7})
		s.must(204, "PUT", "/environments/9/lvl1/node%2F1/resources/override/plugins/values", map[string]any{"p": 1})
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/node%2F1/resources/override%2Fplugins/values", nil), `{"p":1}`)
		levels := s.must(200, "GET", "/environments/9/hierarchy_levels/lvl1", nil).json(t).(map[string]any)
		if !reflect.DeepEqual(levels["values"], []any{"node/1"}) {
			t.Fatal(levels)
		}
		// A resource whose name ends like a route word.
		s.must(201, "POST", "/resource_definitions", map[string]any{"name": "x/values", "component_id": 7})
		s.must(204, "PUT", "/environments/9/resources/x/values/values", map[string]any{"x": 1})
		equalJSON(t, s.must(200, "GET", "/environments/9/resources/x/values/values", nil), `{"x":1}`)
		// Two components with the same resource name in one environment: ambiguous.
		s.must(201, "POST", "/components", map[string]any{"name": "other", "resource_definitions": []any{map[string]any{"name": "resdef1"}}})
		s.must(204, "PUT", "/environments/9", map[string]any{"components": []any{"component1", "other"}})
		s.must(409, "GET", "/environments/9/resources/resdef1/values", nil)
		s.must(200, "GET", "/environments/9/resources/5/values", nil)
	})
}

func TestKeysOperations(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		base := "/environments/9/lvl1/val1/lvl2/val2/resources/5/values"
		// No stored row: 404.
		s.must(404, "PUT", base+"/keys/set", [][]any{{"key", "v"}})
		s.must(204, "PUT", base, map[string]any{"key": "val", "a": map[string]any{"b": []any{1, 2, 3}}})

		s.must(204, "PUT", base+"/keys/set", [][]any{{"key", "key_value"}, {"key_x", "key_x_value"}, {"a", "b", 1, "two"}})
		equalJSON(t, s.must(200, "GET", base, nil), `{"key":"key_value","key_x":"key_x_value","a":{"b":[1,"two",3]}}`)
		s.must(204, "PATCH", base+"/keys/delete", [][]any{{"key_x"}, {"a", "b", "0"}})
		equalJSON(t, s.must(200, "GET", base, nil), `{"key":"key_value","a":{"b":["two",3]}}`)

		// Errors name the path, and a batch is atomic: nothing changes.
		before := s.must(200, "GET", base, nil)
		for _, bad := range []struct {
			op   string
			body any
			want int
		}{
			{"set", [][]any{{"new", 1}, {"a", "c", "d", 1}}, 409}, // missing intermediate key
			{"set", [][]any{{"new", 1}, {"key", "x", 1}}, 409},    // through a scalar
			{"set", [][]any{{"new", 1}, {"only"}}, 409},           // too short
			{"set", [][]any{{"new", 1}, {"a", "b", 5, 1}}, 409},   // index out of range
			{"delete", [][]any{{"key"}, {"fake_key"}}, 409},       // missing key
			{"delete", [][]any{{"key"}, {"key", "val"}}, 409},     // tuning-box's test
			{"delete", [][]any{{"key"}, {}}, 409},                 // too short
			{"set", map[string]any{"key": 1}, 400},                // not an array
			{"set", []any{"key"}, 400},                            // not an array of arrays
			{"set", [][]any{{map[string]any{}, 1}}, 400},          // a key that is an object
			{"set", "not json", 400},                              //
			{"get", [][]any{{"key"}}, 404},                        // only set and delete
		} {
			r := s.must(bad.want, "PUT", base+"/keys/"+bad.op, bad.body)
			r.msg(t)
			if bad.want == 409 && !strings.Contains(r.String(), "path") {
				t.Errorf("%v: %s", bad.body, r)
			}
		}
		// A body of the wrong shape is told what it must be, in JSON's words.
		for body, want := range map[string]string{
			`{"key": 1}`: `the body must be an array of keys paths such as [["a","b","value"]]; it is an object`,
			`5`:          `the body must be an array of keys paths such as [["a","b","value"]]; it is a number`,
			`["key"]`:    `keys path 0 must be an array, such as ["a","b"]`,
		} {
			if msg := s.must(400, "PUT", base+"/keys/set", body).msg(t); msg != want {
				t.Errorf("%s: got %q, want %q", body, msg, want)
			}
		}
		after := s.must(200, "GET", base, nil)
		if string(after.body) != string(before.body) || after.header.Get("ETag") != before.header.Get("ETag") {
			t.Fatalf("a failed batch changed the document: %s -> %s", before, after)
		}
		// Overrides keys work the same once the row exists (values were PUT).
		s.must(204, "PUT", "/environments/9/lvl1/val1/lvl2/val2/resources/5/overrides/keys/set", [][]any{{"o", true}})
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/val1/lvl2/val2/resources/5/overrides", nil), `{"o":true}`)
		s.must(405, "GET", base+"/keys/set", nil)
	})
}

func TestVersionsHistoryAndETags(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		base := "/environments/9/lvl1/1/resources/5/values"
		r := s.must(200, "GET", base, nil)
		if r.header.Get("ETag") != `"0"` {
			t.Fatalf("ETag of nothing stored: %q", r.header.Get("ETag"))
		}
		// If-Match "0": create only if nothing is stored.
		put1 := s.must(204, "PUT", base, map[string]any{"a": 1, "b": 2}, "If-Match", `"0"`)
		etag1 := put1.header.Get("ETag")
		if s.must(200, "GET", base, nil).header.Get("ETag") != etag1 {
			t.Fatal("GET and PUT disagree on the ETag")
		}
		s.must(412, "PUT", base, map[string]any{}, "If-Match", `"0"`).msg(t)
		s.must(412, "PUT", base, map[string]any{}, "If-None-Match", `*`)
		put2 := s.must(204, "PUT", base, map[string]any{"a": 1, "c": 3}, "If-Match", etag1)
		// A stale ETag is refused, keys operations included.
		if msg := s.must(412, "PUT", base, map[string]any{"lost": "update"}, "If-Match", etag1).msg(t); !strings.Contains(msg, "changed") {
			t.Fatal(msg)
		}
		s.must(412, "PUT", base+"/keys/set", [][]any{{"lost", 1}}, "If-Match", etag1)
		s.must(204, "PATCH", base+"/keys/set", [][]any{{"d", 4}}, "If-Match", put2.header.Get("ETag"))
		s.must(204, "PUT", "/environments/9/resources/5/overrides", map[string]any{"o": 1}) // the root's, elsewhere
		s.must(204, "PUT", "/environments/9/lvl1/1/resources/5/overrides", map[string]any{"o": 2})

		equalJSON(t, s.must(200, "GET", base+"?version=1", nil), `{"a":1,"b":2}`)
		equalJSON(t, s.must(200, "GET", base+"?version=2", nil), `{"a":1,"c":3}`)
		equalJSON(t, s.must(200, "GET", base+"?version=3&key=d", nil), `4`)
		s.must(404, "GET", base+"?version=4", nil)
		s.must(400, "GET", base+"?version=0", nil)
		s.must(400, "GET", base+"?version=x", nil)
		s.must(400, "GET", base+"?version=1&effective", nil)

		hist := s.must(200, "GET", "/environments/9/lvl1/1/resources/5/history", nil).json(t).([]any)
		if len(hist) != 4 {
			t.Fatalf("%d versions: %v", len(hist), hist)
		}
		v2 := hist[1].(map[string]any)
		if v2["version"] != 2.0 || v2["kind"] != "values" || v2["author"] != "anonymous" || v2["time"] == "" ||
			!reflect.DeepEqual(v2["changed"], map[string]any{"set": []any{"c"}, "deleted": []any{"b"}}) {
			t.Fatal(v2)
		}
		if o := hist[3].(map[string]any); o["kind"] != "overrides" || o["version"] != 1.0 {
			t.Fatal(o)
		}
		only := s.must(200, "GET", "/environments/9/lvl1/1/resources/5/history?kind=overrides", nil).json(t).([]any)
		if len(only) != 1 {
			t.Fatal(only)
		}
		s.must(400, "GET", "/environments/9/lvl1/1/resources/5/history?kind=x", nil)
		equalJSON(t, s.must(200, "GET", "/environments/9/lvl1/7/resources/5/history", nil), `[]`)

		// Revert: PUT an old version's document.
		old := s.must(200, "GET", base+"?version=1", nil)
		s.must(204, "PUT", base, string(old.body))
		equalJSON(t, s.must(200, "GET", base, nil), `{"a":1,"b":2}`)
	})
}

// TestBadInput: every malformed request is a 4xx with a message, never a 5xx.
func TestBadInput(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{cfg: func(c *Config) { c.MaxBody = 1024 }})
		s.fixture()
		for _, tc := range []struct {
			method, path string
			body         any
			status       int
			field        string
		}{
			{"POST", "/components", `{}`, 400, "name"},
			{"POST", "/components", `{"name": 1}`, 400, "name"},
			{"POST", "/components", `[]`, 400, ""},
			{"POST", "/components", `null`, 400, ""},
			{"POST", "/components", `{"name": "x", "resource_definitions": {}}`, 400, "resource_definitions"},
			{"POST", "/components", `{"name": "x", "resource_definitions": [{}]}`, 400, "resource_definitions[0].name"},
			{"POST", "/components", `{"name": "x", "resource_definitions": ["a"]}`, 400, "resource_definitions[0]"},
			{"POST", "/components", `{"name": ""}`, 400, "name"},
			{"POST", "/components", `not json`, 400, ""},
			{"POST", "/components", ``, 400, ""},
			{"PUT", "/components/7", `{"resource_definitions": [{"id": "x"}]}`, 400, "resource_definitions[0].id"},
			{"PUT", "/components/7", `{"name": null}`, 400, "name"},
			{"POST", "/resource_definitions", `{"name": "x", "component_id": "7"}`, 400, "component_id"},
			{"POST", "/resource_definitions", `{"name": "x", "id": -1}`, 400, "id"},
			{"POST", "/resource_definitions", `{"name": "x", "content": }`, 400, ""},
			{"PUT", "/resource_definitions/5", `{"component_id": 1.5}`, 400, "component_id"},
			{"POST", "/environments", `{"components": [7]}`, 400, "hierarchy_levels"},
			{"POST", "/environments", `{"hierarchy_levels": []}`, 400, "components"},
			{"POST", "/environments", `{"components": [null], "hierarchy_levels": []}`, 400, "components[0]"},
			{"POST", "/environments", `{"components": [], "hierarchy_levels": [null]}`, 400, "hierarchy_levels[0]"},
			{"POST", "/environments", `{"components": [], "hierarchy_levels": [""]}`, 400, "hierarchy_levels[0]"},
			{"POST", "/environments", `{"id": "9", "components": [], "hierarchy_levels": []}`, 400, "id"},
			{"POST", "/environments", `{"id": 0, "components": [], "hierarchy_levels": []}`, 400, "id"},
			{"PUT", "/environments/9", `{"hierarchy_levels": "lvl1"}`, 400, "hierarchy_levels"},
			{"PUT", "/environments/9/hierarchy_levels/lvl1", `{"name": 5}`, 400, "name"},
			{"PUT", "/environments/9/resources/5/values", ``, 400, ""},
			{"PUT", "/environments/9/resources/5/values", `{"a": }`, 400, ""},
			{"PUT", "/environments/9/resources/5/values", `{"a": 1} {"b": 2}`, 400, ""},
			{"PUT", "/environments/9/resources/5/values", `{"a": "` + strings.Repeat("x", 2000) + `"}`, 413, ""},
		} {
			r := s.do(tc.method, tc.path, tc.body)
			if r.status != tc.status {
				t.Errorf("%s %s %v: %d %s, want %d", tc.method, tc.path, tc.body, r.status, r.body, tc.status)
				continue
			}
			r.msg(t)
			var e struct{ Field string }
			_ = jsonUnmarshal(r.body, &e)
			if e.Field != tc.field {
				t.Errorf("%s %s %v: field %q, want %q (%s)", tc.method, tc.path, tc.body, e.Field, tc.field, r.body)
			}
		}
		// A field that must be an array says so, in JSON's word.
		for _, tc := range []struct{ method, path, body, want string }{
			{"POST", "/components", `{"name": "x", "resource_definitions": {}}`, "resource_definitions must be an array"},
			{"PUT", "/environments/9", `{"hierarchy_levels": "lvl1"}`, "hierarchy_levels must be an array"},
		} {
			if msg := s.must(400, tc.method, tc.path, tc.body).msg(t); msg != tc.want {
				t.Errorf("%s %s %s: got %q, want %q", tc.method, tc.path, tc.body, msg, tc.want)
			}
		}
		// Nothing of that was stored.
		equalJSON(t, s.must(200, "GET", "/components", nil), `[{"id":7,"name":"component1","resource_definitions":[{"id":5,"name":"resdef1","component_id":7,"content":{"key":"nsname.key"}}]}]`)
		s.must(404, "GET", "/nothing/here", nil).msg(t)
		s.must(404, "GET", "/components/", nil)
	})
}
