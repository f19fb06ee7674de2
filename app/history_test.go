package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/bus"

	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// historyLine is one line of GET /api/v1/history.
type historyLine struct {
	ID      string          `json:"id"`
	Time    string          `json:"time"`
	Topic   string          `json:"topic"`
	Source  string          `json:"source"`
	Live    bool            `json:"live"`
	Payload json.RawMessage `json:"payload"`
	Text    *string         `json:"text"`
	Error   string          `json:"error"`
}

// getHistory reads GET /api/v1/history?query to its end.
func getHistory(t *testing.T, base, query string) []historyLine {
	t.Helper()
	code, body := testkit.Get(t, base+"/api/v1/history?"+query)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/history?%s: %d %s", query, code, body)
	}
	var out []historyLine
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l historyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("history line %q: %v", sc.Text(), err)
		}
		if l.Error != "" {
			t.Fatalf("history answered an error: %s", l.Error)
		}
		out = append(out, l)
	}
	return out
}

// fixtureTopics reads the topics an adapter's golden case publishes, in order.
func fixtureTopics(t *testing.T, dir string) []string {
	t.Helper()
	out, err := os.ReadFile(filepath.Join(dir, "output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		topics = append(topics, strings.SplitN(line, "\t", 2)[0])
	}
	return topics
}

func readFixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postFleetEvents posts a failed Chef run and an Ansible play that fails,
// and returns the topics they publish, in order.
func postFleetEvents(t *testing.T, b *Bridge) []string {
	t.Helper()
	base := "http://" + b.HTTPAddr()
	chefDir := "../adapters/chef/testdata/03_run_converge_failure_chef15_policyfile_macos"
	if code, answer := postAsChef(t, base+"/data-collector/v0/", readFixture(t, chefDir+"/input.json"), ""); code != http.StatusOK {
		t.Fatalf("chef POST: %d %v", code, answer)
	}
	want := fixtureTopics(t, chefDir)
	for _, c := range []string{"start", "task-ok", "finish-failed"} {
		dir := "../adapters/ansible/testdata/" + c
		resp, err := http.Post(base+"/ansible/v1/events", "application/json", strings.NewReader(string(readFixture(t, dir+"/input.json"))))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("ansible POST %s: %d", c, resp.StatusCode)
		}
		want = append(want, fixtureTopics(t, dir)...)
	}
	return want
}

func topicsOf(lines []historyLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Topic
	}
	return out
}

// historyConfig is testConfig with its data in dir, so that a second bridge
// finds the first one's history.
func historyConfig(t *testing.T, dir string) config.Config {
	cfg := testConfig(t)
	cfg.DataDir = dir
	cfg.Chef.Rollout.Enabled = false
	return cfg
}

// TestHistoryOutlivesARestart posts Chef and Ansible events, restarts the
// bridge, and reads them back from the history API in the order they were
// published, with their payloads and de-duplication ids.
func TestHistoryOutlivesARestart(t *testing.T) {
	dir := t.TempDir()
	first := startBridge(t, historyConfig(t, dir))
	want := postFleetEvents(t, first)
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := startBridge(t, historyConfig(t, dir))
	base := "http://" + second.HTTPAddr()
	got := getHistory(t, base, "since=1h")
	if strings.Join(topicsOf(got), "\n") != strings.Join(want, "\n") {
		t.Fatalf("history after a restart:\n%s\nwant:\n%s", strings.Join(topicsOf(got), "\n"), strings.Join(want, "\n"))
	}
	ids := map[string]bool{}
	for _, l := range got {
		if l.ID == "" || ids[l.ID] || len(l.Payload) == 0 || l.Source == "" {
			t.Fatalf("history line without a unique id, a payload or a source: %+v", l)
		}
		ids[l.ID] = true
	}
	// A filter with MQTT's wildcards means what it means on the bus.
	failed := getHistory(t, base, "filter=chef/%2B/%2B/run/failure&filter=ansible/playbook/%2B/action/finish/%23")
	if len(failed) != 2 || !strings.HasPrefix(failed[0].Topic, "chef/") || !strings.HasSuffix(failed[1].Topic, "/FAILED") {
		t.Fatalf("the failures: %v", topicsOf(failed))
	}
}

// TestHistoryReplayThenLiveHasNoGapAndNoDuplicate follows the history while
// a publisher goes on publishing numbered messages through the switch from
// replay to live: the follower sees each number once, in order.
func TestHistoryReplayThenLiveHasNoGapAndNoDuplicate(t *testing.T) {
	b := startBridge(t, historyConfig(t, t.TempDir()))
	base := "http://" + b.HTTPAddr()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var published atomic.Int64
	stopAt := atomic.Int64{}
	stopAt.Store(math.MaxInt64)
	pubDone := make(chan error, 1)
	go func() {
		for i := int64(0); ; i++ {
			if i >= stopAt.Load() {
				pubDone <- nil
				return
			}
			m := bus.NewMessage("test", fmt.Sprintf("n-%d", i), "test/seq", []byte(strconv.FormatInt(i, 10)), time.Now())
			if err := b.Publisher().Publish(ctx, m); err != nil {
				pubDone <- err
				return
			}
			published.Store(i + 1)
		}
	}()
	testkit.Eventually(t, func() bool { return published.Load() >= 300 }, "300 messages published")

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/history?filter=test/%23&follow=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	next, replayed, live := int64(0), 0, 0
	for sc.Scan() {
		var l historyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Error != "" {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if string(l.Payload) != strconv.FormatInt(next, 10) {
			t.Fatalf("after %d replayed and %d live messages, got message %s, want %d", replayed, live, l.Payload, next)
		}
		next++
		if !l.Live {
			replayed++
			continue
		}
		if live++; live == 1 {
			// Publishing goes on through the switch and past it.
			stopAt.Store(published.Load() + 300)
		}
		if next == stopAt.Load() {
			break
		}
	}
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	if replayed < 300 || live < 300 {
		t.Fatalf("%d replayed, %d live: the switch was not exercised", replayed, live)
	}
}
