package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/opsfirehose/firehose/dashboard/dashboardtest"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestEmptyStatesSayWhatToSend opens the Fleet, Ansible and Stream views of
// a fresh bridge: each says what will appear there and how to send it, with
// this bridge's URL in the example (chef-client's data_collector lines, the
// Ansible collection's two settings, a curl to try); the Stream's goes once
// a message arrives, and the Fleet's once a node has reported.
func TestEmptyStatesSayWhatToSend(t *testing.T) {
	testkit.RequireCommand(t, "chromium")
	b := startBridge(t)
	base := "http://" + b.HTTPAddr()
	browser, closeBrowser, err := dashboardtest.Browser(context.Background(), t.TempDir(), 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeBrowser)
	want := map[string][]string{
		"fleet":   {"No Chef node has reported yet", `data_collector.server_url "` + base + `/data-collector/v0/"`, "data_collector.token"},
		"ansible": {"No play seen since the bridge started", "export ANSIBLE_CALLBACKS_ENABLED=opsfirehose.firehose.firehose", "export FIREHOSE_URL=" + base},
		"stream":  {"No message on the bus matches this filter yet", `curl -s -d '{"type":"comment-added","project":"demo"}' ` + base + "/gerrit/v1/events"},
	}
	tabs := map[string]context.Context{}
	for _, view := range []string{"fleet", "ansible", "stream"} {
		tab, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		tabs[view] = tab
		sel := "#" + view + "-empty"
		if err := chromedp.Do(tab); err != nil { // opens the tab, for as long as tab lives
			t.Fatal(err)
		}
		run(t, tab, "open "+view, chromedp.Steps(chromedp.Navigate(base+"/#"+view), chromedp.WaitVisible(sel)))
		text := visibleText(t, tab, sel)
		for _, w := range want[view] {
			if !strings.Contains(text, w) {
				t.Errorf("%s's empty state says %q; want it to say %q", view, text, w)
			}
		}
		screenshot(t, tab, "empty-"+view)
	}

	// The curl the Stream view suggests, run as it says.
	if code, body := post(t, base+"/gerrit/v1/events", "application/x-www-form-urlencoded", []byte(`{"type":"comment-added","project":"demo"}`)); code != http.StatusOK {
		t.Fatalf("the suggested curl: %d %s", code, body)
	}
	run(t, tabs["stream"], "the message, and no empty state", chromedp.Steps(
		chromedp.WaitVisible(`.msg-row[data-topic="gerrit/demo/comment-added"]`),
		chromedp.WaitNotVisible("#stream-empty"),
	))
	if err := b.Publisher().Publish(context.Background(), dashboardtest.Statuses(1, 1, 12, time.Now())...); err != nil {
		t.Fatal(err)
	}
	run(t, tabs["fleet"], "the node, and no empty state", chromedp.Steps(
		chromedp.WaitVisible(".frow"),
		chromedp.WaitNotVisible("#fleet-empty"),
	))
}

// visibleText is the element's text as shown (innerText), or fails the test.
func visibleText(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, testkit.WaitTimeout)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).innerText`, sel)))
	if err != nil {
		t.Fatalf("%s: %v", sel, err)
	}
	return text
}
