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
	b := startBridge(t, testConfig(t))
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
