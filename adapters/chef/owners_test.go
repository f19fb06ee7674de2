package chef

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// writeLock writes a lock file in the RFC's shape: name, cookbook_locks,
// included_policy_locks.
func writeLock(t *testing.T, dir, file, name string, cookbooks []string, includes ...string) {
	t.Helper()
	var locks, incs []string
	for _, c := range cookbooks {
		locks = append(locks, `"`+c+`": {"version": "1.0.0", "identifier": "abc", "source_options": {"version": "1.0.0"}}`)
	}
	for _, i := range includes {
		incs = append(incs, `{"name": "`+i+`", "revision_id": "r", "source_options": {"path": "./`+i+`.lock.json"}}`)
	}
	body := `{"revision_id": "x", "name": "` + name + `", "run_list": [], "included_policy_locks": [` + strings.Join(incs, ",") +
		`], "cookbook_locks": {` + strings.Join(locks, ",") + `}, "default_attributes": {}, "override_attributes": {}}`
	replaceFile(t, filepath.Join(dir, file), body)
}

// replaceFile writes path whole, by a rename, so that a reload polling the
// directory never reads it half written: os.WriteFile truncates first, and
// a reload that reads the empty file counts one more refused reload than
// the test means to cause.
func replaceFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".writing")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ownersFrom decodes an owners section without validating it: decoding a
// config validates it, and these tests want New's answer.
func ownersFrom(t *testing.T, y string) Owners {
	t.Helper()
	type unchecked Owners // no Validate method
	var o unchecked
	if err := strictyaml.Decode([]byte(y), &o, strictyaml.Options{}); err != nil {
		t.Fatal(err)
	}
	return Owners(o)
}

func newTestOwners(t *testing.T, o Owners) (*owners, error) {
	t.Helper()
	return newOwners(o, zerolog.Nop(), prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"result"}))
}

// The RFC's example: the DBA team owns MySQL, monitoring owns collectd
// wherever it runs, and core owns ntp and rsyslog through the base policy
// that the app team's policy includes, beside the DBA team's database
// policy.
func TestOwnersRFCExample(t *testing.T) {
	dir := t.TempDir()
	writeLock(t, dir, "base.lock.json", "base", []string{"base", "ntp", "rsyslog", "collectd"})
	writeLock(t, dir, "database.lock.json", "database", []string{"mysql", "mysql-client", "openssl"})
	writeLock(t, dir, "myapp.lock.json", "myapp",
		[]string{"myapp", "nginx", "base", "ntp", "rsyslog", "collectd", "mysql", "mysql-client", "openssl"}, "base", "database")
	o, err := newTestOwners(t, ownersFrom(t, `
teams:
  dba: {cookbooks: [mysql, "mysql-*"], policies: [database]}
  monitoring: {cookbooks: [collectd]}
  core: {policies: [base]}
  app: {policies: [myapp]}
policy_locks: `+dir+`
`))
	if err != nil {
		t.Fatal(err)
	}
	for cookbook, team := range map[string]string{
		"mysql": "dba", "mysql-client": "dba", "mysql-server": "dba", "openssl": "dba",
		// base locks collectd, but monitoring names it: a name wins.
		"collectd": "monitoring",
		"ntp":      "core", "rsyslog": "core", "base": "core",
		// myapp's own: not what it includes.
		"myapp": "app", "nginx": "app",
		"apache2": "",
	} {
		if got := o.owner(cookbook); got != team {
			t.Errorf("%s is owned by %q, want %q", cookbook, got, team)
		}
	}
}

