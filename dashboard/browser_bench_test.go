package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/dashboard/dashboardtest"
)

// BenchmarkDashboardShowsPost measures the page's promise that each view
// draws what was posted within a second of the POST, in Debian's Chromium
// against the same bridge and fleet as TestDashboardInBrowser. Each round
// posts a failing Chef converge of a new node (drawn by Fleet and Stream),
// a running play with a failed task (Ansible) and a Gerrit review comment
// on a new project (Changes), and waits for each view to draw it. It
// reports the median delay per view, POST to drawn by the page's own clock,
// in milliseconds ("fleet-ms", ...), to compare with the 1000 ms target:
//
//	go test -run x -bench DashboardShowsPost -benchtime 20x ./dashboard/
func BenchmarkDashboardShowsPost(b *testing.B) {
	base, tabs := openViews(b)
	comment, err := os.ReadFile("../adapters/gerrit/testdata/comment_added_gerrit2/input.json")
	if err != nil {
		b.Fatal(err)
	}

	delays := map[string][]time.Duration{}
	drawn := func(view, what string, posted time.Time, sel string) {
		delays[view] = append(delays[view], shown(b, tabs[view], what, posted, sel))
	}
	postOK := func(path string, body []byte) time.Time {
		posted := time.Now()
		if code, resp := post(b, base+path, "application/json", body); code != http.StatusOK {
			b.Fatalf("POST %s: %d %s", path, code, resp)
		}
		return posted
	}
	round := 0
	for b.Loop() {
		round++
		const org = "payments"
		node := fmt.Sprintf("db-bench-%04d.prod.example.net", round)
		posted := postOK("/data-collector/v0/", failingConverge(b, org, node))
		drawn("fleet", "the failed node's row", posted, fmt.Sprintf(`.frow[data-node=%q][data-status="failure"]`, org+"/"+node))
		drawn("stream", "the run failure message", posted, fmt.Sprintf(`.msg-row[data-topic=%q]`, "chef/"+org+"/"+node+"/run/failure"))

		host := fmt.Sprintf("bench-web-%04d", round)
		play, _ := json.Marshal(dashboardtest.Play(fmt.Sprintf("b3c4d5e6-0000-4000-8000-%012x", round), "bench rollout", "ctl01",
			[]string{host, "bench-web-ok"}, []string{"Gathering Facts", "deploy"}, host, "deploy", "bench: deploy failed", false))
		drawn("ansible", "the failed task", postOK("/ansible/v1/events", play), fmt.Sprintf(`.failed-task[data-failed-task^=%q]`, host+"|"))

		var ev map[string]any
		if err := json.Unmarshal(comment, &ev); err != nil {
			b.Fatal(err)
		}
		project := fmt.Sprintf("openstack/bench-%04d", round)
		ev["change"].(map[string]any)["project"] = project
		body, _ := json.Marshal(ev)
		drawn("changes", "the review comment", postOK("/gerrit/v1/events", body), fmt.Sprintf(`.change[data-change-topic=%q]`, "gerrit/"+project+"/comment-added"))
	}
	b.ReportMetric(0, "ns/op") // a round's time is mostly waiting for the page: meaningless
	for view, ds := range delays {
		b.ReportMetric(medianMillis(ds), view+"-ms")
	}
}

// medianMillis is the median of ds, in milliseconds.
func medianMillis(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return float64(m) / float64(time.Millisecond)
}
