package subunit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// subunitPython returns a Python interpreter that has python-subunit and
// testtools: the one Debian's subunit tools run with (their #! line), since
// the first python3 on PATH may be another one.
func subunitPython(t testing.TB) string {
	t.Helper()
	tool := testkit.RequireCommand(t, "subunit-output")
	f, err := os.Open(tool)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(f).ReadString('\n')
	f.Close()
	candidates := []string{"/usr/bin/python3", "python3"}
	if fields := strings.Fields(strings.TrimPrefix(line, "#!")); strings.HasPrefix(line, "#!") && len(fields) > 0 {
		if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
			candidates = append([]string{fields[1]}, candidates...)
		} else {
			candidates = append([]string{fields[0]}, candidates...)
		}
	}
	for _, c := range candidates {
		if exec.Command(c, "-c", "import subunit, testtools").Run() == nil {
			return c
		}
	}
	testkit.Unavailable(t, "no python with the subunit module among %v; install python3-subunit", candidates)
	return ""
}

// call is one StreamResultToBytes.status call for testdata/write_stream.py.
type call struct {
	TestID    *string  `json:"test_id,omitempty"`
	Status    string   `json:"test_status,omitempty"`
	Tags      []string `json:"test_tags,omitempty"`
	Runnable  *bool    `json:"runnable,omitempty"`
	FileName  *string  `json:"file_name,omitempty"`
	FileText  *string  `json:"file_text,omitempty"`
	FileSize  *int     `json:"file_size,omitempty"`
	EOF       bool     `json:"eof,omitempty"`
	MIMEType  string   `json:"mime_type,omitempty"`
	RouteCode *string  `json:"route_code,omitempty"`
	Timestamp *float64 `json:"timestamp,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// pythonStream writes calls with python-subunit's StreamResultToBytes.
func pythonStream(t testing.TB, py string, calls []call) []byte {
	t.Helper()
	in, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	return runPython(t, py, "write_stream.py", in)
}

func runPython(t testing.TB, py, script string, stdin []byte) []byte {
	t.Helper()
	cmd := exec.Command(py, filepath.Join("testdata", script))
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	return out
}

// refPacket is a packet as python-subunit's ByteStreamToStreamResult reads
// it (testdata/read_stream.py).
type refPacket struct {
	TestID    *string  `json:"test_id"`
	Status    string   `json:"status"`
	Tags      []string `json:"tags"`
	Runnable  bool     `json:"runnable"`
	FileName  *string  `json:"file_name"`
	FileLen   *int     `json:"file_len"`
	EOF       bool     `json:"eof"`
	MIMEType  *string  `json:"mime_type"`
	RouteCode *string  `json:"route_code"`
	Timestamp []int64  `json:"timestamp"`
}

// refSummary is testtools' StreamSummary of a stream.
type refSummary struct {
	Tests      int  `json:"tests"`
	Errors     int  `json:"errors"`
	Failures   int  `json:"failures"`
	Skipped    int  `json:"skipped"`
	XFail      int  `json:"xfail"`
	UXSuccess  int  `json:"uxsuccess"`
	Successful bool `json:"successful"`
}

// pythonRead reads a stream with python-subunit and testtools.
func pythonRead(t testing.TB, py string, stream []byte) ([]refPacket, refSummary) {
	t.Helper()
	var packets []refPacket
	var sum refSummary
	for _, line := range bytes.Split(bytes.TrimSpace(runPython(t, py, "read_stream.py", stream)), []byte("\n")) {
		if bytes.Contains(line, []byte(`"summary": true`)) {
			if err := json.Unmarshal(line, &sum); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var p refPacket
		if err := json.Unmarshal(line, &p); err != nil {
			t.Fatal(err)
		}
		packets = append(packets, p)
	}
	return packets, sum
}

// asRef turns our packet into the reference's shape. python-subunit reports
// a packet's file and status as one event, as we do.
func asRef(p *Packet) refPacket {
	r := refPacket{Status: p.Status.String(), Runnable: p.Has(FlagRunnable), EOF: p.Has(FlagEOF)}
	if p.Has(FlagTestID) {
		r.TestID = ptr(p.TestID)
	}
	if p.Has(FlagTags) {
		r.Tags = append([]string{}, p.Tags...)
		slices.Sort(r.Tags)
	}
	if p.Has(FlagFileContent) {
		r.FileName, r.FileLen = ptr(p.FileName), ptr(len(p.File))
	}
	if p.Has(FlagMIMEType) {
		r.MIMEType = ptr(p.MIMEType)
	}
	if p.Has(FlagRouteCode) {
		r.RouteCode = ptr(p.RouteCode)
	}
	if p.Has(FlagTimestamp) {
		r.Timestamp = []int64{p.Timestamp.Unix(), int64(p.Timestamp.Nanosecond())}
	}
	return r
}
