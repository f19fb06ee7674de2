package subunit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// tool runs one of Debian's subunit tools and returns its stdout.
func tool(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(testkit.RequireCommand(t, name), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	return out
}

// output runs subunit-output once per argument list and concatenates the
// streams, as a test runner's workers would.
func output(t *testing.T, runs ...[]string) []byte {
	t.Helper()
	var stream []byte
	for _, args := range runs {
		stream = append(stream, tool(t, nil, "subunit-output", args...)...)
	}
	return stream
}

// statsLine reads "Name: N" from subunit-stats' report.
func statsLine(t *testing.T, report []byte, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+)`).FindSubmatch(report)
	if m == nil {
		t.Fatalf("no %q in subunit-stats output:\n%s", name, report)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestToolStreams summarises streams written by Debian's subunit tools and
// checks the verdict against testtools' StreamSummary and the counts against
// subunit-stats.
func TestToolStreams(t *testing.T) {
	py := subunitPython(t)
	big := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(big, bytes.Repeat([]byte("log line\n"), 20000), 0o600); err != nil {
		t.Fatal(err)
	}
	v1 := []byte("test: nova.tests.a\nsuccess: nova.tests.a\ntest: nova.tests.b\nfailure: nova.tests.b [\nTraceback\n]\ntest: nova.tests.c\nskip: nova.tests.c\n")
	mixed := func(t *testing.T) []byte {
		stream := append(output(t, []string{"--success", "t.a"}), "stray stdout\n"...)
		return append(stream, output(t, []string{"--fail", "t.b"})...)
	}
	tests := []struct {
		name       string
		stream     func(t *testing.T) []byte
		successful bool
		tests      int
		checkStats bool
	}{
		{"passing", func(t *testing.T) []byte {
			return output(t, []string{"--inprogress", "t.a"}, []string{"--success", "t.a", "--tag", "worker-0"},
				[]string{"--success", "t.b"}, []string{"--skip", "t.c"})
		}, true, 3, true},
		{"failing", func(t *testing.T) []byte {
			return output(t, []string{"--success", "t.a"}, []string{"--fail", "t.b"}, []string{"--skip", "t.c"})
		}, false, 3, true},
		{"expected failure and unexpected success pass", func(t *testing.T) []byte {
			return output(t, []string{"--success", "t.a"}, []string{"--xfail", "t.b"}, []string{"--uxsuccess", "t.c"})
		}, true, 3, true},
		{"listing only", func(t *testing.T) []byte {
			return output(t, []string{"--exists", "t.a"}, []string{"--exists", "t.b"})
		}, true, 0, false},
		{"incomplete test fails the run", func(t *testing.T) []byte {
			return output(t, []string{"--success", "t.a"}, []string{"--inprogress", "t.hangs"})
		}, false, 2, false},
		{"3-byte lengths: 180 KB attachment", func(t *testing.T) []byte {
			return output(t, []string{"--success", "t.a"}, []string{"--fail", "t.b", "--attach-file", big, "--mimetype", "text/plain"})
		}, false, 2, true},
		{"run attachment is not a test", func(t *testing.T) []byte {
			return output(t, []string{"--attach-file", big}, []string{"--success", "t.a"})
		}, true, 1, true},
		{"subunit-1to2 of a v1 stream", func(t *testing.T) []byte { return tool(t, v1, "subunit-1to2") }, false, 3, true},
		{"subunit-filter -s --no-passthrough cleans a mixed stream", func(t *testing.T) []byte {
			return tool(t, mixed(t), "subunit-filter", "-s", "--no-passthrough")
		}, false, 2, true},
		{"empty stream", func(*testing.T) []byte { return nil }, true, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stream := tt.stream(t)
			got, err := Summarize(bytes.NewReader(stream), 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Successful() != tt.successful || got.Tests != tt.tests {
				t.Errorf("successful=%v tests=%d; want %v %d (%+v)", got.Successful(), got.Tests, tt.successful, tt.tests, got)
			}
			_, ref := pythonRead(t, py, stream)
			if ref.Successful != got.Successful() || ref.Tests != got.Tests || ref.Errors != got.Fail+got.Incomplete ||
				ref.Skipped != got.Skip || ref.XFail != got.XFail || ref.UXSuccess != got.UXSuccess {
				t.Errorf("testtools says %+v; we say %+v", ref, got)
			}
			if tt.checkStats {
				report := tool(t, stream, "subunit-stats")
				if statsLine(t, report, "Total tests") != got.Tests || statsLine(t, report, "Failed tests") != got.Fail ||
					statsLine(t, report, "Skipped tests") != got.Skip ||
					statsLine(t, report, "Passed tests") != got.Success+got.XFail+got.UXSuccess {
					t.Errorf("subunit-stats says\n%s\nwe say %+v", report, got)
				}
			}
		})
	}

	t.Run("mixed stream refused at the stray byte", func(t *testing.T) {
		t.Parallel()
		_, err := Summarize(bytes.NewReader(mixed(t)), 0)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Packet != 1 || !strings.Contains(fe.Reason, "0x73 where a packet should start") {
			t.Errorf("mixed stream: %v", err)
		}
	})
}

// TestMatchesPythonSubunit writes random streams with python-subunit's
// encoder and checks that every packet reads as python-subunit's decoder
// reads it, and that the summary is testtools'.
func TestMatchesPythonSubunit(t *testing.T) {
	py := subunitPython(t)
	rng := rand.New(rand.NewPCG(7, 2026))
	statuses := []string{"", "exists", "inprogress", "success", "uxsuccess", "skip", "fail", "xfail"}
	for round := range 4 {
		calls := make([]call, 150)
		for i := range calls {
			c := &calls[i]
			if rng.IntN(8) > 0 {
				c.TestID = ptr(fmt.Sprintf("pkg.tests.test_%d", rng.IntN(40)))
				if rng.IntN(20) == 0 {
					c.TestID = ptr("tést ünïcode " + strings.Repeat("x", rng.IntN(100)))
				}
			}
			c.Status = statuses[rng.IntN(len(statuses))]
			for range rng.IntN(3) {
				c.Tags = append(c.Tags, fmt.Sprintf("tag%d", rng.IntN(5)))
			}
			if rng.IntN(4) == 0 {
				c.RouteCode = ptr(strconv.Itoa(rng.IntN(3)))
			}
			if rng.IntN(5) == 0 {
				c.Runnable = ptr(false)
			}
			if rng.IntN(3) == 0 {
				c.FileName = ptr("attachment")
				if rng.IntN(2) == 0 {
					c.FileText = ptr("Traceback ✓\n")
				} else {
					c.FileSize = ptr([]int{0, 1, 63, 64, 16383, 16384, 70000}[rng.IntN(7)])
				}
				if rng.IntN(2) == 0 {
					c.MIMEType = "text/plain; charset=utf8"
				}
				c.EOF = rng.IntN(2) == 0
			}
			if rng.IntN(3) == 0 {
				c.Timestamp = ptr(1.4e9 + float64(rng.IntN(1e8)) + float64(rng.IntN(1e6))/1e6)
			}
		}
		stream := pythonStream(t, py, calls)
		wantPackets, wantSummary := pythonRead(t, py, stream)

		rd := NewReader(bytes.NewReader(stream))
		var offset int64
		for i := 0; ; i++ {
			p, err := rd.Next()
			if errors.Is(err, io.EOF) {
				if i != len(wantPackets) || offset != int64(len(stream)) {
					t.Fatalf("round %d: %d packets, %d bytes; python read %d packets of %d bytes", round, i, offset, len(wantPackets), len(stream))
				}
				break
			}
			if err != nil {
				t.Fatalf("round %d packet %d: %v", round, i, err)
			}
			if p.Offset != offset {
				t.Fatalf("round %d packet %d at %d, want %d", round, i, p.Offset, offset)
			}
			offset += int64(p.Length)
			if got := asRef(p); i >= len(wantPackets) || !reflect.DeepEqual(got, wantPackets[i]) {
				t.Fatalf("round %d packet %d:\n got %s\nwant %s", round, i, dump(got), dump(wantPackets[i]))
			}
		}
		got, err := Summarize(bytes.NewReader(stream), 0)
		if err != nil {
			t.Fatal(err)
		}
		if wantSummary.Successful != got.Successful() || wantSummary.Tests != got.Tests || wantSummary.Errors != got.Fail+got.Incomplete ||
			wantSummary.Skipped != got.Skip || wantSummary.XFail != got.XFail || wantSummary.UXSuccess != got.UXSuccess {
			t.Errorf("round %d: testtools says %+v; we say %+v", round, wantSummary, got)
		}
	}
}

func dump(v any) string {
	return fmt.Sprintf("%+v", v)
}

// reseal recomputes a packet's CRC after a test has changed its bytes.
func reseal(packet []byte) {
	binary.BigEndian.PutUint32(packet[len(packet)-4:], crc32.ChecksumIEEE(packet[:len(packet)-4]))
}

func TestFormatErrors(t *testing.T) {
	stream, err := os.ReadFile("testdata/failing.subunit")
	if err != nil {
		t.Fatal(err)
	}
	// The packets of the stream, by offset.
	var offsets []int
	rd := NewReader(bytes.NewReader(stream))
	for {
		p, err := rd.Next()
		if err != nil {
			break
		}
		offsets = append(offsets, int(p.Offset))
	}
	if len(offsets) < 3 {
		t.Fatalf("fixture has %d packets", len(offsets))
	}
	second := offsets[1]
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(stream)) }
	tests := []struct {
		name   string
		stream []byte
		packet int
		offset int
		reason string
	}{
		{"bad CRC", mutate(func(b []byte) []byte { b[offsets[2]-1] ^= 0xff; return b }), 1, second, "bad CRC32"},
		{"flipped body byte", mutate(func(b []byte) []byte { b[second+10] ^= 0x01; return b }), 1, second, "bad CRC32"},
		{"truncated", stream[:len(stream)-3], len(offsets) - 1, offsets[len(offsets)-1], "ends inside a packet"},
		{"truncated in the header", stream[:second+2], 1, second, "ends inside a packet"},
		{"stray text first", append([]byte("ok\n"), stream...), 0, 0, "0x6F where a packet should start"},
		{"subunit v1 text", []byte("test: a\nsuccess: a\n"), 0, 0, "0x74 where a packet should start"},
		{"version 1", mutate(func(b []byte) []byte {
			b[second+1] = b[second+1]&0x0f | 0x10
			reseal(b[second:offsets[2]])
			return b
		}), 1, second, "version 1"},
		{"4-byte length", []byte{0xB3, 0x20, 0x00, 0xC0, 0, 0, 12, 0, 0, 0, 0, 0}, 0, 0, "4-byte form"},
		{"length below header", []byte{0xB3, 0x20, 0x00, 0x05, 0, 0, 0, 0}, 0, 0, "shorter than its header"},
		{"string past the packet", func() []byte {
			// A test id claiming 60 bytes in a packet that has 3.
			b := []byte{0xB3, 0x28, 0x03, 11, 60, 'a', 'b', 0, 0, 0, 0}
			reseal(b)
			return b
		}(), 0, 0, "test id: 60 bytes claimed"},
		{"NUL in a test id", func() []byte {
			b := []byte{0xB3, 0x28, 0x03, 11, 2, 'a', 0, 0, 0, 0, 0}
			reseal(b)
			return b
		}(), 0, 0, "NUL"},
		{"invalid UTF-8 tag", func() []byte {
			b := []byte{0xB3, 0x20, 0x80, 12, 1, 2, 0xff, 0xfe, 0, 0, 0, 0}
			reseal(b)
			return b
		}(), 0, 0, "tag is not UTF-8"},
		{"tag count beyond the packet", func() []byte {
			b := []byte{0xB3, 0x20, 0x80, 11, 0x7f, 0xff, 0, 0, 0, 0, 0}
			reseal(b)
			return b
		}(), 0, 0, "tag count"},
	}
	for _, tt := range tests {
		_, err := Summarize(bytes.NewReader(tt.stream), 0)
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want a FormatError", tt.name, err)
			continue
		}
		if fe.Packet != tt.packet || fe.Offset != int64(tt.offset) || !strings.Contains(fe.Reason, tt.reason) {
			t.Errorf("%s: %v; want packet %d at %d: %q", tt.name, err, tt.packet, tt.offset, tt.reason)
		}
	}
}

// TestReaderErrors checks that an I/O error is passed on, not taken for a
// format error, and that one-byte reads parse like whole ones.
func TestReaderErrors(t *testing.T) {
	stream, _ := os.ReadFile("testdata/failing.subunit")
	boom := errors.New("connection reset")
	_, err := Summarize(io.MultiReader(bytes.NewReader(stream[:20]), iotest.ErrReader(boom)), 0)
	if !errors.Is(err, boom) || errors.Is(err, ErrFormat) {
		t.Errorf("got %v", err)
	}
	whole, err1 := Summarize(bytes.NewReader(stream), 0)
	bytewise, err2 := Summarize(iotest.OneByteReader(bytes.NewReader(stream)), 0)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(whole, bytewise) {
		t.Errorf("%+v %v / %+v %v", whole, err1, bytewise, err2)
	}
}

func TestCheckedInStreams(t *testing.T) {
	tests := map[string]Summary{
		"passing":    {Tests: 3, Success: 2, Skip: 1, Packets: 4},
		"failing":    {Tests: 3, Success: 1, Fail: 1, XFail: 1, Packets: 3, Failed: []string{"nova.tests.test_b"}},
		"incomplete": {Tests: 2, Success: 1, Incomplete: 1, Packets: 2, Failed: []string{"nova.tests.test_hangs"}},
	}
	for name, want := range tests {
		f, err := os.Open("testdata/" + name + ".subunit")
		if err != nil {
			t.Fatal(err)
		}
		got, err := Summarize(f, 0)
		f.Close()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v %v; want %+v", name, got, err, want)
		}
	}
}

// FuzzReader checks that the reader never panics, that packets tile the
// stream, and that the summary's counts add up.
func FuzzReader(f *testing.F) {
	for _, name := range []string{"passing", "failing", "incomplete"} {
		b, err := os.ReadFile("testdata/" + name + ".subunit")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xB3, 0x20, 0x00, 0x08, 0, 0, 0, 0})
	f.Add([]byte{0xB3, 0x2B, 0x03, 0x0B, 0x02, 'a', 'b', 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		rd := NewReader(bytes.NewReader(stream))
		var end int64
		for {
			p, err := rd.Next()
			if errors.Is(err, io.EOF) {
				if end != int64(len(stream)) {
					t.Fatalf("clean end at %d of %d bytes", end, len(stream))
				}
				break
			}
			if err != nil {
				var fe *FormatError
				if !errors.As(err, &fe) || fe.Offset != end {
					t.Fatalf("error %v at %d", err, end)
				}
				break
			}
			if p.Offset != end || p.Length < 8 || p.Length > MaxPacket || p.Flags>>12 != Version {
				t.Fatalf("packet %+v after %d", p, end)
			}
			end += int64(p.Length)
		}
		s, err := Summarize(bytes.NewReader(stream), 0)
		if s.Tests != s.Success+s.Fail+s.Skip+s.XFail+s.UXSuccess+s.Incomplete || len(s.Failed) > MaxListed {
			t.Fatalf("counts do not add up: %+v (%v)", s, err)
		}
	})
}