// A cookbook two teams claim is a config error that names both, however
// each claims it; and a policy must have its lock.
func TestOwnerConflicts(t *testing.T) {
	dir := t.TempDir()
	writeLock(t, dir, "base.lock.json", "base", []string{"ntp", "users"})
	writeLock(t, dir, "app.lock.json", "app", []string{"app", "ntp", "users"}, "base")
	writeLock(t, dir, "orphan.lock.json", "orphan", []string{"orphan", "x"}, "missing")
	writeLock(t, dir, "ops.lock.json", "ops", []string{"users", "monit"})
	tests := []struct {
		name, teams string
		want        []string // substrings of the error; none: no error
	}{
		{"names", `{dba: {cookbooks: [mysql]}, core: {cookbooks: [mysql]}}`,
			[]string{`cookbook "mysql" is owned by two teams: core (cookbooks[0] "mysql") and dba (cookbooks[0] "mysql")`}},
		{"a pattern reaching another team's name", `{dba: {cookbooks: ["mysql-*"]}, core: {cookbooks: [ntp, mysql-client]}}`,
			[]string{`cookbook "mysql-client" is owned by two teams: core`, `dba (cookbooks[0] "mysql-*")`}},
		{"two patterns that meet", `{dba: {cookbooks: ["mysql*"]}, web: {cookbooks: ["my*-client"]}}`,
			[]string{`a cookbook could be owned by two teams: dba (cookbooks[0] "mysql*") and web (cookbooks[0] "my*-client")`}},
		{"patterns that do not meet", `{dba: {cookbooks: ["mysql-*"]}, mon: {cookbooks: ["collectd*", "?sql"]}}`, nil},
		{"two policies locking one cookbook as their own", `{core: {policies: [base]}, ops: {policies: [ops]}}`,
			[]string{`cookbook "users" is owned by two teams: core (policy "base", base.lock.json) and ops (policy "ops", ops.lock.json)`}},
		{"a name beside another team's policy is no conflict: the name wins", `{dba: {cookbooks: [ntp, "u*"]}, core: {policies: [base]}}`, nil},
		{"an including policy does not own its includes' cookbooks", `{core: {policies: [base]}, app: {policies: [app]}}`, nil},
		{"a policy without a lock", `{core: {policies: [bse]}}`, []string{`core: policies[0]: no lock file names policy "bse"`}},
		{"an include without a lock", `{x: {policies: [orphan]}}`,
			[]string{`policy "orphan" includes "missing", whose lock file is not in policy_locks`}},
	}
	for _, tt := range tests {
		_, err := newTestOwners(t, ownersFrom(t, "teams: "+tt.teams+"\npolicy_locks: "+dir+"\n"))
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to say %q", tt.name, err, w)
			}
		}
	}

	// Conflicts that need no lock file are reported by the config check.
	o := ownersFrom(t, `{teams: {dba: {cookbooks: [mysql, "a[b]"]}, core: {cookbooks: [mysql], policies: [base]}, idle: {}}}`)
	err := o.Validate()
	for _, w := range []string{`teams: cookbook "mysql" is owned by two teams`, "teams.dba.cookbooks[1]", "teams.idle: owns nothing", "policy_locks: required"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate: %v, want it to say %q", err, w)
		}
	}
}

func TestLockFileProblems(t *testing.T) {
	dir := t.TempDir()
	writeLock(t, dir, "a.lock.json", "base", []string{"ntp"})
	writeLock(t, dir, "b.lock.json", "base", []string{"ntp"})
	if err := os.WriteFile(filepath.Join(dir, "c.lock.json"), []byte(`{"name": `), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := newTestOwners(t, ownersFrom(t, "teams: {core: {policies: [base]}}\npolicy_locks: "+dir+"\n"))
	for _, w := range []string{"a.lock.json and " + filepath.Join(dir, "b.lock.json") + ` both lock policy "base"`, "c.lock.json: not a Policyfile lock"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v, want it to say %q", err, w)
		}
	}
	_, err = newTestOwners(t, ownersFrom(t, "teams: {core: {policies: [base]}}\npolicy_locks: "+filepath.Join(dir, "nope")+"\n"))
	if err == nil || !strings.Contains(err.Error(), "policy_locks") {
		t.Errorf("a missing directory: %v", err)
	}
}

// The lock files are read again when they change; a broken change keeps the
// previous ownership.
func TestOwnersReload(t *testing.T) {
	dir := t.TempDir()
	writeLock(t, dir, "base.lock.json", "base", []string{"ntp"})
	cfg := ownersFrom(t, "teams: {core: {policies: [base]}, dba: {cookbooks: [mysql]}}\nreload_interval: 10ms\npolicy_locks: "+dir+"\n")
	o, err := newTestOwners(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.owner("ntp") != "core" || o.owner("chrony") != "" {
		t.Fatal("initial ownership")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); o.run(ctx) }()
	defer func() { cancel(); <-done }()

	// base now locks chrony instead of ntp. The size changes, so the
	// change is seen even where modification times are coarse.
	writeLock(t, dir, "base.lock.json", "base", []string{"chrony", "tzdata"})
	testkit.Eventually(t, func() bool { return o.owner("chrony") == "core" }, "the new lock to be read")
	if o.owner("ntp") != "" {
		t.Error("ntp is still owned")
	}
	// A lock file half written: the ownership stays as it was.
	refused := testutil.ToFloat64(o.reloads.WithLabelValues("error"))
	replaceFile(t, filepath.Join(dir, "base.lock.json"), `{"name": "base", "cookbook_locks": {`)
	testkit.Eventually(t, func() bool {
		return testutil.ToFloat64(o.reloads.WithLabelValues("error")) == refused+1
	}, "the broken lock to be refused")
	if o.owner("chrony") != "core" || o.owner("mysql") != "dba" {
		t.Errorf("a refused reload changed the ownership: chrony %q, mysql %q", o.owner("chrony"), o.owner("mysql"))
	}
	// Fixed, with mysql too: dba names it, so it stays dba's.
	writeLock(t, dir, "base.lock.json", "base", []string{"chrony", "mysql", "ntp"})
	testkit.Eventually(t, func() bool { return o.owner("ntp") == "core" }, "the fixed lock to be read")
	if o.owner("mysql") != "dba" {
		t.Errorf("mysql is %q's", o.owner("mysql"))
	}
}

