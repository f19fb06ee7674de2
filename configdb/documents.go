package configdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/topics"
)

// Precondition holds a write's conditional headers. Empty fields check nothing.
type Precondition struct {
	// IfMatch is a list of ETags, or "*": the document must currently have
	// one of them ("*": must exist).
	IfMatch string
	// IfNoneMatch "*" means the document must not exist yet.
	IfNoneMatch string
}

// resolved is an Address checked against the environment.
type resolved struct {
	resourceID   int64
	resourceName string
	levelIDs     []int64
	// pathKeys[i] is the level_path of the first i levels; the last is the
	// document's own.
	pathKeys []string
	// lookups[i] is the lookup path shown for the first i levels: "/",
	// "/lvl1/v1/", ...
	lookups []string
}

// resolve checks, in tuning-box's order, that the environment exists, that
// the resource belongs to one of its components and that the levels are a
// prefix of its hierarchy.
func (t *txn) resolve(a Address) (resolved, error) {
	var r resolved
	var gen int64
	err := t.queryRow(`SELECT generation FROM environments WHERE id = ?`, a.Env).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return r, envNotFound(a.Env)
	}
	if err != nil {
		return r, err
	}
	if r.resourceID, r.resourceName, err = t.resource(a.Env, a.Resource); err != nil {
		return r, err
	}
	levels, err := t.levels(a.Env)
	if err != nil {
		return r, err
	}
	if len(a.Levels) > len(levels) {
		given := make([]string, len(a.Levels))
		for i, l := range a.Levels {
			given[i] = l.Name
		}
		have := make([]string, len(levels))
		for i, l := range levels {
			have[i] = l.name
		}
		return r, errorf(NotFound, "Levels %s can't be matched with environment %d levels: %s", pyList(given), a.Env, pyList(have))
	}
	var path strings.Builder
	var lookup strings.Builder
	path.WriteByte('[')
	lookup.WriteByte('/')
	r.pathKeys = append(r.pathKeys, "[]")
	r.lookups = append(r.lookups, "/")
	for i, l := range a.Levels {
		if levels[i].name != l.Name {
			return r, errorf(NotFound, "Unexpected level name %s. Expected %s.", pyString(l.Name), pyString(levels[i].name))
		}
		r.levelIDs = append(r.levelIDs, levels[i].id)
		if i > 0 {
			path.WriteByte(',')
		}
		value, _ := json.Marshal(l.Value)
		path.WriteString("[" + strconv.FormatInt(levels[i].id, 10) + ",")
		path.Write(value)
		path.WriteByte(']')
		r.pathKeys = append(r.pathKeys, path.String()+"]")
		lookup.WriteString(l.Name + "/" + l.Value + "/")
		r.lookups = append(r.lookups, lookup.String())
	}
	return r, nil
}

// LevelWithoutValue answers a document path whose last level, name, comes
// without its value, as in .../lvl1/v1/lvl2/resources/...: it always returns
// a NotFound error. That is resolve's error, naming the expected level, when
// the environment, the resource or the level names are wrong, and otherwise
// one naming the level that lacks its value.
func (s *Store) LevelWithoutValue(ctx context.Context, a Address, name string) error {
	err := s.read(ctx, func(t *txn) error {
		full := a
		full.Levels = append(append([]topics.LevelValue(nil), a.Levels...), topics.LevelValue{Name: name})
		_, err := t.resolve(full)
		return err
	})
	if err != nil {
		return err
	}
	return errorf(NotFound, "Level %s has no value in the path. Give it as %s/<value>/ before resources/.", pyString(name), name)
}

// resource finds a resource definition of the environment's components by id
// (all digits) or by name.
func (t *txn) resource(env int64, res string) (int64, string, error) {
	q := `SELECT rd.id, rd.name FROM resource_definitions rd
		JOIN environment_components ec ON ec.component_id = rd.component_id
		WHERE ec.environment_id = ? AND `
	var arg any = res
	if id, ok := ParseID(res); ok {
		q, arg = q+"rd.id = ?", id
	} else {
		q += "rd.name = ?"
	}
	rows, err := t.query(q+" ORDER BY rd.id", env, arg)
	if err != nil {
		return 0, "", err
	}
	defer rows.Close()
	var ids []int64
	var name string
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &name); err != nil {
			return 0, "", err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, "", err
	}
	switch len(ids) {
	case 0:
		return 0, "", errorf(NotFound, "resource_definition not found by %s in environment %d", res, env)
	case 1:
		return ids[0], name, nil
	}
	return 0, "", errorf(Conflict, "resource name %q is ambiguous in environment %d: definitions %v have it; use an id", res, env, ids)
}

