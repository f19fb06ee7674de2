package subunit

import (
	"errors"
	"io"
	"slices"
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
	// Failed lists the ids of the first MaxListed failed or incomplete tests.
	Failed []string `json:"failed,omitempty"`
}

// Successful reports whether no test failed and none is incomplete.
func (s *Summary) Successful() bool { return s.Fail == 0 && s.Incomplete == 0 }

// Summarize reads a whole subunit v2 stream and counts its tests. Errors are
// those of Reader.Next; on error the summary covers the packets read so far.
func Summarize(r io.Reader) (Summary, error) {
	var s Summary
	// A present but empty route code is not an absent one, as in testtools.
	type key struct {
		id, route string
		routed    bool
	}
	running := map[key]bool{}
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
		k := key{p.TestID, p.RouteCode, p.Has(FlagRouteCode)}
		if p.Status.Interim() {
			running[k] = true
			continue
		}
		delete(running, k)
		s.count(p.Status, p.TestID)
	}
	incomplete := make([]string, 0, len(running))
	for k := range running {
		incomplete = append(incomplete, k.id)
	}
	slices.Sort(incomplete)
	for _, id := range incomplete {
		s.Tests++
		s.Incomplete++
		s.listFailed(id)
	}
	return s, nil
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
		s.Failed = append(s.Failed, id)
	}
}
