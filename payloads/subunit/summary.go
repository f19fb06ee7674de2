package subunit

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"

	"github.com/opsfirehose/firehose/internal/ellipsis"
)

// MaxListed bounds Summary.Failed.
const MaxListed = 20

// Summary counts the tests of a stream the way testtools' StreamSummary
// (which testr and stestr use) does:
//   - a test is its (test id, route code); packets without a test id, such as
//     attachments to the whole run, are not tests;
//   - a test completes at its first packet with a final status; a packet
//     with no status or "inprogress" leaves it running;
//   - a test still running at the end of the stream is incomplete: it hung
//     or its runner died;
//   - "exists" (test listing) completes a test without counting it.
//
// The run failed when a test failed or is incomplete. Unexpected successes
// and expected failures do not fail it, as in StreamSummary.wasSuccessful.
type Summary struct {
	// Tests counts the tests that ran: completed ones other than "exists",
	// and incomplete ones.
	Tests      int `json:"tests"`
	Success    int `json:"success"`
	Fail       int `json:"fail"`
	Skip       int `json:"skip"`
	XFail      int `json:"xfail"`
	UXSuccess  int `json:"uxsuccess"`
	Incomplete int `json:"incomplete"`
	// Packets is the number of packets in the stream.
	Packets int `json:"packets"`
	// Failed lists the ids of the first MaxListed failed or incomplete
	// tests, each cut to MaxIDShown bytes.
	Failed []string `json:"failed,omitempty"`
}

// Successful reports whether no test failed and none is incomplete.
func (s *Summary) Successful() bool { return s.Fail == 0 && s.Incomplete == 0 }

// DefaultMaxRunning is the default bound on the tests a stream may have in
// progress at once. A test runner has one test in progress per worker, so
// real streams stay far below it; a stream that starts tests and never
// finishes them would otherwise make the reader remember every one.
const DefaultMaxRunning = 10000

// MaxIDShown bounds a test id as Summary.Failed lists it, in bytes; a
// longer one is cut, with "…" at the end. A test id may be up to 4 MiB.
const MaxIDShown = 256

// ErrTooManyRunning is wrapped by every *TooManyRunningError.
var ErrTooManyRunning = errors.New("too many tests in progress")

// TooManyRunningError is a stream with more tests in progress at once than
// Summarize was told to track.
type TooManyRunningError struct {
	// Position locates the packet that started one test too many.
	Position
	Limit int
}

func (e *TooManyRunningError) Error() string {
	return fmt.Sprintf("%s: more than %d tests in progress at once "+
		"(a test is in progress from its first packet until one with a final status); "+
		"the bridge tracks at most %d (subunit.max_running_tests)", e.Position, e.Limit, e.Limit)
}

// Unwrap returns ErrTooManyRunning.
func (e *TooManyRunningError) Unwrap() error { return ErrTooManyRunning }

// Summarize reads a whole subunit v2 stream and counts its tests. It keeps
// at most maxRunning tests in progress at once (DefaultMaxRunning when it is
// 0 or less), each at a fixed cost whatever the length of its id, so its
// memory is bounded however long the stream; one test more is a
// *TooManyRunningError. Other errors are those of Reader.Next. On error the
// summary covers the packets read so far.
func Summarize(r io.Reader, maxRunning int) (Summary, error) {
	if maxRunning <= 0 {
		maxRunning = DefaultMaxRunning
	}
	var s Summary
	// A test is known by a 128-bit keyed hash of its (id, route code), so
	// that a 4 MiB test id costs no more to track than a short one; the
	// value is the id as Failed would list it.
	keys := newTestKeys()
	running := map[testKey]string{}
	rd := NewReader(r)
	for {
		p, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s, err
		}
		s.Packets++
		if !p.Has(FlagTestID) {
			continue
		}
		k := keys.key(p.TestID, p.RouteCode, p.Has(FlagRouteCode))
		if p.Status.Interim() {
			if _, ok := running[k]; !ok {
				if len(running) >= maxRunning {
					return s, &TooManyRunningError{Position: Position{Offset: p.Offset, Packet: s.Packets - 1}, Limit: maxRunning}
				}
				running[k] = ellipsis.Cut(p.TestID, MaxIDShown)
			}
			continue
		}
		delete(running, k)
		s.count(p.Status, p.TestID)
	}
	incomplete := make([]string, 0, len(running))
	for _, id := range running {
		incomplete = append(incomplete, id)
	}
	slices.Sort(incomplete)
	for _, id := range incomplete {
		s.Tests++
		s.Incomplete++
		s.listFailed(id)
	}
	return s, nil
}

// testKey identifies a test: a (test id, route code) pair.
type testKey [2]uint64

// testKeys hashes tests with two random seeds: 128 bits, so that no two
// tests of a stream share a key by chance, and keyed, so that a stream
// cannot be made to collide on purpose.
type testKeys struct{ a, b maphash.Hash }

func newTestKeys() *testKeys {
	k := &testKeys{}
	k.a.SetSeed(maphash.MakeSeed())
	k.b.SetSeed(maphash.MakeSeed())
	return k
}

// key hashes id, then a NUL (which an id never holds), whether a route code
// is present (an empty one is not an absent one, as in testtools), and the
// route code.
func (k *testKeys) key(id, route string, routed bool) testKey {
	var out testKey
	for i, h := range []*maphash.Hash{&k.a, &k.b} {
		h.Reset()
		h.WriteString(id)
		if routed {
			h.WriteByte(0)
			h.WriteString(route)
		}
		out[i] = h.Sum64()
	}
	return out
}

func (s *Summary) count(st Status, id string) {
	if st == StatusExists {
		return
	}
	s.Tests++
	switch st {
	case StatusSuccess:
		s.Success++
	case StatusFail:
		s.Fail++
		s.listFailed(id)
	case StatusSkip:
		s.Skip++
	case StatusXFail:
		s.XFail++
	case StatusUXSuccess:
		s.UXSuccess++
	}
}

func (s *Summary) listFailed(id string) {
	if len(s.Failed) < MaxListed {
		s.Failed = append(s.Failed, ellipsis.Cut(id, MaxIDShown))
	}
}
