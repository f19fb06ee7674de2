package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testsubunit"
	"github.com/opsfirehose/firehose/payloads/subunit"
)

// procStatus reads a field of /proc/self/status, in KiB.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// peakRSSGrowth runs fn and returns how far the process's resident memory
// rose above where it was, at its peak (VmHWM, reset first through
// /proc/self/clear_refs): what `top` or a container's memory limit sees.
func peakRSSGrowth(t *testing.T, fn func()) int64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	base := procStatus(t, "VmRSS")
	fn()
	return (procStatus(t, "VmHWM") - base) << 10
}

// TestSubunitStreamInBoundedMemory: a 128 MiB subunit stream of unique
// tests that start and never finish is refused with a 413 that names
// max_running_tests, and the bridge's resident memory rises by far less
// than 256 MiB (before: about 12 times the stream, 1.5 GB). A 128 MiB stream
// of tests that finish is read whole, in bounded memory too.
func TestSubunitStreamInBoundedMemory(t *testing.T) {
	cfg := testConfig(t)
	// Reading and parsing 128 MiB under -race on a busy 2-core machine has
	// taken over a minute, past the default http.read_timeout and
	// write_timeout: the bridge then could not answer and closed the
	// connection mid-body, and the client saw its upload reset. How fast a
	// stream is read is not what this test measures, so both bounds are
	// set far past any run.
	cfg.HTTP.ReadTimeout, cfg.HTTP.WriteTimeout = 10*time.Minute, 10*time.Minute
	b := startBridge(t, cfg)
	url := "http://" + b.HTTPAddr() + "/subunit/v1/events?worker=w&project=openstack/nova&change=1&build_uuid=u&source_url=s"
	post := func(each func([]byte, string) []byte) (int, string) {
		stream := &testsubunit.Stream{Size: 128 << 20, Prefix: "tempest.api.compute.servers.test_servers.ServersTest.test_" +
			strings.Repeat("x", 400), Each: each}
		req, _ := http.NewRequest("POST", url, stream)
		req.Header.Set("Content-Type", "application/x-subunit")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tt := range []struct {
		name string
		each func([]byte, string) []byte
		code int
		want string
	}{
		{"never finished", func(b []byte, id string) []byte { return testsubunit.Packet(b, id, subunit.StatusInProgress) },
			413, fmt.Sprintf("more than %d tests in progress at once", subunit.DefaultMaxRunning)},
		{"finished", func(b []byte, id string) []byte {
			return testsubunit.Packet(testsubunit.Packet(b, id, subunit.StatusInProgress), id, subunit.StatusSuccess)
		}, 200, `"status":"success"`},
	} {
		var code int
		var body string
		growth := peakRSSGrowth(t, func() { code, body = post(tt.each) })
		t.Logf("128 MiB stream of tests %s: %d, peak RSS growth %d MiB", tt.name, code, growth>>20)
		if code != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("tests %s: %d %s", tt.name, code, body)
		}
		if tt.code == 413 && !bytes.Contains([]byte(body), []byte("subunit.max_running_tests")) {
			t.Errorf("the 413 does not name the setting: %s", body)
		}
		if growth > 256<<20 {
			t.Errorf("tests %s: the process grew by %d MiB", tt.name, growth>>20)
		}
	}
}

// TestHostileBodies: bodies built to hurt a parser (nesting a million deep,
// one 7 MiB line, a million newlines, half a million tiny array elements) get
// a 4xx from every endpoint that parses them, publish nothing, and leave
// the bridge serving.
func TestHostileBodies(t *testing.T) {
	cfg := testConfig(t)
	cfg.ConfigDB.Enabled = true
	b := startBridge(t, cfg)
	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	msgs := sub.Subscribe("#", 1)
	deepArrays := strings.Repeat("[", 1<<20)
	deepObjects := strings.Repeat(`{"a":`, 1<<20/5)
	bodies := map[string]string{
		"arrays nested a million deep": deepArrays,
		"objects nested 200,000 deep":  deepObjects,
		"a 7 MiB line":                 `{"type":"x","project":"p","x":"` + strings.Repeat("y", 7<<20) + `"`,
		"a million newlines":           strings.Repeat("\n", 1<<20),
		"a million tiny elements":      "[" + strings.Repeat("1,", 1<<20) + "1]",
		"an event in a million arrays": strings.Repeat("[", 1<<20) + `{"type":"x","project":"p"}` + strings.Repeat("]", 1<<20),
	}
	endpoints := []struct{ method, path, contentType string }{
		{"POST", "/data-collector/v0/", "application/json"},
		{"POST", "/ansible/v1/events", "application/json"},
		{"POST", "/gerrit/v1/events", "application/json"},
		{"POST", "/launchpad/v1/events", "message/rfc822"},
		{"POST", "/subunit/v1/events", "application/json"},
		{"PUT", "/api/v1/config/environments/1/resources/r/values", "application/json"},
		{"POST", "/api/v1/config/environments", "application/json"},
	}
	for name, body := range bodies {
		for _, ep := range endpoints {
			req, _ := http.NewRequest(ep.method, "http://"+b.HTTPAddr()+ep.path, strings.NewReader(body))
			req.Header.Set("Content-Type", ep.contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s to %s: %v", name, ep.path, err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Errorf("%s to %s: %d %.200s", name, ep.path, resp.StatusCode, answer)
			} else {
				t.Logf("%s to %s: %d %.120s", name, ep.path, resp.StatusCode, answer)
			}
		}
	}
	if code, _ := testkit.Get(t, "http://"+b.HTTPAddr()+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if err := b.Publisher().Publish(t.Context(), busMessage("end/marker")); err != nil {
		t.Fatal(err)
	}
	if m := testkit.Next(t, msgs); m.Topic != "end/marker" {
		t.Errorf("a hostile body was published: %q", m.Topic)
	}
}
