package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// The fleet's names: node i is nodePrefix followed by i in 8 digits, as long
// as the fixture's node name (chefdk-ubuntu-16.04-tester-91bc78), so that
// every node's status payload has the size of the bridge's own for the
// fixture (467 bytes for fixture 02). The org is the fixture's.
const (
	nodePrefix  = "chefdk-ubuntu-16.04-node-"
	nodeDigits  = 8
	statusLevel = "/status"
	maxNodes    = 99_999_999
	// lateFilter is what a late subscriber subscribes to: every node's status.
	lateFilter = "chef/+/+/status"
)

func nodeName(i int) string { return fmt.Sprintf("%s%0*d", nodePrefix, nodeDigits, i) }

func statusTopic(org string, i int) string { return "chef/" + org + "/" + nodeName(i) + statusLevel }

// nodeIndex parses the node number out of a status topic of the fleet; false
// for any other topic.
func nodeIndex(topic []byte) (int, bool) {
	end := len(topic) - len(statusLevel)
	if end < nodeDigits+len(nodePrefix) || string(topic[end:]) != statusLevel ||
		string(topic[end-nodeDigits-len(nodePrefix):end-nodeDigits]) != nodePrefix {
		return 0, false
	}
	n := 0
	for _, d := range topic[end-nodeDigits : end] {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int(d-'0')
	}
	return n, true
}

// statusTemplate is the bridge's own status payload for the fixture's
// converge, from which every node's is made: its node name and run id
// replaced.
type statusTemplate struct {
	payload []byte // for node 0, with the fixture's run id
	org     string
	runID   string
}

// pass is one publication of the whole fleet: every node's status with the
// pass's run id, so that a late subscriber can tell which pass it got.
type pass struct {
	runID    string
	topics   []string
	payloads [][]byte
}

// newPass makes the fleet's messages with run id runID, which must have
// the fixture run id's length.
func (t statusTemplate) newPass(nodes int, runID string) pass {
	p := pass{runID: runID, topics: make([]string, nodes), payloads: make([][]byte, nodes)}
	base := bytes.ReplaceAll(t.payload, []byte(t.runID), []byte(runID))
	name0 := []byte(nodeName(0))
	for i := range nodes {
		p.topics[i] = statusTopic(t.org, i)
		p.payloads[i] = bytes.ReplaceAll(base, name0, []byte(nodeName(i)))
	}
	return p
}

// otherRunID is a run id of the same length as id, differing from it.
func otherRunID(id string, n int) string {
	prefix := fmt.Sprintf("%08d", n)
	if len(id) < len(prefix) {
		return strings.Repeat("9", len(id))
	}
	return prefix + id[len(prefix):]
}