// A lock file that is finished while a reload reads it half written is read
// again at the next look, not taken as read: the fingerprint the next look
// compares with is the one from before the read.
func TestOwnersRereadAFileFinishedDuringTheRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "base.lock.json")
	writeLock(t, dir, "base.lock.json", "base", []string{"ntp"})
	o, err := newTestOwners(t, ownersFrom(t, "teams: {core: {policies: [base]}}\npolicy_locks: "+dir+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, path, `{"name": "base", "cookbook_locks": {`)
	o.readLocks = func(dir string) (map[string]*policyLock, error) {
		locks, err := readLocks(dir)
		if err != nil { // the half-written file was read; now its writer finishes
			writeLock(t, dir, "base.lock.json", "base", []string{"chrony"})
		}
		return locks, err
	}
	o.reload()
	if got := testutil.ToFloat64(o.reloads.WithLabelValues("error")); got != 1 || o.owner("ntp") != "core" {
		t.Fatalf("the half-written file: %v refused reloads, ntp owned by %q; want 1 and core", got, o.owner("ntp"))
	}
	o.reload()
	if o.owner("chrony") != "core" {
		t.Errorf("the file finished during the read was never read again: chrony owned by %q", o.owner("chrony"))
	}
}

// A lock directory that goes missing is one refused reload, logged once,
// however many looks find it missing; the ownership stays.
func TestOwnersMissingDirectoryIsReportedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeLock(t, dir, "base.lock.json", "base", []string{"ntp"})
	o, err := newTestOwners(t, ownersFrom(t, "teams: {core: {policies: [base]}}\npolicy_locks: "+dir+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		o.reload()
	}
	if got := testutil.ToFloat64(o.reloads.WithLabelValues("error")); got != 1 || o.owner("ntp") != "core" {
		t.Errorf("a missing directory looked at 3 times: %v refused reloads, ntp owned by %q; want 1 and core", got, o.owner("ntp"))
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"mysql", "mysql", true}, {"mysql", "mysql2", false}, {"mysql-*", "mysql-", true}, {"mysql-*", "mysql-client", true},
		{"mysql-*", "mysql", false}, {"*", "", true}, {"?", "", false}, {"?sql", "msql", true}, {"*-*", "a-b-c", true},
		{"a*b*c", "abc", true}, {"a*b*c", "acb", false}, {"*sql", "mysql", true}, {"my*ql", "myql", true}, {"é*", "été", true},
	}
	for _, tt := range tests {
		if got := globMatch(tt.pattern, tt.name); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v", tt.pattern, tt.name, got)
		}
	}
}

// globsOverlap agrees with trying every name up to four characters over the
// patterns' alphabet.
func FuzzGlobsOverlap(f *testing.F) {
	f.Add("mysql*", "my*-client")
	f.Add("a*", "*b")
	f.Add("a?c", "?b?")
	f.Fuzz(func(t *testing.T, a, b string) {
		// A name matching both, if any, has at most the patterns' other
		// characters together: 8 here.
		if len([]rune(a)) > 4 || len([]rune(b)) > 4 {
			return
		}
		alphabet := map[rune]bool{'z': true}
		for _, r := range a + b {
			if r != '*' && r != '?' {
				alphabet[r] = true
			}
		}
		if len(alphabet) > 4 {
			return
		}
		var letters []rune
		for r := range alphabet {
			letters = append(letters, r)
		}
		found := false
		var try func(prefix []rune)
		try = func(prefix []rune) {
			if found {
				return
			}
			if globMatch(a, string(prefix)) && globMatch(b, string(prefix)) {
				found = true
				return
			}
			if len(prefix) == 8 {
				return
			}
			for _, r := range letters {
				try(append(prefix, r))
			}
		}
		try(nil)
		if got := globsOverlap(a, b); got != found {
			t.Fatalf("globsOverlap(%q, %q) = %v; a name matching both exists: %v", a, b, got, found)
		}
	})
}
