package subunit_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/testsubunit"
	"github.com/opsfirehose/firehose/payloads/subunit"
)

func inProgress(n int, prefix string) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = testsubunit.Packet(b, prefix+string(rune('a'+i%26))+strings.Repeat("x", i/26), subunit.StatusInProgress)
	}
	return b
}

// TestRunningTestsBounded: a stream may have max tests in progress at once,
// and one more is refused with a *TooManyRunningError naming the limit;
// tests that finish free their place.
func TestRunningTestsBounded(t *testing.T) {
	const max = 100
	sum, err := subunit.Summarize(bytes.NewReader(inProgress(max, "t.")), max)
	if err != nil || sum.Incomplete != max || len(sum.Failed) != subunit.MaxListed || sum.Successful() {
		t.Fatalf("%d in progress, limit %d: %+v %v", max, max, sum, err)
	}
	_, err = subunit.Summarize(bytes.NewReader(inProgress(max+1, "t.")), max)
	var tooMany *subunit.TooManyRunningError
	if !errors.As(err, &tooMany) || tooMany.Limit != max || tooMany.Packet != max ||
		!strings.Contains(err.Error(), "more than 100 tests in progress at once") || !strings.Contains(err.Error(), "max_running_tests") {
		t.Fatalf("%d in progress, limit %d: %v", max+1, max, err)
	}
	// Each test starts and finishes: never more than one in progress.
	var stream []byte
	for i := 0; i < 10*max; i++ {
		id := "t." + strings.Repeat("y", i)
		stream = testsubunit.Packet(stream, id, subunit.StatusInProgress)
		stream = testsubunit.Packet(stream, id, subunit.StatusSuccess)
	}
	sum, err = subunit.Summarize(bytes.NewReader(stream), 1)
	if err != nil || sum.Success != 10*max || !sum.Successful() {
		t.Fatalf("finished tests: %+v %v", sum, err)
	}
}

// TestLongTestIDs: a test id may take a whole 4 MiB packet; tracking it
// costs a fixed amount, and the answer lists it cut to MaxIDShown bytes.
func TestLongTestIDs(t *testing.T) {
	long := strings.Repeat("é", 1<<20) // 2 MiB
	var stream []byte
	stream = testsubunit.Packet(stream, long+"1", subunit.StatusInProgress)
	stream = testsubunit.Packet(stream, long+"2", subunit.StatusFail)
	sum, err := subunit.Summarize(bytes.NewReader(stream), 0)
	if err != nil || sum.Fail != 1 || sum.Incomplete != 1 || len(sum.Failed) != 2 {
		t.Fatalf("%+v %v", sum, err)
	}
	for _, id := range sum.Failed {
		if len(id) > subunit.MaxIDShown || !strings.HasSuffix(id, "…") || !strings.HasPrefix(id, "éé") || !strings.Contains(id[:len(id)-3], "é") {
			t.Errorf("listed id of %d bytes: %q", len(id), id)
		}
	}
}

// TestReaderAllocatesWhatArrives: a packet that claims 4 MiB and stops
// after its header costs what arrived, not what it claimed.
func TestReaderAllocatesWhatArrives(t *testing.T) {
	claim := []byte{subunit.Signature, 0x28, 0x00, 0x80 | 0x3f, 0xff, 0xf0} // a 4 MiB - 16 packet, cut short
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := subunit.NewReader(bytes.NewReader(claim)).Next()
	runtime.ReadMemStats(&after)
	var fe *subunit.FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "ends inside a packet") {
		t.Fatalf("%v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("a packet that claims 4 MiB and sends 6 bytes allocated %d KiB", grew>>10)
	}
	// The real thing still reads whole.
	stream := testsubunit.Packet(nil, strings.Repeat("z", subunit.MaxPacket-100), subunit.StatusSuccess)
	p, err := subunit.NewReader(iotestHalf{bytes.NewReader(stream)}).Next()
	if err != nil || len(p.TestID) != subunit.MaxPacket-100 {
		t.Fatalf("%v", err)
	}
}

// iotestHalf returns at most half of what is asked, to cross buffer edges.
type iotestHalf struct{ r io.Reader }

func (h iotestHalf) Read(p []byte) (int, error) { return h.r.Read(p[:(len(p)+1)/2]) }