// published is what publishing one pass measured.
type published struct {
	Acked   int64         `json:"acked"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

func (p published) rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Acked) / p.Elapsed.Seconds()
}

// publish publishes every message of ps retained at QoS 1 with inflight
// messages in flight, and returns once all are PUBACKed (or timeout), from
// the first PUBLISH to the last PUBACK. afterLastAck, if set, runs as soon
// as the last PUBACK is seen, before the client disconnects.
func publish(ctx context.Context, s *server, ps pass, inflight int, timeout time.Duration, afterLastAck func()) (published, error) {
	c, err := mqttload.Dial(mqttload.Options{Addr: s.mqttAddr, ClientID: "bench-retained-fleet", Username: s.user, Password: s.pass,
		QueueLen: inflight + 16, KeepAlive: 10 * time.Minute})
	if err != nil {
		return published{}, fmt.Errorf("%s: fleet publisher: %w", s.name, err)
	}
	pub := mqttload.NewPublisher(c, 1, inflight, false)
	pub.SetLimit(uint64(len(ps.topics)))
	pub.SetMessages(func(seq uint64) (string, []byte) { return ps.topics[seq], ps.payloads[seq] }, true)
	c.Start()
	stop := make(chan struct{})
	returned := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(returned)
		pub.Run(stop, start, 0)
	}()
	want := int64(len(ps.topics))
	err = benchkit.PollUntil(ctx, start.Add(timeout), time.Millisecond, s.proc, func() (bool, error) {
		select {
		case <-c.Dead():
			return false, fmt.Errorf("%s: the fleet publisher's connection died: %w", s.name, c.Err())
		default:
		}
		return pub.Acked() >= want, nil
	})
	if err == nil && afterLastAck != nil {
		afterLastAck()
	}
	close(stop)
	c.Close()
	<-returned
	res := published{Acked: pub.Acked()}
	if last := pub.LastAck(); !last.IsZero() {
		res.Elapsed = last.Sub(start)
	}
	if err == nil && res.Acked < want {
		err = fmt.Errorf("%s: %d of %d retained statuses PUBACKed within %v", s.name, res.Acked, want, timeout)
	}
	return res, err
}

// lateSubscriber subscribes to every node's status after the fleet is
// held, and counts the distinct nodes whose status it got from the pass it
// looks for.
type lateSubscriber struct {
	c     *mqttload.Client
	start time.Time
	// Owned by the client's reader goroutine.
	seen benchkit.Bitset
	// got counts the pass's nodes, first time each; other counts the rest
	// (a node's status of another pass, a repeat, another topic).
	got, other atomic.Int64
	last       atomic.Int64 // UnixNano of the last message
}

// subscribeLate connects a client id and subscribes to lateFilter at qos;
// the statuses it counts are those holding runID. A QoS 1 delivery is
// acknowledged as it is read.
func subscribeLate(s *server, id string, qos byte, runID string) (*lateSubscriber, error) {
	c, err := mqttload.Dial(mqttload.Options{Addr: s.mqttAddr, ClientID: id, Username: s.user, Password: s.pass,
		KeepAlive: 10 * time.Minute, Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%s: late subscriber: %w", s.name, err)
	}
	l := &lateSubscriber{c: c}
	marker := []byte(`"run_id":"` + runID + `"`)
	c.OnPublish = func(topic, payload []byte, _ byte, now int64) {
		l.last.Store(now)
		if i, ok := nodeIndex(topic); ok && bytes.Contains(payload, marker) && !l.seen.TestAndSet(uint64(i)) {
			l.got.Add(1)
			return
		}
		l.other.Add(1)
	}
	c.Start()
	l.start = time.Now()
	if _, err := c.Subscribe(lateFilter, qos, 60*time.Second); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: late subscriber: %w", s.name, err)
	}
	return l, nil
}

// took is the time from SUBSCRIBE to the last message; 0 for none.
func (l *lateSubscriber) took() time.Duration {
	if ns := l.last.Load(); ns != 0 {
		return time.Unix(0, ns).Sub(l.start)
	}
	return 0
}

// lateResult is what a late subscriber got.
type lateResult struct {
	Got      int64         `json:"got"`
	Expected int64         `json:"expected"`
	Other    int64         `json:"other"`
	Took     time.Duration `json:"took_ns"`
	// RSSAdded is the server's peak RSS while the subscribers were served,
	// less its RSS before they subscribed.
	RSSAdded int64 `json:"rss_added_bytes"`
}

func (r lateResult) completeness() float64 {
	if r.Expected == 0 {
		return 0
	}
	return float64(r.Got) / float64(r.Expected)
}

// late runs n late subscribers at once at qos, counting the statuses of
// the pass with runID, until each has every one of expected, or nothing
// came for p.Stall, or p.LateTimeout; it samples the server's RSS meanwhile.
// It returns one result per subscriber.
func late(ctx context.Context, s *server, p params, n int, qos byte, runID string, expected int64) ([]lateResult, error) {
	before, err := s.rss()
	if err != nil {
		return nil, err
	}
	peak := before
	subs := make([]*lateSubscriber, 0, n)
	defer func() {
		for _, l := range subs {
			l.c.Close()
		}
	}()
	for i := range n {
		l, err := subscribeLate(s, fmt.Sprintf("bench-late-%d-q%d-%d", s.starts, qos, i), qos, runID)
		if err != nil {
			return nil, err
		}
		subs = append(subs, l)
	}
	deadline := time.Now().Add(p.LateTimeout)
	err = benchkit.PollUntil(ctx, deadline, 20*time.Millisecond, s.proc, func() (bool, error) {
		if rss, err := s.rss(); err == nil && rss > peak {
			peak = rss
		}
		done := true
		for _, l := range subs {
			if l.got.Load() >= expected {
				continue
			}
			last := l.last.Load()
			if last == 0 {
				last = l.start.UnixNano()
			}
			if time.Since(time.Unix(0, last)) < p.Stall {
				done = false
			}
		}
		return done, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]lateResult, len(subs))
	for i, l := range subs {
		out[i] = lateResult{Got: l.got.Load(), Expected: expected, Other: l.other.Load(), Took: l.took(), RSSAdded: peak - before}
	}
	return out, nil
}
