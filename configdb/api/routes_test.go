package api

import (
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/topics"
)

func TestParseDocumentRoute(t *testing.T) {
	lv := func(pairs ...string) []topics.LevelValue {
		var out []topics.LevelValue
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, topics.LevelValue{Name: pairs[i], Value: pairs[i+1]})
		}
		return out
	}
	tests := []struct {
		path   string
		ok     bool
		res    string
		levels []topics.LevelValue
		what   string
		op     string
	}{
		{"environments/1/resources/astute/values", true, "astute", nil, "values", ""},
		{"environments/1/nodes/n1/resources/override/plugins/overrides", true, "override/plugins", lv("nodes", "n1"), "overrides", ""},
		{"environments/1/resources/override/plugins/values/keys/set", true, "override/plugins", nil, "values", "set"},
		{"environments/1/a/1/b/2/resources/5/history", true, "5", lv("a", "1", "b", "2"), "history", ""},
		{"environments/1/resources/x/values/values", true, "x/values", nil, "values", ""},
		{"environments/1/nodes/a%2Fb/resources/over%2Fride/values", true, "over/ride", lv("nodes", "a/b"), "values", ""},
		// Greedy levels, as werkzeug: "resources/x/" is a level pair here.
		{"environments/1/resources/x/resources/astute/values", true, "astute", lv("resources", "x"), "values", ""},
		{"environments/1/resources/astute/history/keys/set", false, "", nil, "", ""},
		{"environments/x/resources/astute/values", false, "", nil, "", ""},
		{"environments/1/nodes/resources/astute/values", false, "", nil, "", ""},
		{"environments/1/resources//values", false, "", nil, "", ""},
		{"environments/1/resources/astute", false, "", nil, "", ""},
		{"environments/1/nodes/%zz/resources/astute/values", false, "", nil, "", ""},
	}
	for _, tt := range tests {
		d, ok := parseDocumentRoute(tt.path)
		if ok != tt.ok {
			t.Errorf("%s: ok=%v", tt.path, ok)
			continue
		}
		if !ok {
			continue
		}
		if d.addr.Resource != tt.res || !reflect.DeepEqual(d.addr.Levels, tt.levels) || d.what != tt.what || d.keysOp != tt.op {
			t.Errorf("%s: %+v", tt.path, d)
		}
	}
}

func TestParseValuelessLevel(t *testing.T) {
	tests := []struct {
		path   string
		ok     bool
		res    string
		levels []topics.LevelValue
		name   string
	}{
		{"environments/9/lvl1/resources/5/values", true, "5", nil, "lvl1"},
		{"environments/9/lvl1/a/lvl2/resources/5/values", true, "5", []topics.LevelValue{{Name: "lvl1", Value: "a"}}, "lvl2"},
		{"environments/9/lvl1/a/lvl2/resources/override/plugins/overrides/keys/set", true, "override/plugins", []topics.LevelValue{{Name: "lvl1", Value: "a"}}, "lvl2"},
		{"environments/9/a%2Fb/resources/x/history", true, "x", nil, "a/b"},
		// Greedy, as parseDocumentRoute: "l/resources/" is a level pair.
		{"environments/9/l/resources/x/resources/5/values", true, "5", []topics.LevelValue{{Name: "l", Value: "resources"}}, "x"},
		// Complete pairs, or none, are parseDocumentRoute's.
		{"environments/9/lvl1/a/resources/5/values", false, "", nil, ""},
		{"environments/9/resources/5/values", false, "", nil, ""},
		{"environments/9//resources/5/values", false, "", nil, ""},
		{"environments/x/lvl1/resources/5/values", false, "", nil, ""},
		{"environments/9/lvl1/resources/5/history/keys/set", false, "", nil, ""},
		{"environments/9/lvl1/resources/5", false, "", nil, ""},
		{"environments/9/%zz/resources/5/values", false, "", nil, ""},
	}
	for _, tt := range tests {
		a, name, ok := parseValuelessLevel(tt.path)
		if ok != tt.ok {
			t.Errorf("%s: ok=%v", tt.path, ok)
			continue
		}
		if ok && (a.Env != 9 || a.Resource != tt.res || !reflect.DeepEqual(a.Levels, tt.levels) || name != tt.name) {
			t.Errorf("%s: %+v %q", tt.path, a, name)
		}
	}
}

// werkzeugRule is tuning-box's route as a regular expression, with its
// greedy levels and lazy resource name: the reference parseDocumentRoute
// must agree with. (?s): the name may hold any character, as the path
// converter takes it; the escaped paths the handler sees never hold a raw
// newline, but the fuzzer's inputs do.
var werkzeugRule = regexp.MustCompile(`(?s)^environments/([0-9]+)/((?:[^/]+/[^/]+/)*)resources/([^/].*?)/(values|overrides|history)(?:/keys/([^/]+))?$`)

func parseWithRule(rest string) (docRoute, bool) {
	m := werkzeugRule.FindStringSubmatch(rest)
	if m == nil {
		return docRoute{}, false
	}
	env, err := strconv.ParseInt(m[1], 10, 64)
	res, err2 := url.PathUnescape(m[3])
	if err != nil || err2 != nil || (m[4] == "history" && m[5] != "") {
		return docRoute{}, false
	}
	d := docRoute{addr: configdb.Address{Env: env, Resource: res}, what: m[4], keysOp: m[5]}
	if m[2] != "" {
		segs := strings.Split(strings.TrimSuffix(m[2], "/"), "/")
		for i := 0; i+1 < len(segs); i += 2 {
			name, err1 := url.PathUnescape(segs[i])
			value, err2 := url.PathUnescape(segs[i+1])
			if err1 != nil || err2 != nil {
				return docRoute{}, false
			}
			d.addr.Levels = append(d.addr.Levels, topics.LevelValue{Name: name, Value: value})
		}
	}
	return d, true
}

// FuzzDocumentRoute: the parser agrees with tuning-box's rule, and a parsed
// route rebuilt with every part escaped parses back to the same route.
func FuzzDocumentRoute(f *testing.F) {
	f.Add("environments/1/nodes/n1/resources/override/plugins/values/keys/set")
	f.Add("environments/9/a/%2F/b/c/resources/r%20x/history")
	f.Add("environments/1/resources/x/resources/y/overrides")
	f.Add("environments/1/resources/a//values/values")
	f.Add("environments/1/l/v/resources/resources/values/keys/set/values")
	f.Fuzz(func(t *testing.T, path string) {
		d, ok := parseDocumentRoute(path)
		ref, refOK := parseWithRule(path)
		if ok != refOK || !reflect.DeepEqual(d, ref) {
			t.Fatalf("%q: parsed %+v %v; the rule gives %+v %v", path, d, ok, ref, refOK)
		}
		if !ok {
			return
		}
		var b strings.Builder
		b.WriteString("environments/" + strconv.FormatInt(d.addr.Env, 10) + "/")
		for _, l := range d.addr.Levels {
			b.WriteString(url.PathEscape(l.Name) + "/" + url.PathEscape(l.Value) + "/")
		}
		b.WriteString("resources/" + url.PathEscape(d.addr.Resource) + "/" + d.what)
		if d.keysOp != "" {
			b.WriteString("/keys/" + d.keysOp)
		}
		again, ok := parseDocumentRoute(b.String())
		if !ok || !reflect.DeepEqual(again, d) {
			t.Fatalf("%q -> %+v -> %q -> %+v (%v)", path, d, b.String(), again, ok)
		}
	})
}
