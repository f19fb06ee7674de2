package api

import (
	"net/http"
	"strconv"

	"github.com/opsfirehose/firehose/configdb"
)

// document serves values, overrides, their keys operations and history.
func (q *request) document(d docRoute) {
	switch {
	case d.what == "history":
		if q.methods(http.MethodGet) {
			q.history(d)
		}
	case d.keysOp != "":
		if q.methods(http.MethodPut, http.MethodPatch) {
			q.keys(d)
		}
	default:
		if !q.methods(http.MethodGet, http.MethodPut) {
			return
		}
		if q.r.Method == http.MethodPut {
			q.put(d)
		} else {
			q.get(d)
		}
	}
}

func (q *request) precondition() configdb.Precondition {
	return configdb.Precondition{IfMatch: q.r.Header.Get("If-Match"), IfNoneMatch: q.r.Header.Get("If-None-Match")}
}

// get answers a document: stored, at a version, or effective, whole or one key.
func (q *request) get(d docRoute) {
	query := q.r.URL.Query()
	_, effective := query["effective"]
	_, lookup := query["show_lookup"]
	keyParam, hasKey := query["key"]
	var version int64
	if v, ok := query["version"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || n <= 0 {
			q.fail(invalid("version", "version must be a positive integer"))
			return
		}
		version = n
	}
	kind := configdb.DocKind(d.what)
	switch {
	case lookup && !effective:
		// tuning-box answers 409 here (a RequestValidationError), and its
		// clients expect that: the query is well-formed but asks for
		// something stored values do not have.
		q.fail(&configdb.Error{Kind: configdb.Conflict, Msg: "lookup path tracing can be done only for effective values: add ?effective", Field: "show_lookup"})
		return
	case effective && kind == configdb.Overrides:
		q.fail(invalid("effective", "effective values are read from .../values?effective"))
		return
	case effective && version > 0:
		q.fail(invalid("version", "a version can be read of stored values only, not with ?effective"))
		return
	}
	ctx := q.r.Context()
	if effective {
		eff, err := q.h.store.Effective(ctx, d.addr)
		if err != nil {
			q.fail(err)
			return
		}
		if !hasKey {
			writeRaw(q.w, http.StatusOK, eff.JSON(lookup))
			return
		}
		val, err := eff.Key(configdb.SplitKey(keyParam[0]), lookup)
		if err != nil {
			q.fail(err)
			return
		}
		writeRaw(q.w, http.StatusOK, val)
		return
	}
	doc, err := q.h.store.Get(ctx, d.addr, kind, version)
	if err != nil {
		q.fail(err)
		return
	}
	body := doc.Body
	if hasKey {
		if body, err = configdb.LookupKey(doc.Body, configdb.SplitKey(keyParam[0])); err != nil {
			q.fail(err)
			return
		}
	}
	if version == 0 {
		q.w.Header().Set("ETag", doc.ETag)
	}
	writeRaw(q.w, http.StatusOK, body)
}

// put replaces the document at exactly the level path.
func (q *request) put(d docRoute) {
	body, ok := q.body()
	if !ok {
		return
	}
	doc, err := q.h.store.Put(q.r.Context(), q.ctxAuthor(), d.addr, configdb.DocKind(d.what), body, q.precondition())
	if err != nil {
		q.fail(err)
		return
	}
	q.noContent(doc.ETag)
}

// keys applies a batch of keys operations atomically.
func (q *request) keys(d docRoute) {
	body, ok := q.body()
	if !ok {
		return
	}
	paths, err := configdb.ParseKeysBatch(configdb.KeysOp(d.keysOp), body)
	if err != nil {
		q.fail(err)
		return
	}
	doc, err := q.h.store.Keys(q.r.Context(), q.ctxAuthor(), d.addr, configdb.DocKind(d.what), configdb.KeysOp(d.keysOp), paths, q.precondition())
	if err != nil {
		q.fail(err)
		return
	}
	q.noContent(doc.ETag)
}

// history lists the versions at the level path: ?kind=values|overrides, or both.
func (q *request) history(d docRoute) {
	kind := configdb.DocKind(q.r.URL.Query().Get("kind"))
	if kind != "" && kind != configdb.Values && kind != configdb.Overrides {
		q.fail(invalid("kind", "kind must be values or overrides"))
		return
	}
	q.ok(q.h.store.History(q.r.Context(), d.addr, kind))
}
