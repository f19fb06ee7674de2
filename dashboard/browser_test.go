package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/dashboard/dashboardtest"
	"github.com/opsfirehose/firehose/internal/testkit"
)

var writeDocs = flag.Bool("docs", false, "also write each view's screenshot to docs/ (the README shows them)")

// views are the page's views, each opened in a tab of its own so that all
// of them are live when something is posted.
var views = []string{"fleet", "ansible", "stream", "changes", "health"}

// TestDashboardInBrowser opens every view of the page in Debian's Chromium
// against a bridge holding a realistic fleet, posts a failing Chef converge
// and runs a real ansible-playbook with the callback plugin, and checks that
// each view shows them, logging how long after their POST (a test asserts
// no timing: BenchmarkDashboardShowsPost measures that delay against the
// page's one-second target). It saves a screenshot of each view as a test
// artifact ($FIREHOSE_TEST_ARTIFACTS, else a temporary directory it logs),
// and with -docs into docs/ as well.
func TestDashboardInBrowser(t *testing.T) {
	testkit.RequireCommand(t, "ansible-playbook")
	base, tabs := openViews(t)

	// A failing Chef converge, as chef-client posts it.
	const org, node = "payments", "db-fra1-042.prod.example.net"
	converge := failingConverge(t, org, node)
	posted := time.Now()
	if code, body := post(t, base+"/data-collector/v0/", "application/json", converge); code != http.StatusOK {
		t.Fatalf("chef converge: %d %s", code, body)
	}
	showsPost(t, tabs["fleet"], "the failed node's row", posted,
		fmt.Sprintf(`.frow[data-node=%q][data-status="failure"]`, org+"/"+node))
	showsPost(t, tabs["stream"], "the run failure message", posted,
		fmt.Sprintf(`.msg-row[data-topic=%q]`, "chef/"+org+"/"+node+"/run/failure"))

	// A real ansible-playbook with our callback plugin, posting through a
	// proxy that notes when the failed task's event was posted.
	failedPosted := runPlaybook(t, base)
	showsPost(t, tabs["ansible"], "the failed task with its message", failedPosted,
		`.failed-task[data-failed-task="dash-web-03|validate nginx config"]`)
	// Read in one evaluation: the view redraws its rows on every refresh, so
	// a node found by one call (chromedp.Text) may be gone by the next.
	var msg string
	testkit.Eventually(t, func() bool {
		tctx, cancel := context.WithTimeout(tabs["ansible"], testkit.WaitTimeout)
		defer cancel()
		var err error
		msg, err = chromedp.Run(tctx, chromedp.Evaluate[string](
			`document.querySelector('.failed-task[data-failed-task="dash-web-03|validate nginx config"] .msg')?.textContent ?? ""`))
		return err == nil && msg != ""
	}, "the failed task's message")
	if !strings.Contains(msg, `unknown directive "servr_name"`) {
		t.Errorf("the failed task's message: %q", msg)
	}
	showsPost(t, tabs["stream"], "the failed task's message", failedPosted, `.msg-row[data-topic$="/task/dash-web-03/FAILED"]`)
	run(t, tabs["ansible"], "the play's final status", chromedp.WaitVisible(`.play[data-status="FAILED"] tr[data-host="dash-web-03"]`))

	// A Gerrit review comment, for the Changes view.
	comment, err := os.ReadFile("../adapters/gerrit/testdata/comment_added_gerrit2/input.json")
	if err != nil {
		t.Fatal(err)
	}
	posted = time.Now()
	if code, body := post(t, base+"/gerrit/v1/events", "application/json", comment); code != http.StatusOK {
		t.Fatalf("gerrit: %d %s", code, body)
	}
	showsPost(t, tabs["changes"], "the review comment", posted, `.change[data-change-topic="gerrit/openstack/octavia/comment-added"]`)

	// Health polls every two seconds: it must count the converge, with no
	// one-second promise.
	run(t, tabs["health"], "the intake counted in Health", chromedp.Poll[chromedp.Void](
		`[...document.querySelectorAll("#health-requests td.mono")].some(td => td.textContent.startsWith("POST /data-collector"))`,
		chromedp.WithPollingTimeout(testkit.WaitTimeout)))

	// Something to read in the Stream view's detail pane.
	run(t, tabs["stream"], "open a message", chromedp.Steps(
		chromedp.Click(fmt.Sprintf(`.msg-row[data-topic=%q]`, "chef/"+org+"/"+node+"/run/failure")),
		chromedp.WaitVisible(`#stream-detail pre`),
	))
	screenshots(t, tabs)
}

