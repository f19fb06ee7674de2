package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/dashboard/dashboardtest"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestAnsibleViewOutlivesARestart posts a play, restarts the bridge, and
// opens the Ansible view in Chromium: the play is there, failed host and
// message included, filled from the bus's history; and so are its messages
// in the Stream view and a Gerrit change in the Changes view.
func TestAnsibleViewOutlivesARestart(t *testing.T) {
	testkit.RequireCommand(t, "chromium")
	dir := t.TempDir()
	const play = "b7e6d5c4-b3a2-4190-8f7e-6d5c4b3a2918"
	first := startBridgeIn(t, dir)
	evs := dashboardtest.Play(play, "nginx rollout", "ctl01", []string{"web-01", "web-02"},
		[]string{"Gathering Facts", "template nginx.conf", "validate nginx config"}, "web-02", "validate nginx config",
		`nginx: [emerg] unknown directive "servr_name"`, true)
	body, _ := json.Marshal(evs)
	base := "http://" + first.HTTPAddr()
	if code, resp := post(t, base+"/ansible/v1/events", "application/json", body); code != http.StatusOK {
		t.Fatalf("ansible events: %d %s", code, resp)
	}
	comment, err := os.ReadFile("../adapters/gerrit/testdata/comment_added_gerrit2/input.json")
	if err != nil {
		t.Fatal(err)
	}
	if code, resp := post(t, base+"/gerrit/v1/events", "application/json", comment); code != http.StatusOK {
		t.Fatalf("gerrit: %d %s", code, resp)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := startBridgeIn(t, dir)
	base = "http://" + second.HTTPAddr()
	browser, closeBrowser, err := dashboardtest.Browser(context.Background(), t.TempDir(), 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeBrowser)
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	run(t, tab, "the Ansible view shows the play posted before the restart", chromedp.Steps(
		chromedp.Navigate(base+"/#ansible"),
		chromedp.WaitVisible(fmt.Sprintf(`.play[data-play=%q][data-status="FAILED"] tr[data-host="web-02"]`, play)),
		chromedp.WaitVisible(`.failed-task[data-failed-task="web-02|validate nginx config"]`),
	))
	stream, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	run(t, stream, "the Stream view shows the latest messages posted before the restart", chromedp.Steps(
		chromedp.Navigate(base+"/#stream"),
		chromedp.WaitVisible(`.msg-row[data-topic$="/task/web-02/FAILED"]`),
		chromedp.WaitVisible(`.msg-row[data-topic="gerrit/openstack/octavia/comment-added"]`),
	))
	changes, cancel := chromedp.NewContext(browser) // a page of its own: a new fragment is no new load
	t.Cleanup(cancel)
	run(t, changes, "the Changes view shows the comment posted before the restart", chromedp.Steps(
		chromedp.Navigate(base+"/#changes"),
		chromedp.WaitVisible(`.change[data-change-topic="gerrit/openstack/octavia/comment-added"]`),
	))
}

// startBridgeIn starts a bridge with its data in dir, on loopback ports.
func startBridgeIn(t testing.TB, dir string) *app.Bridge {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.Broker.Listeners = []broker.ListenerConfig{{Name: "mqtt", Type: broker.ListenerTCP, Address: "127.0.0.1:0"}}
	b, err := app.New(t.Context(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}
