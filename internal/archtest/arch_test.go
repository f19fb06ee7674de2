package archtest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

const mod = "github.com/opsfirehose/firehose"

// A rule is what a phrase in a "must not" clause forbids a package to
// depend on, directly or through any package it imports.
type rule struct {
	// phrase is matched, case-insensitively, as words in the clause.
	phrase string
	// forbids reports whether the package may not depend on dep.
	forbids func(dep string) bool
}

func under(prefixes ...string) func(string) bool {
	return func(dep string) bool {
		for _, p := range prefixes {
			if dep == p || strings.HasPrefix(dep, p+"/") {
				return true
			}
		}
		return false
	}
}

var (
	mqttLibraries = under("github.com/mochi-mqtt/server/v2", "github.com/eclipse/paho.mqtt.golang", "github.com/eclipse/paho.golang")
	stores        = func(dep string) bool {
		return dep == mod+"/configdb" || under("modernc.org/sqlite", "github.com/jackc/pgx/v5")(dep)
	}
)

// rules are the phrases the package docs use for their dependency rules.
// A "must not" clause with none of them states behaviour, and must be named
// in behavioural below, so that a new rule is either checked or knowingly
// not.
var rules = []rule{
	{"adapters", under(mod + "/adapters")},
	{"sinks", under(mod + "/sinks")},
	{"routes", under(mod + "/router")},
	{"router", under(mod + "/router")},
	{"import the store", stores},
	{"or a store", stores},
	{"the firehose packages", func(dep string) bool {
		return under(mod)(dep) && !under(mod+"/bench", mod+"/internal/gobuild")(dep) // gobuild builds them, as the release does
	}},
	{"HTTP", func(dep string) bool { return dep == "net/http" || under(mod+"/httpserver")(dep) }},
	{"authentication", under(mod+"/internal/credentials", mod+"/httpserver")},
	{"the bus", under(mod + "/bus")},
	{"a broker", func(dep string) bool { return under(mod+"/broker")(dep) || mqttLibraries(dep) }},
	{"the MQTT bus", func(dep string) bool { return under(mod+"/broker")(dep) || mqttLibraries(dep) }},
	{"mochi", under("github.com/mochi-mqtt/server/v2")},
	{"paho", under("github.com/eclipse/paho.mqtt.golang", "github.com/eclipse/paho.golang")},
	{"a NATS client", under("github.com/nats-io/nats.go")},
	{"payloads", under(mod + "/payloads")},
	{"sources of messages", under(mod+"/adapters", mod+"/payloads")},
	{"outside the standard library", func(dep string) bool { return !standard(dep) }},
	{"anything of the bridge's", under(mod)},
	{"any particular configuration", func(dep string) bool { return under(mod)(dep) && !under(mod+"/internal")(dep) }},
}

// behavioural are the "must not" clauses, by package and a words of each,
// that state behaviour rather than dependencies: the tests of their
// packages check them.
var behavioural = map[string][]string{
	mod + "/adapters/ansible":   {"re-encode events"},
	mod + "/adapters/gerrit":    {"publish anything from a request it refuses"},
	mod + "/adapters/launchpad": {"publish anything from a request it refuses"},
	mod + "/adapters/subunit":   {"publish anything from a request it refuses"},
	mod + "/app/brokeronly":     {"link (cmd/broker/deps_test.go)"},
	mod + "/dashboard":          {"publish", "slow a publisher"},
	mod + "/history":            {"cost the live path", "decide who may read what"},
	mod + "/internal/datadir":   {"know which stores live in the directory"},
	mod + "/internal/terminal":  {"print anything itself"},
	mod + "/topics":             {"do I/O, log, or hold state", "be bypassed", "assemble topics with fmt.Sprintf"},
	mod + "/ingest":             {"parse more than it needs"},
	mod + "/internal/gctune":    {"run where the operator set GOGC"},
	mod + "/internal/gobuild":   {"decide what a binary is stamped with"},
	mod + "/internal/jsonscan":  {"modify", "grow into a general JSON"},
	mod + "/outbox":             {"decide when to deliver"},
	mod + "/sinks":              {"filter or buffer on disk"},
	mod + "/sinks/nats":         {"filter or buffer on disk"},
}

// imported is the phrase of a rule about who imports a package.
const imported = "be imported"

type pkg struct {
	ImportPath, Dir string
	GoFiles         []string
	Imports, Deps   []string
	Standard        bool
}

func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// mustNot are the "must not" clauses of a package doc: from each "must
// not" to the end of its sentence, each item of a list ("must not: - a;
// - b.") on its own, and without the reason that may follow a colon or a
// semicolon, whose words are not the rule's.
var sentenceEnd = regexp.MustCompile(`\.(\s|$)`)