// openViews starts a bridge holding a realistic fleet (seed) and opens each
// view of its page in Chromium, in a tab of its own so that all of them are
// live when something is posted. It returns the bridge's URL and the tabs,
// once the live views' streams are open, and closes them when t ends.
func openViews(t testing.TB) (base string, tabs map[string]context.Context) {
	t.Helper()
	testkit.RequireCommand(t, "chromium")
	b := startBridge(t)
	base = "http://" + b.HTTPAddr()
	seed(t, b, base)
	browser, closeBrowser, err := dashboardtest.Browser(context.Background(), t.TempDir(), 1440, 900)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeBrowser) // after the tabs, which close first
	tabs = map[string]context.Context{}
	for _, v := range views {
		tab, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		if err := chromedp.Do(tab); err != nil { // opens the tab, for as long as tab lives
			t.Fatal(err)
		}
		tabs[v] = tab
		ready := map[string]string{
			"fleet": ".frow", "ansible": ".play", "stream": `#conn[data-state="live"]`, "changes": ".change", "health": `[data-metric="messages in"]`,
		}[v]
		run(t, tab, "open "+v, chromedp.Steps(
			chromedp.Navigate(base+"/#"+v),
			chromedp.WaitVisible(ready),
		))
	}
	testkit.Eventually(t, func() bool {
		var h struct{ Dashboard struct{ Streams float64 } }
		getJSON(t, base+"/api/v1/health", &h)
		return h.Dashboard.Streams >= 4
	}, "the four live views' streams")
	return base, tabs
}

// showsPost waits for the element sel in the tab, and logs how long after
// posted the page drew it.
func showsPost(t *testing.T, tab context.Context, what string, posted time.Time, sel string) {
	t.Helper()
	t.Logf("%s shown %v after its POST", what, shown(t, tab, what, posted, sel).Round(time.Millisecond))
}

