package api

import (
	"reflect"
	"testing"
)

// TestTuningBoxConflicts goes through every place where tuning-box answers
// 409 (openstack/tuning-box, tuning_box/app.py maps IntegrityError,
// TuningboxIntegrityError, KeysOperationError and RequestValidationError to
// 409) and expects the same answer; then the malformed requests on which
// tuning-box fails with a 500 (a KeyError or TypeError in its handlers),
// where we answer 400 instead.
func TestTuningBoxConflicts(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		s.must(201, "POST", "/components", map[string]any{"name": "component2", "resource_definitions": []any{}})
		values := "/environments/9/lvl1/a/resources/5/values"
		s.must(204, "PUT", values, map[string]any{"key": "v", "nested": map[string]any{"list": []any{1}}})
		s.must(204, "PUT", "/resource_definitions/5", map[string]any{"content": map[string]any{"k": "v"}})

		for _, c := range []struct {
			where        string // where tuning-box answers so
			method, path string
			body         any
			want         int
		}{
			// resource_values.py ResourceValues.get: RequestValidationError.
			{"show_lookup without effective", "GET", values + "?show_lookup", nil, 409},
			{"show_lookup without effective, with a key", "GET", values + "?show_lookup&key=key", nil, 409},
			// environments.py _check_components: TuningboxIntegrityError.
			{"components duplicates", "POST", "/environments", map[string]any{"components": []any{7, 7}, "hierarchy_levels": []any{}}, 409},
			{"components duplicates by id and name", "POST", "/environments", map[string]any{"components": []any{7, "component1"}, "hierarchy_levels": []any{}}, 409},
			// IntegrityError: the environment's primary key.
			{"environment id taken", "POST", "/environments", map[string]any{"id": 9, "components": []any{}, "hierarchy_levels": []any{}}, 409},
			// IntegrityError: UniqueConstraint(environment_id, name) on levels.
			{"level named twice", "POST", "/environments", map[string]any{"components": []any{}, "hierarchy_levels": []any{"a", "a"}}, 409},
			{"level renamed onto another", "PUT", "/environments/9/hierarchy_levels/lvl1", map[string]any{"name": "lvl2"}, 409},
			// IntegrityError: Component.name is unique.
			{"component name taken", "POST", "/components", map[string]any{"name": "component1", "resource_definitions": []any{}}, 409},
			{"component renamed onto another", "PUT", "/components/8", map[string]any{"name": "component1"}, 409},
			// IntegrityError: the resource definition's primary key.
			{"resource definition id taken", "POST", "/resource_definitions", map[string]any{"id": 5, "name": "x"}, 409},
			// resource_keys_operation.py: KeysPathNotExisted, KeysPathUnreachable, KeysPathInvalid.
			{"get: missing key", "GET", values + "?key=missing", nil, 409},
			{"get: missing key, effective", "GET", values + "?effective&key=nested.missing", nil, 409},
			{"get: through a leaf", "GET", values + "?effective&key=key.deeper", nil, 409},
			{"set: missing intermediate key", "PUT", values + "/keys/set", [][]any{{"no", "such", 1}}, 409},
			{"set: through a leaf", "PUT", values + "/keys/set", [][]any{{"key", "x", 1}}, 409},
			{"set: index out of range", "PUT", values + "/keys/set", [][]any{{"nested", "list", 3, 1}}, 409},
			{"set: too short", "PUT", values + "/keys/set", [][]any{{"only"}}, 409},
			{"delete: missing key", "PATCH", values + "/keys/delete", [][]any{{"missing"}}, 409},
			{"overrides delete: missing key", "PUT", "/environments/9/lvl1/a/resources/5/overrides/keys/delete", [][]any{{"missing"}}, 409},
			{"definition keys: missing key", "PUT", "/resource_definitions/5/keys/delete", [][]any{{"missing"}}, 409},

			// Malformed input: tuning-box raises KeyError or TypeError (500).
			{"component without a name", "POST", "/components", map[string]any{"resource_definitions": []any{}}, 400},
			{"environment without levels", "POST", "/environments", map[string]any{"components": []any{7}}, 400},
			{"keys body not an array", "PUT", values + "/keys/set", map[string]any{"key": 1}, 400},
			{"body not JSON", "POST", "/components", "{", 400},
		} {
			r := s.do(c.method, c.path, c.body)
			if r.status != c.want {
				t.Errorf("%s: %s %s answered %d %s, tuning-box-compatible is %d", c.where, c.method, c.path, r.status, r.body, c.want)
				continue
			}
			r.msg(t)
		}
	})
}

// TestDeletingADefinitionPrunesLevelValues: a level value is listed while a
// document is stored under it, so deleting the only definition (or
// component) with documents there removes it from GET hierarchy_levels.
func TestDeletingADefinitionPrunesLevelValues(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fixture()
		// A second component in environment 9, with a definition of its own.
		s.must(201, "POST", "/components", map[string]any{"name": "c2", "resource_definitions": []any{map[string]any{"name": "other"}, map[string]any{"name": "third"}}})
		s.must(204, "PUT", "/environments/9", map[string]any{"components": []any{7, 8}})
		s.must(204, "PUT", "/environments/9/lvl1/shared/resources/resdef1/values", map[string]any{"a": 1})
		s.must(204, "PUT", "/environments/9/lvl1/shared/resources/other/values", map[string]any{"a": 1})
		s.must(204, "PUT", "/environments/9/lvl1/only5/lvl2/deep/resources/resdef1/overrides", map[string]any{"a": 1})
		s.must(204, "PUT", "/environments/9/lvl1/only6/resources/other/values", map[string]any{"a": 1})
		s.must(204, "PUT", "/environments/9/lvl1/only7/resources/third/values", map[string]any{"a": 1})

		values := func() map[string][]any {
			t.Helper()
			out := map[string][]any{}
			for _, l := range s.must(200, "GET", "/environments/9/hierarchy_levels", nil).json(t).([]any) {
				l := l.(map[string]any)
				out[l["name"].(string)] = l["values"].([]any)
			}
			return out
		}
		want := func(lvl1, lvl2 []any) {
			t.Helper()
			got := values()
			if !reflect.DeepEqual(got["lvl1"], lvl1) || !reflect.DeepEqual(got["lvl2"], lvl2) {
				t.Fatalf("level values %v, want lvl1 %v and lvl2 %v", got, lvl1, lvl2)
			}
		}
		want([]any{"only5", "only6", "only7", "shared"}, []any{"deep"})

		s.must(204, "DELETE", "/resource_definitions/5", nil)
		want([]any{"only6", "only7", "shared"}, []any{})
		// Replacing a component's definitions deletes the dropped ones' documents too.
		s.must(204, "PUT", "/components/8", map[string]any{"resource_definitions": []any{map[string]any{"id": 7}}})
		want([]any{"only7"}, []any{})
		s.must(204, "DELETE", "/components/8", nil)
		want([]any{}, []any{})
	})
}
