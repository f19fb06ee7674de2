package configdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

// ListEnvironments returns every environment, by id.
func (s *Store) ListEnvironments(ctx context.Context) ([]Environment, error) {
	var out []Environment
	err := s.read(ctx, func(t *txn) error {
		ids, err := t.ids(`SELECT id FROM environments ORDER BY id`)
		if err != nil {
			return err
		}
		out = make([]Environment, 0, len(ids))
		for _, id := range ids {
			env, err := t.environment(id)
			if err != nil {
				return err
			}
			out = append(out, env)
		}
		return nil
	})
	return out, err
}

// GetEnvironment returns one environment.
func (s *Store) GetEnvironment(ctx context.Context, id int64) (Environment, error) {
	return readValue(ctx, s, func(t *txn) (Environment, error) { return t.environment(id) })
}

func (t *txn) environment(id int64) (Environment, error) {
	env := Environment{ID: id, Components: []int64{}, HierarchyLevels: []string{}}
	var gen int64
	err := t.queryRow(`SELECT generation FROM environments WHERE id = ?`, id).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return env, envNotFound(id)
	}
	if err != nil {
		return env, err
	}
	if env.Components, err = t.ids(`SELECT component_id FROM environment_components WHERE environment_id = ? ORDER BY position`, id); err != nil {
		return env, err
	}
	levels, err := t.levels(id)
	if err != nil {
		return env, err
	}
	for _, l := range levels {
		env.HierarchyLevels = append(env.HierarchyLevels, l.name)
	}
	return env, nil
}

type levelRow struct {
	id   int64
	name string
}

// levels returns an environment's levels, least specific first.
func (t *txn) levels(env int64) ([]levelRow, error) {
	return queryAll(t, func(rows *sql.Rows) (levelRow, error) {
		var l levelRow
		err := rows.Scan(&l.id, &l.name)
		return l, err
	}, `SELECT id, name FROM hierarchy_levels WHERE environment_id = ? ORDER BY position`, env)
}

