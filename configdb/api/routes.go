package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/topics"
)

// docRoute is a parsed values, overrides or history route.
type docRoute struct {
	addr configdb.Address
	// what is "values", "overrides" or "history".
	what string
	// keysOp is set for .../keys/<op>.
	keysOp string
}

// parseDocumentRoute parses the (escaped) path after /api/v1/config/ as
// tuning-box's werkzeug rule
//
//	environments/<int>/<levels>resources/<id_or_name>/<values|overrides|history>[/keys/<op>]
//
// did: <levels> is "l1/v1/l2/v2/...", taken greedily, and the resource name,
// which may contain "/", lazily. ok is false when it is not a document route.
// routes_test.go checks it against that rule as a regular expression; this is
// the same, without a regexp's cost on every Hiera lookup.
func parseDocumentRoute(rest string) (d docRoute, ok bool) {
	segs := strings.Split(rest, "/")
	if len(segs) < 5 || segs[0] != "environments" {
		return d, false
	}
	env, isID := configdb.ParseID(segs[1])
	if !isID {
		return d, false
	}
	body := segs[2:]
	for pairs := (len(body) - 3) / 2; pairs >= 0; pairs-- {
		if !levelPairs(body[:2*pairs]) || body[2*pairs] != "resources" {
			continue
		}
		res, what, op, found := resourceTail(body[2*pairs+1:])
		if !found {
			continue
		}
		if res == "" {
			return d, false
		}
		d = docRoute{addr: configdb.Address{Env: env, Resource: res}, what: what, keysOp: op}
		var err error
		if d.addr.Levels, err = levelValues(body[:2*pairs]); err != nil {
			return docRoute{}, false
		}
		return d, true
	}
	return d, false
}

// parseValuelessLevel recognises a document route whose last level has no
// value, such as environments/9/lvl1/a/lvl2/resources/5/values: an odd
// number of level segments before "resources", taken greedily as
// parseDocumentRoute takes pairs. It returns the address of the complete
// pairs and the name of the level without a value. route tries it only
// after parseDocumentRoute, so that such paths answer a 404 naming the level
// rather than "no such endpoint".
func parseValuelessLevel(rest string) (a configdb.Address, name string, ok bool) {
	segs := strings.Split(rest, "/")
	if len(segs) < 6 || segs[0] != "environments" {
		return a, "", false
	}
	env, isID := configdb.ParseID(segs[1])
	if !isID {
		return a, "", false
	}
	body := segs[2:]
	for n := len(body) - 3; n >= 1; n-- {
		if n%2 == 0 || !levelPairs(body[:n]) || body[n] != "resources" {
			continue
		}
		res, _, _, found := resourceTail(body[n+1:])
		if !found {
			continue
		}
		if res == "" {
			return configdb.Address{}, "", false
		}
		a = configdb.Address{Env: env, Resource: res}
		var err error
		if a.Levels, err = levelValues(body[:n-1]); err != nil {
			return configdb.Address{}, "", false
		}
		if name, err = url.PathUnescape(body[n-1]); err != nil {
			return configdb.Address{}, "", false
		}
		return a, name, true
	}
	return a, "", false
}

// resourceTail splits what follows "resources/" into the (unescaped)
// resource name, the shortest that leaves a valid suffix, and the suffix.
// found is false when there is no such split. When there is one but the name
// does not unescape, or the suffix is history with a keys operation, found
// is true and res empty: the path is no route, as for werkzeug's rule.
func resourceTail(tail []string) (res, what, op string, found bool) {
	for n := 1; n < len(tail); n++ {
		if tail[0] == "" {
			break
		}
		w, o, ok := routeSuffix(tail[n:])
		if !ok {
			continue
		}
		name, err := url.PathUnescape(strings.Join(tail[:n], "/"))
		if err != nil || (w == "history" && o != "") {
			return "", "", "", true
		}
		return name, w, o, true
	}
	return "", "", "", false
}

// levelValues unescapes name/value pairs.
func levelValues(segs []string) ([]topics.LevelValue, error) {
	var out []topics.LevelValue
	for i := 0; i+1 < len(segs); i += 2 {
		name, err := url.PathUnescape(segs[i])
		if err != nil {
			return nil, err
		}
		value, err := url.PathUnescape(segs[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, topics.LevelValue{Name: name, Value: value})
	}
	return out, nil
}

// levelPairs reports whether segs are name/value pairs, none empty.
func levelPairs(segs []string) bool {
	for _, s := range segs {
		if s == "" {
			return false
		}
	}
	return true
}

// routeSuffix matches values|overrides|history, optionally followed by
// keys/<op>.
func routeSuffix(segs []string) (what, op string, ok bool) {
	if len(segs) == 0 {
		return "", "", false
	}
	switch segs[0] {
	case "values", "overrides", "history":
	default:
		return "", "", false
	}
	switch {
	case len(segs) == 1:
		return segs[0], "", true
	case len(segs) == 3 && segs[1] == "keys" && segs[2] != "":
		return segs[0], segs[2], true
	}
	return "", "", false
}

// entityRoutes serves the entity collections: /<name> (GET lists, POST
// creates) and /<name>/<id> (GET, PUT or PATCH updates, DELETE).
var entityRoutes = map[string]struct {
	collection func(*request)
	item       func(*request, int64)
}{
	"components":           {(*request).components, (*request).component},
	"resource_definitions": {(*request).resourceDefinitions, (*request).resourceDefinition},
	"environments":         {(*request).environments, (*request).environment},
}

// route dispatches on the path after /api/v1/config/.
func (q *request) route() {
	segs := strings.Split(q.rest, "/")
	if e, ok := entityRoutes[segs[0]]; ok {
		switch len(segs) {
		case 1:
			if q.methods(http.MethodGet, http.MethodPost) {
				e.collection(q)
			}
			return
		case 2:
			if id, ok := configdb.ParseID(segs[1]); ok {
				if q.methods(http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete) {
					e.item(q, id)
				}
				return
			}
		}
	}
	switch {
	case len(segs) == 4 && segs[0] == "resource_definitions" && segs[2] == "keys":
		if id, ok := configdb.ParseID(segs[1]); ok {
			if q.methods(http.MethodPut, http.MethodPatch) {
				q.resourceDefinitionKeys(id, segs[3])
			}
			return
		}
	case len(segs) == 3 && segs[0] == "environments" && segs[2] == "hierarchy_levels":
		if id, ok := configdb.ParseID(segs[1]); ok {
			if q.methods(http.MethodGet) {
				q.levels(id)
			}
			return
		}
	case len(segs) == 4 && segs[0] == "environments" && segs[2] == "hierarchy_levels":
		id, ok := configdb.ParseID(segs[1])
		level, err := url.PathUnescape(segs[3])
		if ok && err == nil && level != "" {
			if q.methods(http.MethodGet, http.MethodPut, http.MethodPatch) {
				q.level(id, level)
			}
			return
		}
	}
	if d, ok := parseDocumentRoute(q.rest); ok {
		q.document(d)
		return
	}
	if a, name, ok := parseValuelessLevel(q.rest); ok {
		q.fail(q.h.store.LevelWithoutValue(q.r.Context(), a, name))
		return
	}
	q.h.notFound(q.w, q.r)
}