// shown waits (with the tests' deadline) for the element sel in the tab and
// returns how long after posted the page drew it, by the page's own clock
// (data-seen, Date.now() when it first drew it).
func shown(t testing.TB, tab context.Context, what string, posted time.Time, sel string) time.Duration {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? Number(e.dataset.seen) : 0; })()`, sel)
	ctx, cancel := context.WithTimeout(tab, testkit.WaitTimeout+5*time.Second)
	defer cancel()
	seen, err := chromedp.Run(ctx, chromedp.Poll[float64](expr, chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(testkit.WaitTimeout)))
	if err != nil {
		t.Fatalf("%s (%s) never appeared: %v", what, sel, err)
	}
	return time.UnixMilli(int64(seen)).Sub(posted)
}

func run(t testing.TB, tab context.Context, what string, a chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, testkit.WaitTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, a); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshots saves each view's screenshot as an artifact, and in docs/ with -docs.
func screenshots(t *testing.T, tabs map[string]context.Context) {
	for _, v := range views {
		png := screenshot(t, tabs[v], v)
		if *writeDocs {
			if err := os.WriteFile(filepath.Join("..", "docs", "dashboard-"+v+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("screenshots in %s", artifacts(t))
}

// artifacts is the directory of the dashboard's screenshots:
// $FIREHOSE_TEST_ARTIFACTS/dashboard, else one in the temporary directory.
func artifacts(t testing.TB) string {
	dir := os.Getenv("FIREHOSE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "firehose-artifacts")
	}
	dir = filepath.Join(dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the tab's screenshot as the artifact dashboard-<name>.png
// and returns it.
func screenshot(t testing.TB, tab context.Context, name string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, testkit.WaitTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot of %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(artifacts(t), "dashboard-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	return png
}

func startBridge(t testing.TB) *app.Bridge { return startBridgeIn(t, t.TempDir()) }

// seed gives the bridge what a real bus holds after a while: the retained
// status of 400 nodes (one in twelve failed), several plays through the
// Ansible intake, and changes through the Gerrit, Launchpad, subunit and
// ConfigDB endpoints.
func seed(t testing.TB, b *app.Bridge, base string) {
	t.Helper()
	statuses := dashboardtest.Statuses(400, 1, 12, time.Now())
	if err := b.Publisher().Publish(context.Background(), statuses...); err != nil {
		t.Fatal(err)
	}
	web := []string{"web-fra1-001", "web-fra1-002", "web-fra1-003", "web-ams2-001", "web-ams2-002", "web-iad1-001"}
	dbs := []string{"db-fra1-001", "db-fra1-002", "db-ams2-001"}
	plays := [][]map[string]any{
		dashboardtest.Play("6f1c2b3a-0d4e-4f5a-9b8c-7d6e5f4a3b2c", "kernel security updates", "ctl01", append(append([]string{}, web...), dbs...),
			[]string{"Gathering Facts", "apt update", "upgrade linux-image", "reboot if required", "wait for ssh"}, "", "", "", true),
		dashboardtest.Play("a2b3c4d5-e6f7-4a8b-9c0d-1e2f3a4b5c6d", "mysql replica rebuild", "ctl02", dbs,
			[]string{"Gathering Facts", "stop replication", "restore snapshot", "start replication"}, "db-ams2-001", "restore snapshot",
			"rsync: [receiver] write failed on \"/var/lib/mysql/ibdata1\": No space left on device (28)", true),
		dashboardtest.Play("0c9d8e7f-6a5b-4c3d-8e1f-2a3b4c5d6e7f", "haproxy certificate rotation", "ctl01", []string{"lb-fra1-001", "lb-fra1-002", "lb-ams2-001"},
			[]string{"Gathering Facts", "install certificate", "reload haproxy"}, "", "", "", false),
	}
	for _, evs := range plays {
		body, _ := json.Marshal(evs)
		if code, resp := post(t, base+"/ansible/v1/events", "application/json", body); code != http.StatusOK {
			t.Fatalf("ansible events: %d %s", code, resp)
		}
	}
	for _, f := range []struct{ path, file, ctype string }{
		{"/gerrit/v1/events", "../adapters/gerrit/testdata/patchset_created/input.json", "application/json"},
		{"/gerrit/v1/events", "../adapters/gerrit/testdata/ref_updated/input.json", "application/json"},
		{"/launchpad/v1/events", "../adapters/launchpad/testdata/bug_new/input.eml", "message/rfc822"},
		{"/subunit/v1/events", "../adapters/subunit/testdata/json_success/input.json", "application/json"},
		{"/subunit/v1/events", "../adapters/subunit/testdata/json_failure_string_change/input.json", "application/json"},
	} {
		body, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		if code, resp := post(t, base+f.path, f.ctype, body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", f.file, code, resp)
		}
	}
	cfgAPI := base + "/api/v1/config"
	for _, c := range []struct{ method, url, body string }{
		{"POST", cfgAPI + "/components", `{"name":"fuel-lcm","resource_definitions":[{"name":"astute","content":{}},{"name":"globals","content":{}}]}`},
		{"POST", cfgAPI + "/environments", `{"id":1,"components":["fuel-lcm"],"hierarchy_levels":["nodes"]}`},
		{"PUT", cfgAPI + "/environments/1/nodes/node-1.domain.tld/resources/astute/values", `{"deployment_id":1,"role":"primary-controller","debug":false}`},
		{"PUT", cfgAPI + "/environments/1/resources/globals/values", `{"ntp_servers":["0.pool.ntp.org","1.pool.ntp.org"],"dns_nameservers":["10.0.0.2"]}`},
	} {
		req, _ := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d", c.method, c.url, resp.StatusCode)
		}
	}
	// Everything seeded is aggregated before a tab opens.
	testkit.Eventually(t, func() bool {
		var f struct{ Total int }
		var a struct{ Plays []any }
		var c struct{ Changes []any }
		getJSON(t, base+"/api/v1/fleet?limit=1", &f)
		getJSON(t, base+"/api/v1/ansible", &a)
		getJSON(t, base+"/api/v1/changes", &c)
		return f.Total == len(statuses) && len(a.Plays) == len(plays) && len(c.Changes) >= 9
	}, "the seeded fleet, plays and changes in the dashboard's snapshots")
}

// failingConverge is the shared Chef fixture of a failed policyfile run,
// made the run of node in org that just ended.
func failingConverge(t testing.TB, org, node string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../adapters/chef/testdata/03_run_converge_failure_chef15_policyfile_macos/input.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%08x-1111-4222-8333-%012x", rand.Uint32(), rand.Uint64()&(1<<48-1))
	now := time.Now().UTC()
	m["node_name"], m["organization_name"], m["run_id"], m["id"] = node, org, id, id
	m["start_time"], m["end_time"] = now.Add(-19*time.Second).Format(time.RFC3339), now.Format(time.RFC3339)
	m["policy_name"], m["policy_group"] = "mysql", "prod"
	body, _ := json.Marshal(m)
	return body
}

// runPlaybook runs testdata/playbook with the firehose callback plugin
// pointed at a proxy in front of the bridge, and returns when the event of
// the failed task was posted (when the proxy received its request).
func runPlaybook(t *testing.T, base string) time.Time {
	t.Helper()
	var (
		mu     sync.Mutex
		failed time.Time
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"ansible_host": "dash-web-03"`)) || bytes.Contains(body, []byte(`"ansible_host":"dash-web-03"`)) {
			if bytes.Contains(body, []byte(`"FAILED"`)) {
				mu.Lock()
				if failed.IsZero() {
					failed = arrived
				}
				mu.Unlock()
			}
		}
		req, _ := http.NewRequest(r.Method, base+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)

	plugins, err := filepath.Abs("../adapters/ansible/callback_plugins")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ansible-playbook", "-i", "inventory.yml", "site.yml")
	cmd.Dir = "testdata/playbook"
	cmd.Env = append(os.Environ(),
		"ANSIBLE_CALLBACK_PLUGINS="+plugins, "ANSIBLE_CALLBACKS_ENABLED=firehose", "FIREHOSE_URL="+proxy.URL,
		"ANSIBLE_LOCAL_TEMP="+t.TempDir(), "ANSIBLE_HOME="+t.TempDir(), "ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "dash-web-03") {
		t.Fatalf("the playbook should fail on dash-web-03: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed.IsZero() {
		t.Fatalf("the plugin never posted dash-web-03's failed task:\n%s", out)
	}
	return failed
}

func post(t testing.TB, url, ctype string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