// resolveComponents finds components by id or name. An unknown one is
// NotFound, the same component twice a Conflict.
func (t *txn) resolveComponents(refs []Ref) ([]int64, error) {
	ids := make([]int64, 0, len(refs))
	seen := map[int64]bool{}
	for _, r := range refs {
		var id int64
		var err error
		if r.Name != "" {
			err = t.queryRow(`SELECT id FROM components WHERE name = ?`, r.Name).Scan(&id)
		} else {
			err = t.queryRow(`SELECT id FROM components WHERE id = ?`, r.ID).Scan(&id)
		}
		if errors.Is(err, sql.ErrNoRows) {
			if r.Name != "" {
				return nil, errorf(NotFound, "component not found by identifier: %s", r.Name)
			}
			return nil, errorf(NotFound, "component not found by identifier: %d", r.ID)
		}
		if err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, errorf(Conflict, "components duplicates: component %d is given twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}

func checkLevelNames(names []string) error {
	seen := map[string]bool{}
	for i, n := range names {
		if n == "" {
			return invalidField("hierarchy_levels["+itoa(i)+"]", "a hierarchy level needs a name")
		}
		if seen[n] {
			return errorf(Conflict, "hierarchy level %q is given twice", n)
		}
		seen[n] = true
	}
	return nil
}

// CreateEnvironment creates an environment. A given id that is taken is a
// Conflict.
func (s *Store) CreateEnvironment(ctx context.Context, author string, ne NewEnvironment) (Environment, error) {
	if ne.ID < 0 {
		return Environment{}, invalidField("id", "id must be positive")
	}
	if err := checkLevelNames(ne.HierarchyLevels); err != nil {
		return Environment{}, err
	}
	var env Environment
	err := s.write(ctx, func(t *txn) error {
		comps, err := t.resolveComponents(ne.Components)
		if err != nil {
			return err
		}
		id := ne.ID
		if id == 0 {
			// Skip ids taken by environments created with an explicit id.
			for {
				if id, err = t.nextCounter("next_environment_id"); err != nil {
					return err
				}
				var n int
				if err := t.queryRow(`SELECT COUNT(*) FROM environments WHERE id = ?`, id).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					break
				}
			}
		} else {
			var n int
			if err := t.queryRow(`SELECT COUNT(*) FROM environments WHERE id = ?`, id).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return errorf(Conflict, "environment %d already exists", id)
			}
		}
		if _, err := t.exec(`INSERT INTO environments (id, generation) VALUES (?, ?)`, id, newGeneration()); err != nil {
			return err
		}
		for i, c := range comps {
			if _, err := t.exec(`INSERT INTO environment_components (environment_id, component_id, position) VALUES (?, ?, ?)`, id, c, i); err != nil {
				return err
			}
		}
		for i, name := range ne.HierarchyLevels {
			if _, err := t.exec(`INSERT INTO hierarchy_levels (environment_id, name, position) VALUES (?, ?, ?)`, id, name, i); err != nil {
				return err
			}
		}
		if env, err = t.environment(id); err != nil {
			return err
		}
		return s.emitEnvironment(t, eventCreated, author, env)
	})
	return env, err
}

// UpdateEnvironment replaces an environment's components and/or levels.
func (s *Store) UpdateEnvironment(ctx context.Context, author string, id int64, u EnvironmentUpdate) error {
	if u.HierarchyLevels != nil {
		if err := checkLevelNames(*u.HierarchyLevels); err != nil {
			return err
		}
	}
	return s.writeEnv(ctx, id, func(t *txn) error {
		if u.Components != nil {
			comps, err := t.resolveComponents(*u.Components)
			if err != nil {
				return err
			}
			if _, err := t.exec(`DELETE FROM environment_components WHERE environment_id = ?`, id); err != nil {
				return err
			}
			for i, c := range comps {
				if _, err := t.exec(`INSERT INTO environment_components (environment_id, component_id, position) VALUES (?, ?, ?)`, id, c, i); err != nil {
					return err
				}
			}
		}
		if u.HierarchyLevels != nil {
			if err := t.replaceLevels(id, *u.HierarchyLevels); err != nil {
				return err
			}
		}
		return s.emitEnvironmentUpdated(t, author, id)
	})
}

// replaceLevels re-orders and re-uses levels by name, creates new ones and
// deletes the dropped ones. A document is reachable only while its level path
// is a prefix of the environment's levels, in order, so when a level is
// dropped or a kept one moves, the documents whose path no longer is such a
// prefix are deleted with their versions (pruneDocuments).
func (t *txn) replaceLevels(env int64, names []string) error {
	old, err := t.levels(env)
	if err != nil {
		return err
	}
	want := map[string]int{}
	for i, n := range names {
		want[n] = i
	}
	kept := map[string]bool{}
	moved := false
	for i, l := range old {
		pos, ok := want[l.name]
		if !ok {
			// Its level values go with it (ON DELETE CASCADE).
			if _, err := t.exec(`DELETE FROM hierarchy_levels WHERE id = ?`, l.id); err != nil {
				return err
			}
			moved = true
			continue
		}
		kept[l.name] = true
		moved = moved || pos != i
		if _, err := t.exec(`UPDATE hierarchy_levels SET position = ? WHERE id = ?`, pos, l.id); err != nil {
			return err
		}
	}
	for i, n := range names {
		if kept[n] {
			continue
		}
		if _, err := t.exec(`INSERT INTO hierarchy_levels (environment_id, name, position) VALUES (?, ?, ?)`, env, n, i); err != nil {
			return err
		}
	}
	if !moved {
		// Every kept level has its old place: every stored path is still a
		// prefix (a new level can only come after them).
		return nil
	}
	levels, err := t.levels(env)
	if err != nil {
		return err
	}
	ids := make([]int64, len(levels))
	for i, l := range levels {
		ids[i] = l.id
	}
	return t.pruneDocuments(env, ids)
}

// levelValue is one value of one level, as level_values holds it.
type levelValue struct {
	level int64
	value string
}

// pruneDocuments deletes the environment's documents whose level path is not
// a prefix of levels (its level ids, least specific first), with their
// versions (ON DELETE CASCADE), and then the level values that only those
// documents were written under.
func (t *txn) pruneDocuments(env int64, levels []int64) error {
	docs, err := t.levelPaths(`SELECT id, level_path FROM documents WHERE environment_id = ?`, env)
	if err != nil {
		return err
	}
	var doomed []any
	orphans := map[levelValue]bool{} // values of doomed documents
	for _, d := range docs {
		valid := len(d.pairs) <= len(levels)
		for i := 0; valid && i < len(d.pairs); i++ {
			valid = d.pairs[i].level == levels[i]
		}
		if !valid {
			doomed = append(doomed, d.id)
			for _, p := range d.pairs {
				orphans[p] = true
			}
		}
	}
	for len(doomed) > 0 {
		n := min(len(doomed), 500)
		if _, err := t.exec(`DELETE FROM documents WHERE id IN (`+placeholders(n)+`)`, doomed[:n]...); err != nil {
			return err
		}
		doomed = doomed[n:]
	}
	return t.dropOrphanValues(env, orphans)
}

// docPath is one document's id and level path.
type docPath struct {
	id    int64
	pairs []levelValue
}

// levelPaths runs a query for documents' id and level_path.
func (t *txn) levelPaths(query string, args ...any) ([]docPath, error) {
	return queryAll(t, func(rows *sql.Rows) (docPath, error) {
		var d docPath
		var path string
		if err := rows.Scan(&d.id, &path); err != nil {
			return d, err
		}
		var err error
		if d.pairs, err = parseLevelPath(path); err != nil {
			return d, fmt.Errorf("document %d: %w", d.id, err)
		}
		return d, nil
	}, query, args...)
}

// dropOrphanValues deletes the level values among candidates that no
// remaining document of the environment is stored under, so that
// GET hierarchy_levels lists only values that lead somewhere. The
// environment is locked by the caller.
func (t *txn) dropOrphanValues(env int64, candidates map[levelValue]bool) error {
	if len(candidates) == 0 {
		return nil
	}
	docs, err := t.levelPaths(`SELECT id, level_path FROM documents WHERE environment_id = ?`, env)
	if err != nil {
		return err
	}
	for _, d := range docs {
		for _, p := range d.pairs {
			delete(candidates, p)
		}
	}
	for lv := range candidates {
		// A dropped level's values are gone already; this then deletes nothing.
		if _, err := t.exec(`DELETE FROM level_values WHERE level_id = ? AND value = ?`, lv.level, lv.value); err != nil {
			return err
		}
	}
	return nil
}

// deleteDefinitions deletes resource definitions, their documents (ON DELETE
// CASCADE) and the level values that only those documents were stored
// under. Each environment that held one of the documents is locked, in
// order, after the catalog.
func (t *txn) deleteDefinitions(ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	in := placeholders(len(ids))
	envs, err := t.ids(`SELECT DISTINCT environment_id FROM documents WHERE resource_definition_id IN (`+in+`) ORDER BY environment_id`, args...)
	if err != nil {
		return err
	}
	orphans := map[int64]map[levelValue]bool{}
	for _, env := range envs {
		if err := t.lockEnv(env); err != nil {
			return err
		}
		docs, err := t.levelPaths(`SELECT id, level_path FROM documents WHERE environment_id = ? AND resource_definition_id IN (`+in+`)`, append([]any{env}, args...)...)
		if err != nil {
			return err
		}
		orphans[env] = map[levelValue]bool{}
		for _, d := range docs {
			for _, p := range d.pairs {
				orphans[env][p] = true
			}
		}
	}
	if _, err := t.exec(`DELETE FROM resource_definitions WHERE id IN (`+in+`)`, args...); err != nil {
		return err
	}
	for _, env := range envs {
		if err := t.dropOrphanValues(env, orphans[env]); err != nil {
			return err
		}
	}
	return nil
}

// parseLevelPath reads a documents.level_path, [[level id, "value"], ...].
func parseLevelPath(path string) ([]levelValue, error) {
	var raw [][2]json.RawMessage
	if err := json.Unmarshal([]byte(path), &raw); err != nil {
		return nil, fmt.Errorf("bad level path %s: %w", path, err)
	}
	out := make([]levelValue, len(raw))
	for i, p := range raw {
		if err := json.Unmarshal(p[0], &out[i].level); err != nil {
			return nil, fmt.Errorf("bad level id in level path %s: %w", path, err)
		}
		if err := json.Unmarshal(p[1], &out[i].value); err != nil {
			return nil, fmt.Errorf("bad level value in level path %s: %w", path, err)
		}
	}
	return out, nil
}

// DeleteEnvironment deletes an environment with everything stored in it.
func (s *Store) DeleteEnvironment(ctx context.Context, author string, id int64) error {
	return s.writeEnv(ctx, id, func(t *txn) error {
		env, err := t.environment(id)
		if err != nil {
			return err
		}
		if _, err := t.exec(`DELETE FROM environments WHERE id = ?`, id); err != nil {
			return err
		}
		return s.emitEnvironment(t, eventDeleted, author, env)
	})
}

// ListLevels returns an environment's hierarchy levels, least specific first.
func (s *Store) ListLevels(ctx context.Context, env int64) ([]Level, error) {
	var out []Level
	err := s.read(ctx, func(t *txn) error {
		if _, err := t.environment(env); err != nil {
			return err
		}
		rows, err := t.levels(env)
		if err != nil {
			return err
		}
		out = make([]Level, 0, len(rows))
		for i, l := range rows {
			lv := Level{ID: l.id, Name: l.name, EnvironmentID: env}
			if i > 0 {
				parent := rows[i-1].name
				lv.Parent = &parent
			}
			if lv.Values, err = t.levelValues(l.id); err != nil {
				return err
			}
			out = append(out, lv)
		}
		return nil
	})
	return out, err
}

func (t *txn) levelValues(level int64) ([]string, error) {
	values, err := queryAll(t, func(rows *sql.Rows) (string, error) {
		var v string
		err := rows.Scan(&v)
		return v, err
	}, `SELECT value FROM level_values WHERE level_id = ?`, level)
	sort.Strings(values)
	return values, err
}

// GetLevel returns one level, by name or by id (all digits).
func (s *Store) GetLevel(ctx context.Context, env int64, level string) (Level, error) {
	levels, err := s.ListLevels(ctx, env)
	if err != nil {
		return Level{}, err
	}
	return findLevel(env, levels, level)
}

func findLevel(env int64, levels []Level, level string) (Level, error) {
	id, byID := ParseID(level)
	for _, l := range levels {
		if (byID && l.ID == id) || (!byID && l.Name == level) {
			return l, nil
		}
	}
	return Level{}, errorf(NotFound, "hierarchy level %q not found in environment %d", level, env)
}

// ParseID reads an identifier as the API's paths and parameters give it: all
// digits, so that a name such as "1e3" or "+1" is never taken for an id.
func ParseID(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// RenameLevel renames a hierarchy level; documents stay where they are.
func (s *Store) RenameLevel(ctx context.Context, author string, env int64, level, name string) error {
	if name == "" {
		return invalidField("name", "name may not be empty")
	}
	return s.writeEnv(ctx, env, func(t *txn) error {
		rows, err := t.levels(env)
		if err != nil {
			return err
		}
		id, byID := ParseID(level)
		var target *levelRow
		for i, l := range rows {
			if (byID && l.id == id) || (!byID && l.name == level) {
				target = &rows[i]
			}
		}
		if target == nil {
			return errorf(NotFound, "hierarchy level %q not found in environment %d", level, env)
		}
		if target.name == name {
			return nil
		}
		for _, l := range rows {
			if l.name == name {
				return errorf(Conflict, "environment %d already has a hierarchy level named %q", env, name)
			}
		}
		if _, err := t.exec(`UPDATE hierarchy_levels SET name = ? WHERE id = ?`, name, target.id); err != nil {
			return err
		}
		return s.emitEnvironmentUpdated(t, author, env)
	})
}