func mustNot(doc string) []string {
	doc = strings.Join(strings.Fields(doc), " ")
	var out []string
	for {
		i := strings.Index(doc, "must not")
		if i < 0 {
			return out
		}
		rest := doc[i+len("must not"):]
		end := len(rest)
		if m := sentenceEnd.FindStringIndex(rest); m != nil {
			end = m[0]
		}
		// A second "must not" in the sentence is its own clause.
		if j := strings.Index(rest[:end], "must not"); j >= 0 {
			end = j
		}
		clause := strings.TrimSpace(rest[:end])
		items := []string{clause}
		if list, ok := strings.CutPrefix(clause, ":"); ok {
			items = strings.Split(list, " - ")
		}
		for _, item := range items {
			item, _, _ = strings.Cut(item, ": ")
			item, _, _ = strings.Cut(item, "; ")
			if item = strings.Trim(item, " ;,"); item != "" {
				out = append(out, item)
			}
		}
		doc = rest[end:]
	}
}

func contains(clause, phrase string) bool {
	re := regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(phrase) + `\b`)
	return re.MatchString(clause)
}

// packageDoc is the doc comment of the package in dir.
func packageDoc(t *testing.T, p pkg) string {
	t.Helper()
	fset := token.NewFileSet()
	var doc []string
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			doc = append(doc, f.Doc.Text())
		}
	}
	return strings.Join(doc, "\n")
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	goCmd := testkit.RequireCommand(t, "go")
	cmd := exec.Command(goCmd, "list", "-json=ImportPath,Dir,GoFiles,Imports,Deps,Standard", "./...")
	cmd.Dir = testkit.ModuleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 30 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

// TestDocsRulesHold reads every package doc's "must not" clauses and holds
// each one about dependencies against the package's dependencies; a clause
// about behaviour must be listed in behavioural.
func TestDocsRulesHold(t *testing.T) {
	pkgs := listPackages(t)
	checked := 0
	for _, p := range pkgs {
		for _, clause := range mustNot(packageDoc(t, p)) {
			matched := false
			for _, r := range rules {
				if !contains(clause, r.phrase) {
					continue
				}
				matched = true
				checked++
				for _, dep := range append(p.Deps, p.ImportPath) {
					if dep != p.ImportPath && r.forbids(dep) {
						t.Errorf("%s depends on %s, but its doc says it must not %s", p.ImportPath, dep, clause)
					}
				}
			}
			if contains(clause, imported) {
				matched = true
				checked++
				for _, q := range pkgs {
					if slices.Contains(q.Imports, p.ImportPath) {
						t.Errorf("%s imports %s, whose doc says it must not %s", q.ImportPath, p.ImportPath, clause)
					}
				}
			}
			if matched {
				continue
			}
			known := false
			for _, words := range behavioural[p.ImportPath] {
				known = known || strings.Contains(clause, words)
			}
			if !known {
				t.Errorf("%s: its doc says it must not %q: name what that forbids importing in this test's rules, or list it as behavioural", p.ImportPath, clause)
			}
		}
	}
	t.Logf("%d dependency rules checked", checked)
	if checked < 14 {
		t.Errorf("only %d dependency rules found in the package docs", checked)
	}
}

// TestRulesCatchABreach: a rule forbids what it names, so that a phrase
// whose check matches nothing is not mistaken for a rule that holds.
func TestRulesCatchABreach(t *testing.T) {
	breaches := map[string]string{
		"adapters": mod + "/adapters/chef", "sinks": mod + "/sinks/mqtt", "routes": mod + "/router",
		"router": mod + "/router", "import the store": mod + "/configdb", "or a store": "modernc.org/sqlite",
		"the firehose packages": mod + "/broker", "HTTP": "net/http",
		"authentication": mod + "/internal/credentials", "the bus": mod + "/bus",
		"a broker": "github.com/mochi-mqtt/server/v2", "the MQTT bus": mod + "/broker",
		"mochi": "github.com/mochi-mqtt/server/v2/packets", "paho": "github.com/eclipse/paho.mqtt.golang",
		"a NATS client": "github.com/nats-io/nats.go/jetstream", "payloads": mod + "/payloads/chef", "sources of messages": mod + "/adapters/gerrit",
		"outside the standard library": "github.com/rs/zerolog", "anything of the bridge's": mod + "/topics",
		"any particular configuration": mod + "/broker",
	}
	for _, r := range rules {
		dep, ok := breaches[r.phrase]
		if !ok || !r.forbids(dep) {
			t.Errorf("rule %q does not forbid %q", r.phrase, dep)
		}
		if r.forbids("strings") && r.phrase != "HTTP" {
			t.Errorf("rule %q forbids the standard library's strings", r.phrase)
		}
	}
	got := mustNot("It must not import the adapters: they are big. It must not:\n  - do I/O;\n  - log; ever.\nIt must not be a store, must not be slow")
	if want := []string{"import the adapters", "do I/O", "log", "be a store", "be slow"}; !slices.Equal(got, want) {
		t.Errorf("clauses %q", got)
	}
}
