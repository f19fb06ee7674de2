package configdb

import (
	"net/http"
	"net/url"
	"strconv"
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
	env, isID := pathID(segs[1])
	if !isID {
		return d, false
	}
	body := segs[2:]
	for pairs := (len(body) - 3) / 2; pairs >= 0; pairs-- {
		if !levelPairs(body[:2*pairs]) || body[2*pairs] != "resources" {
			continue
		}
		tail := body[2*pairs+1:]
		// The shortest resource name that leaves a valid suffix.
		for n := 1; n < len(tail); n++ {
			if tail[0] == "" {
				break
			}
			what, op, ok := routeSuffix(tail[n:])
			if !ok {
				continue
			}
			res, err := url.PathUnescape(strings.Join(tail[:n], "/"))
			if err != nil {
				return d, false
			}
			d = docRoute{addr: configdb.Address{Env: env, Resource: res}, what: what, keysOp: op}
			for i := 0; i < 2*pairs; i += 2 {
				name, err1 := url.PathUnescape(body[i])
				value, err2 := url.PathUnescape(body[i+1])
				if err1 != nil || err2 != nil {
					return docRoute{}, false
				}
				d.addr.Levels = append(d.addr.Levels, topics.LevelValue{Name: name, Value: value})
			}
			if what == "history" && op != "" {
				return docRoute{}, false
			}
			return d, true
		}
	}
	return d, false
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

// pathID parses an id segment: digits only.
func pathID(seg string) (int64, bool) {
	if seg == "" {
		return 0, false
	}
	for _, c := range seg {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(seg, 10, 64)
	return id, err == nil
}

// route dispatches on the path after /api/v1/config/.
func (q *request) route() {
	segs := strings.Split(q.rest, "/")
	switch {
	case len(segs) == 1 && segs[0] == "components":
		if q.methods(http.MethodGet, http.MethodPost) {
			q.components()
		}
		return
	case len(segs) == 2 && segs[0] == "components":
		if id, ok := pathID(segs[1]); ok {
			if q.methods(http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete) {
				q.component(id)
			}
			return
		}
	case len(segs) == 1 && segs[0] == "resource_definitions":
		if q.methods(http.MethodGet, http.MethodPost) {
			q.resourceDefinitions()
		}
		return
	case len(segs) == 2 && segs[0] == "resource_definitions":
		if id, ok := pathID(segs[1]); ok {
			if q.methods(http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete) {
				q.resourceDefinition(id)
			}
			return
		}
	case len(segs) == 4 && segs[0] == "resource_definitions" && segs[2] == "keys":
		if id, ok := pathID(segs[1]); ok {
			if q.methods(http.MethodPut, http.MethodPatch) {
				q.resourceDefinitionKeys(id, segs[3])
			}
			return
		}
	case len(segs) == 1 && segs[0] == "environments":
		if q.methods(http.MethodGet, http.MethodPost) {
			q.environments()
		}
		return
	case len(segs) == 2 && segs[0] == "environments":
		if id, ok := pathID(segs[1]); ok {
			if q.methods(http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete) {
				q.environment(id)
			}
			return
		}
	case len(segs) == 3 && segs[0] == "environments" && segs[2] == "hierarchy_levels":
		if id, ok := pathID(segs[1]); ok {
			if q.methods(http.MethodGet) {
				q.levels(id)
			}
			return
		}
	case len(segs) == 4 && segs[0] == "environments" && segs[2] == "hierarchy_levels":
		id, ok := pathID(segs[1])
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
	q.h.notFound(q.w, q.r)
}