// pyString and pyList quote like tuning-box's messages did.
func pyString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func pyList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = pyString(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

type docRow struct {
	exists   bool
	id       int64
	version  int64
	ref      sql.NullInt64
	otherRef sql.NullInt64
}

func (t *txn) docRow(env, res int64, path string, kind DocKind) (docRow, error) {
	var row docRow
	var vv, ov int64
	var vr, or sql.NullInt64
	err := t.queryRow(`SELECT id, values_version, values_ref, overrides_version, overrides_ref FROM documents
		WHERE environment_id = ? AND resource_definition_id = ? AND level_path = ?`, env, res, path).Scan(&row.id, &vv, &vr, &ov, &or)
	if errors.Is(err, sql.ErrNoRows) {
		return row, nil
	}
	if err != nil {
		return row, err
	}
	row.exists = true
	if kind == Values {
		row.version, row.ref, row.otherRef = vv, vr, or
	} else {
		row.version, row.ref, row.otherRef = ov, or, vr
	}
	return row, nil
}

func etag(ref sql.NullInt64) string {
	if !ref.Valid {
		return `"0"`
	}
	return `"` + strconv.FormatInt(ref.Int64, 10) + `"`
}

func emptyDoc() []byte { return []byte("{}") }

// Get returns the document stored at exactly the address, as it is now
// (version 0) or at a version. Nothing stored gives "{}" with ETag "0".
func (s *Store) Get(ctx context.Context, a Address, kind DocKind, version int64) (Document, error) {
	var doc Document
	err := s.read(ctx, func(t *txn) error {
		r, err := t.resolve(a)
		if err != nil {
			return err
		}
		row, err := t.docRow(a.Env, r.resourceID, r.pathKeys[len(r.pathKeys)-1], kind)
		if err != nil {
			return err
		}
		if version > 0 {
			var body string
			var id int64
			err := sql.ErrNoRows
			if row.exists {
				err = t.queryRow(`SELECT id, body FROM document_versions WHERE document_id = ? AND kind = ? AND version = ?`,
					row.id, string(kind), version).Scan(&id, &body)
			}
			if errors.Is(err, sql.ErrNoRows) {
				return errorf(NotFound, "version %d of the %s of %s at %s in environment %d not found", version, kind, r.resourceName, r.lookups[len(r.lookups)-1], a.Env)
			}
			if err != nil {
				return err
			}
			doc = Document{Body: []byte(body), Version: version, ETag: etag(sql.NullInt64{Int64: id, Valid: true})}
			return nil
		}
		doc = Document{Body: emptyDoc(), Version: row.version, ETag: etag(row.ref)}
		if row.ref.Valid {
			var body string
			if err := t.queryRow(`SELECT body FROM document_versions WHERE id = ?`, row.ref.Int64).Scan(&body); err != nil {
				return err
			}
			doc.Body = []byte(body)
		}
		return nil
	})
	return doc, err
}

// Effective returns the merged values at an address. See Effective.
func (s *Store) Effective(ctx context.Context, a Address) (*Effective, error) {
	key := cacheKey(a)
	var envGen, catGen int64
	switch {
	case s.cache == nil:
	case s.local:
		// Read before the data: a write committed meanwhile bumps them, and
		// what is cached now is dropped at its next use.
		envGen, catGen = s.envEpoch(a.Env).Load(), s.catalogEpoch.Load()
		if eff := s.cache.get(key, envGen, catGen); eff != nil {
			return eff, nil
		}
	default:
		err := s.gens.QueryRowContext(ctx, a.Env).Scan(&envGen, &catGen)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, envNotFound(a.Env)
		}
		if err != nil {
			return nil, s.mapErr(err)
		}
		if eff := s.cache.get(key, envGen, catGen); eff != nil {
			return eff, nil
		}
	}
	var eff *Effective
	err := s.read(ctx, func(t *txn) error {
		if s.cache != nil && !s.local {
			// The generations of the snapshot the merge is built from.
			err := t.queryRow(`SELECT e.generation, m.value FROM environments e, configdb_meta m
				WHERE e.id = ? AND m.name = 'catalog_generation'`, a.Env).Scan(&envGen, &catGen)
			if errors.Is(err, sql.ErrNoRows) {
				return envNotFound(a.Env)
			}
			if err != nil {
				return err
			}
		}
		r, err := t.resolve(a)
		if err != nil {
			return err
		}
		args := []any{a.Env, r.resourceID}
		for _, p := range r.pathKeys {
			args = append(args, p)
		}
		rows, err := t.query(`SELECT d.level_path, v.body, o.body FROM documents d
			LEFT JOIN document_versions v ON v.id = d.values_ref
			LEFT JOIN document_versions o ON o.id = d.overrides_ref
			WHERE d.environment_id = ? AND d.resource_definition_id = ? AND d.level_path IN (`+placeholders(len(r.pathKeys))+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		type pair struct{ values, overrides []byte }
		found := map[string]pair{}
		for rows.Next() {
			var path string
			var p pair
			if err := rows.Scan(&path, &p.values, &p.overrides); err != nil {
				return err
			}
			found[path] = p
		}
		if err := rows.Err(); err != nil {
			return err
		}
		sources := make([]source, 0, 2*len(r.pathKeys))
		for i, p := range r.pathKeys {
			got := found[p]
			for _, s := range []source{
				{body: got.values, level: i, what: "values at " + r.lookups[i]},
				{body: got.overrides, level: i, what: "overrides at " + r.lookups[i]},
			} {
				if s.body != nil {
					sources = append(sources, s)
				}
			}
		}
		eff, err = s.merger.merge(sources, r.lookups)
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.cache != nil {
		s.cache.put(key, envGen, catGen, eff)
	}
	return eff, nil
}

// Put replaces the document at exactly the address and returns its new
// state. body is any JSON; it is stored in canonical form as a new version.
func (s *Store) Put(ctx context.Context, author string, a Address, kind DocKind, body []byte, pre Precondition) (Document, error) {
	canon, err := Canonical(body)
	if err != nil {
		return Document{}, err
	}
	var doc Document
	err = s.writeEnv(ctx, a.Env, func(t *txn) error {
		doc, err = s.putDoc(t, author, a, kind, pre, false, func([]byte) ([]byte, error) { return canon, nil })
		return err
	})
	return doc, err
}

// PutMany writes many documents in one transaction, as Put does each: a bulk
// upload (such as every node's files) costs one commit.
func (s *Store) PutMany(ctx context.Context, author string, docs []PutDoc) error {
	canon := make([][]byte, len(docs))
	for i, d := range docs {
		var err error
		if canon[i], err = Canonical(d.Body); err != nil {
			return err
		}
	}
	return s.write(ctx, func(t *txn) error {
		locked := map[int64]bool{}
		for i, d := range docs {
			if !locked[d.Address.Env] {
				if err := t.lockEnv(d.Address.Env); err != nil {
					return err
				}
				locked[d.Address.Env] = true
			}
			body := canon[i]
			if _, err := s.putDoc(t, author, d.Address, d.Kind, Precondition{}, false, func([]byte) ([]byte, error) { return body, nil }); err != nil {
				return err
			}
		}
		return nil
	})
}

// Keys applies a keys operation to the document at exactly the address,
// atomically. The document's row must exist (something was PUT there).
func (s *Store) Keys(ctx context.Context, author string, a Address, kind DocKind, op KeysOp, paths []KeyPath, pre Precondition) (Document, error) {
	var doc Document
	err := s.writeEnv(ctx, a.Env, func(t *txn) (err error) {
		doc, err = s.putDoc(t, author, a, kind, pre, true, func(old []byte) ([]byte, error) {
			return applyKeys(old, op, paths)
		})
		return err
	})
	return doc, err
}

// putDoc is every document write: check, change, store a version, record the
// level values and the event. The environment is locked by the caller.
func (s *Store) putDoc(t *txn, author string, a Address, kind DocKind, pre Precondition, requireRow bool,
	change func(old []byte) ([]byte, error)) (Document, error) {
	if kind != Values && kind != Overrides {
		return Document{}, errorf(NotFound, "unknown document kind %q", kind)
	}
	r, err := t.resolve(a)
	if err != nil {
		return Document{}, err
	}
	path := r.pathKeys[len(r.pathKeys)-1]
	where := r.lookups[len(r.lookups)-1]
	row, err := t.docRow(a.Env, r.resourceID, path, kind)
	if err != nil {
		return Document{}, err
	}
	if requireRow && !row.exists {
		return Document{}, errorf(NotFound, "nothing is stored at %s for resource %s in environment %d: keys operations need a document there; PUT one first", where, r.resourceName, a.Env)
	}
	current := etag(row.ref)
	if err := pre.check(current, row.ref.Valid, string(kind), where); err != nil {
		return Document{}, err
	}
	var old []byte
	if row.ref.Valid {
		var body string
		if err := t.queryRow(`SELECT body FROM document_versions WHERE id = ?`, row.ref.Int64).Scan(&body); err != nil {
			return Document{}, err
		}
		old = []byte(body)
	}
	base := old
	if base == nil {
		base = emptyDoc()
	}
	body, err := change(base)
	if err != nil {
		return Document{}, err
	}
	if !row.exists {
		if err := t.queryRow(`INSERT INTO documents (environment_id, resource_definition_id, level_path) VALUES (?, ?, ?) RETURNING id`,
			a.Env, r.resourceID, path).Scan(&row.id); err != nil {
			return Document{}, err
		}
	}
	changed := diffKeys(old, body)
	changedJSON, _ := json.Marshal(changed)
	version := row.version + 1
	var ref int64
	if err := t.queryRow(`INSERT INTO document_versions (document_id, kind, version, created_at, author, changed, body)
		VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		row.id, string(kind), version, t.now.UnixNano(), author, string(changedJSON), string(body)).Scan(&ref); err != nil {
		return Document{}, err
	}
	if _, err := t.exec(`UPDATE documents SET `+string(kind)+`_version = ?, `+string(kind)+`_ref = ? WHERE id = ?`, version, ref, row.id); err != nil {
		return Document{}, err
	}
	levels := make([][2]string, len(a.Levels))
	for i, l := range a.Levels {
		levels[i] = [2]string{l.Name, l.Value}
		if _, err := t.exec(`INSERT INTO level_values (level_id, value) VALUES (?, ?) ON CONFLICT DO NOTHING`, r.levelIDs[i], l.Value); err != nil {
			return Document{}, err
		}
	}
	ev := ValuesEvent{
		EnvironmentID: a.Env, Resource: r.resourceName, ResourceID: r.resourceID, Kind: kind,
		Levels: levels, Version: version, Author: author, Changed: changed, Document: body,
	}
	if err := s.emitValues(t, ev, a.Levels); err != nil {
		return Document{}, err
	}
	return Document{Body: body, Version: version, ETag: etag(sql.NullInt64{Int64: ref, Valid: true})}, nil
}

func (p Precondition) check(current string, exists bool, kind, where string) error {
	if p.IfNoneMatch != "" {
		if strings.TrimSpace(p.IfNoneMatch) == "*" && exists {
			return errorf(PreconditionFailed, "the %s at %s already exist (If-None-Match: *)", kind, where)
		}
		for _, tag := range splitETags(p.IfNoneMatch) {
			if tag == current && exists {
				return errorf(PreconditionFailed, "the %s at %s still have ETag %s (If-None-Match)", kind, where, current)
			}
		}
	}
	if p.IfMatch == "" {
		return nil
	}
	if strings.TrimSpace(p.IfMatch) == "*" {
		if !exists {
			return errorf(PreconditionFailed, "no %s are stored at %s (If-Match: *)", kind, where)
		}
		return nil
	}
	for _, tag := range splitETags(p.IfMatch) {
		if tag == current {
			return nil
		}
	}
	return errorf(PreconditionFailed, "the %s at %s changed: their ETag is now %s, not %s; read them again and retry", kind, where, current, p.IfMatch)
}

// splitETags splits an If-Match list. Weak tags never match: If-Match uses
// strong comparison.
func splitETags(h string) []string {
	var tags []string
	for _, t := range strings.Split(h, ",") {
		t = strings.TrimSpace(t)
		if t != "" && !strings.HasPrefix(t, "W/") {
			tags = append(tags, t)
		}
	}
	return tags
}

// History lists the versions of the documents at exactly the address, oldest
// first: of one kind, or of both when kind is "".
func (s *Store) History(ctx context.Context, a Address, kind DocKind) ([]Version, error) {
	out := []Version{}
	err := s.read(ctx, func(t *txn) error {
		r, err := t.resolve(a)
		if err != nil {
			return err
		}
		row, err := t.docRow(a.Env, r.resourceID, r.pathKeys[len(r.pathKeys)-1], Values)
		if err != nil || !row.exists {
			return err
		}
		q := `SELECT version, kind, created_at, author, changed FROM document_versions WHERE document_id = ?`
		args := []any{row.id}
		if kind != "" {
			q += ` AND kind = ?`
			args = append(args, string(kind))
		}
		rows, err := t.query(q+` ORDER BY id`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v Version
			var k, changed string
			var at int64
			if err := rows.Scan(&v.Version, &k, &at, &v.Author, &changed); err != nil {
				return err
			}
			v.Kind, v.Time = DocKind(k), time.Unix(0, at).UTC()
			if err := json.Unmarshal([]byte(changed), &v.Changed); err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}
