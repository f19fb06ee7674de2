package deploy

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestAlertRules(t *testing.T) {
	testkit.RequireCommand(t, "promtool")
	run(t, "prometheus", "promtool", "check", "rules", "alerts.yml")
	// The unit tests fire alerts on made-up series and check their text.
	run(t, "prometheus", "promtool", "test", "rules", "alerts_test.yml")
}

// metricNames are the firehose metrics the Go code defines (every name is
// a string literal in a non-test file), with the series a histogram adds.
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	lit := regexp.MustCompile(`"(firehose_[a-z0-9_]+)"`)
	root := testkit.ModuleRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestDashboardsUseRealMetrics: a renamed or removed metric must not leave
// an alert that never fires or a panel that stays empty.
func TestDashboardsUseRealMetrics(t *testing.T) {
	defined := metricNames(t)
	if !defined["firehose_build_info"] || !defined["firehose_route_messages_total"] {
		t.Fatalf("the metric scan found too little: %d names", len(defined))
	}
	used := regexp.MustCompile(`\bfirehose_[a-z0-9_]+`)
	for _, f := range []string{"prometheus/alerts.yml", "grafana/firehose.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, name := range used.FindAllString(string(b), -1) {
			if !defined[name] && !seen[name] {
				t.Errorf("%s uses %s, which no Go code defines", f, name)
			}
			seen[name] = true
		}
		if len(seen) < 5 {
			t.Errorf("%s uses only %d firehose metrics", f, len(seen))
		}
	}
}

func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/firehose.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID, Title string
		Templating struct{ List []struct{ Name string } }
		Panels     []struct {
			ID       int
			Type     string
			Title    string
			GridPos  struct{ H, W, X, Y int } `json:"gridPos"`
			Targets  []struct{ Expr string }
			Datasrc  struct{ UID string } `json:"datasource"`
			Children []json.RawMessage    `json:"panels"`
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) < 10 {
		t.Fatalf("uid %q title %q, %d panels", d.UID, d.Title, len(d.Panels))
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["instance"] {
		t.Errorf("templating variables %v, want datasource and instance", vars)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is wider than the grid", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || p.Datasrc.UID != "${datasource}" {
			t.Errorf("panel %q: %d targets, data source %q", p.Title, len(p.Targets), p.Datasrc.UID)
		}
		for _, tg := range p.Targets {
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") || !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q: expression %q", p.Title, tg.Expr)
			}
		}
	}
}

// TestSystemdUnits checks the units as systemd reads them, with ExecStart
// pointed at a program that exists here (CI's package test verifies them
// installed, with the real binary).
func TestSystemdUnits(t *testing.T) {
	testkit.RequireCommand(t, "systemd-analyze")
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"firehose.service", "firehose-broker.service"} {
		b, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		s := regexp.MustCompile(`(?m)^ExecStart=/usr/bin/\S+`).ReplaceAllString(string(b), "ExecStart=/bin/true")
		for _, want := range []string{"DynamicUser=yes", "StateDirectory=", "ProtectSystem=strict", "NoNewPrivileges=yes"} {
			if !strings.Contains(s, "\n"+want) {
				t.Errorf("%s lacks %s", name, want)
			}
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, path)
	}
	cmd := exec.Command("systemd-analyze", append([]string{"verify"}, units...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, u := range units {
		// An exposure of 2.5 or less on systemd's 0-10 scale.
		if out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=25", u).CombinedOutput(); err != nil {
			t.Errorf("%s is exposed above 2.5: %v\n%s", filepath.Base(u), err, out)
		}
	}
}

// TestPackageContents: every file the packages ship exists.
func TestPackageContents(t *testing.T) {
	b, err := os.ReadFile("packaging/nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root := testkit.ModuleRoot(t)
	src := regexp.MustCompile(`(?m)^\s+(?:- )?src: (\S+)|^\s+(?:postinstall|preremove|postremove): (\S+)`)
	var files []string
	for _, m := range src.FindAllStringSubmatch(string(b), -1) {
		f := m[1] + m[2]
		if strings.HasPrefix(f, "${BIN_DIR}") {
			continue
		}
		files = append(files, f)
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("nfpm.yaml ships %s: %v", f, err)
		}
	}
	sort.Strings(files)
	if len(files) < 8 {
		t.Fatalf("found only %v in nfpm.yaml", files)
	}
}
