package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/dashboard"
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
// it likes. stallingSource makes that the worst order every time: a
// subscription made at Start (the aggregator's) is handed a live message
// only after the test took its snapshot whenever a subscription made later
// (a stream's) matches it too. The check is therefore deterministic: it
// fails on every message while the aggregator and a stream are separate
// subscribers, and holds when one subscription hands each message to the
// aggregator before any stream.
func TestAStreamMessageIsInTheSnapshotItPrompts(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	mqttBus := testbus.Start(t, func(c *broker.Config) { // anonymous clients only read
		c.Users = []broker.User{{Username: "gerrit", PasswordHash: string(hash), Publish: []string{"gerrit/#"}}}
	})
	src := &stallingSource{Source: mqttBus.Broker, later: map[int]string{}, gate: make(chan struct{})}
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

	s := openStream(t, srv.URL, url.Values{"filter": {"gerrit/#"}, "payload": {"0"}}) // as the Changes view opens it
	s.next(t, "open")
	mqtt := testkit.Connect(t, mqttBus.URL, testkit.ClientOptions{Username: "gerrit", Password: "s3cret"})
	for i := range 3 {
		topic := fmt.Sprintf("gerrit/openstack/repo-%d/comment-added", i)
		if err := mqtt.Publish(topic, 1, false, `{}`); err != nil {
			t.Fatal(err)
		}
		if got := s.next(t, "message"); !strings.Contains(got, `"topic":"`+topic+`"`) {
			t.Fatalf("stream: %s, want %s", got, topic)
		}
		var snap dashboard.ChangesSnapshot
		getJSON(t, srv.URL+"/api/v1/changes", &snap)
		if len(snap.Changes) == 0 || snap.Changes[0].Topic != topic {
			newest := "none"
			if len(snap.Changes) > 0 {
				newest = snap.Changes[0].Topic
			}
			t.Errorf("the stream showed %s, but the snapshot read on it holds %d changes, the newest %s", topic, len(snap.Changes), newest)
		}
		src.release()
	}
}

// stallingSource is a Source that stalls, on a goroutine of its own, a live
// message to a subscription made before startDone until release, whenever a
// subscription made after startDone also matches it.
type stallingSource struct {
	dashboard.Source
	held sync.WaitGroup

	mu      sync.Mutex
	started bool
	later   map[int]string // subscriptions made after startDone, by id
	gate    chan struct{}  // closed by release
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
			return s.gate
		}
	}
	return nil
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
	s.mu.Unlock()
}
