package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/dashboard"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/topics"
)

// When a stream shows a message, a snapshot asked for then holds it: the
// page refreshes a view on its stream's message, and a snapshot without it
// leaves the view a message behind until the next one.
//
// The broker calls inline subscribers one after another in map order, and
// a busy machine may stall the publisher between two of them for as long as
// it likes. stallingSource makes that the worst order every time: it holds
// back a live message to the subscriptions made at Start (the aggregator's)
// whenever a subscription made later (a stream's) matches it too, until the
// test releases it. The checks are deterministic:
//   - while the aggregator's copy of a Gerrit message is held, and once the
//     stream's own subscription has been called with it, the stream's next
//     message is a later one on a topic no view aggregates: a stream must
//     not show a message before the aggregator is handed it;
//   - once released, the stream shows it, and a snapshot read then holds it.
//
// Both fail on every message while the aggregator and a stream are separate
// subscribers that each deliver the message.
func TestAStreamMessageIsInTheSnapshotItPrompts(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	mqttBus := testbus.Start(t, func(c *broker.Config) { // anonymous clients only read
		c.Users = []credentials.User{{Username: "gerrit", PasswordHash: string(hash), Publish: []string{"gerrit/#", "other/#"}}}
	})
	src := &stallingSource{Source: mqttBus.Broker, later: map[int]string{}, gate: make(chan struct{}), called: map[string]int{}}
	d, err := dashboard.New(dashboard.DefaultConfig(), dashboard.Options{Source: src, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)                                    // after the streams end,
	t.Cleanup(func() { _ = d.Close(context.Background()) }) // which Close ends,
	t.Cleanup(func() { src.release(); src.held.Wait() })    // after the stalled deliveries
	if err := d.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	src.startDone()

	// As the Changes view opens it, plus a topic no view aggregates.
	s := openStream(t, srv.URL, url.Values{"filter": {"gerrit/#", "other/#"}, "payload": {"0"}})
	s.next(t, "open")
	mqtt := testkit.Connect(t, mqttBus.URL, testkit.ClientOptions{Username: "gerrit", Password: "s3cret"})
	publish := func(topic string) {
		t.Helper()
		if err := mqtt.Publish(topic, 1, false, `{}`); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(topic, why string) {
		t.Helper()
		if got := s.next(t, "message"); !strings.Contains(got, `"topic":"`+topic+`"`) {
			t.Fatalf("the stream's next message: %s, want %s (%s)", got, topic, why)
		}
	}
	for i := range 3 {
		topic := fmt.Sprintf("gerrit/openstack/repo-%d/comment-added", i)
		publish(topic)
		testkit.Eventually(t, func() bool { return src.heldFor(topic) && src.calledWith(topic) },
			"the aggregator's copy of %s held, and the stream's own subscription called with it", topic)
		later := fmt.Sprintf("other/%d", i)
		publish(later)
		expect(later, "the stream showed "+topic+" before the aggregator was handed it")
		src.release()
		expect(topic, "released")
		var snap dashboard.ChangesSnapshot
		getJSON(t, srv.URL+"/api/v1/changes", &snap)
		if len(snap.Changes) == 0 || snap.Changes[0].Topic != topic {
			newest := "none"
			if len(snap.Changes) > 0 {
				newest = snap.Changes[0].Topic
			}
			t.Errorf("the stream showed %s, but the snapshot read on it holds %d changes, the newest %s", topic, len(snap.Changes), newest)
		}
	}
}

// stallingSource is a Source that stalls, on a goroutine of its own, a live
// message to a subscription made before startDone until release, whenever a
// subscription made after startDone also matches it. It records the topics
// it stalled, and those a later subscription's function has returned from.
type stallingSource struct {
	dashboard.Source
	held sync.WaitGroup

	mu      sync.Mutex
	started bool
	later   map[int]string // subscriptions made after startDone, by id
	gate    chan struct{}  // closed by release
	stalled []string       // topics stalled since the last release
	called  map[string]int // topics by calls of a later subscription's function
}

func (s *stallingSource) Subscribe(id int, filter string, fn func(bus.Message)) (func(), error) {
	s.mu.Lock()
	early := !s.started
	if !early {
		s.later[id] = filter
	}
	s.mu.Unlock()
	unsub, err := s.Source.Subscribe(id, filter, func(m bus.Message) {
		if gate := s.stall(early, m); gate != nil {
			m.Payload = bytes.Clone(m.Payload)
			s.held.Add(1)
			go func() {
				defer s.held.Done()
				<-gate
				fn(m)
			}()
			return
		}
		fn(m)
		if !early {
			s.mu.Lock()
			s.called[m.Topic]++
			s.mu.Unlock()
		}
	})
	if err != nil {
		return nil, err
	}
	return func() {
		s.mu.Lock()
		delete(s.later, id)
		s.mu.Unlock()
		unsub()
	}, nil
}

func (s *stallingSource) stall(early bool, m bus.Message) chan struct{} {
	if !early || m.Retain {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.later {
		if topics.Match(f, m.Topic) {
			s.stalled = append(s.stalled, m.Topic)
			return s.gate
		}
	}
	return nil
}

func (s *stallingSource) heldFor(topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.stalled, topic)
}

func (s *stallingSource) calledWith(topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.called[topic] > 0
}

func (s *stallingSource) startDone() {
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
}

// release hands the stalled messages over, and stalls the next ones anew.
func (s *stallingSource) release() {
	s.mu.Lock()
	close(s.gate)
	s.gate = make(chan struct{})
	s.stalled = nil
	s.mu.Unlock()
}
