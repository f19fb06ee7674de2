package retained

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/topics"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func scan(t *testing.T, s *Store, filter string) map[string]string {
	t.Helper()
	got := map[string]string{}
	var last string
	err := s.Scan(context.Background(), filter, func(m Message) error {
		if m.Topic <= last && last != "" {
			t.Errorf("scan out of order: %q after %q", m.Topic, last)
		}
		last = m.Topic
		got[m.Topic] = string(m.Value)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func put(t *testing.T, s *Store, topic, value string) uint64 {
	t.Helper()
	seq, err := s.Put(topic, 0, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func TestPutReplaceDeleteAndCount(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s := open(t, dir)
		put(t, s, "chef/o/n1/status", "a")
		put(t, s, "chef/o/n2/status", "b")
		put(t, s, "chef/o/n1/status", "c") // replaces
		if s.Len() != 2 {
			t.Fatalf("Len = %d after two topics, want 2", s.Len())
		}
		if got := scan(t, s, "chef/+/+/status"); got["chef/o/n1/status"] != "c" || got["chef/o/n2/status"] != "b" || len(got) != 2 {
			t.Fatalf("scan = %v", got)
		}
		if _, err := s.Put("chef/o/n2/status", 0, nil); err != nil { // an empty payload deletes
			t.Fatal(err)
		}
		if _, err := s.Delete("chef/o/never"); err != nil {
			t.Fatal(err)
		}
		if s.Len() != 1 {
			t.Fatalf("Len = %d after a delete, want 1", s.Len())
		}
		if got := scan(t, s, "#"); len(got) != 1 {
			t.Fatalf("scan # = %v", got)
		}
	}
}

func TestScanMatchesFiltersAcrossChunks(t *testing.T) {
	s := open(t, "")
	var all []string
	for i := range 3*scanChunk + 7 {
		for _, tail := range []string{"status", "run/start"} {
			topic := fmt.Sprintf("chef/org%d/node%04d/%s", i%3, i, tail)
			put(t, s, topic, topic)
			all = append(all, topic)
		}
	}
	put(t, s, "chef", "root")
	put(t, s, "chefx/a", "other")
	put(t, s, "ansible/playbook/u/action/start", "a")
	for _, filter := range []string{"#", "chef/#", "chef/+/+/status", "chef/org1/#", "+/+/+/status", "chef/org2/+/run/+", "chef", "chef/org1/node0001/status", "nothing/#"} {
		want := 0
		for _, topic := range append(all, "chef", "chefx/a", "ansible/playbook/u/action/start") {
			if topics.Match(filter, topic) {
				want++
			}
		}
		if got := scan(t, s, filter); len(got) != want {
			t.Errorf("scan %q: %d messages, want %d", filter, len(got), want)
		}
	}
}

func TestScanStopsAtFnError(t *testing.T) {
	s := open(t, "")
	for i := range 10 {
		put(t, s, fmt.Sprintf("t/%d", i), "x")
	}
	stop := fmt.Errorf("stop")
	n := 0
	err := s.Scan(context.Background(), "#", func(Message) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("Scan = %v after %d calls, want stop after 3", err, n)
	}
}

func TestReopenKeepsWhatWasDurable(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for i := range 1000 {
		seq = put(t, s, fmt.Sprintf("chef/o/n%d/status", i), "v")
	}
	if err := s.Durable(context.Background(), seq); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if s.Len() != 1000 || len(scan(t, s, "chef/#")) != 1000 {
		t.Fatalf("after reopening: Len %d, want 1000", s.Len())
	}
}

func TestSecondOpenSaysTheStoreIsInUse(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	_, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second Open: %v, want 'in use by another process'", err)
	}
}

func TestWhenDurableWaitsForTheSync(t *testing.T) {
	s := open(t, t.TempDir())
	seq := put(t, s, "a", "1")
	done := make(chan error, 1)
	s.WhenDurable(seq, func(err error) { done <- err })
	if err := testkit.Next(t, done); err != nil {
		t.Fatal(err)
	}
	if s.synced.Load() < seq {
		t.Fatalf("WhenDurable called before the sync: synced %d < %d", s.synced.Load(), seq)
	}
}

func TestExpiredMessagesLeave(t *testing.T) {
	s := open(t, "")
	now := time.Now().Unix()
	if _, err := s.Put("x/soon", now+1, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("x/replaced", now+1, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("x/replaced", 0, []byte("w")); err != nil { // no deadline any more
		t.Fatal(err)
	}
	put(t, s, "x/never", "v")
	if _, err := s.Put("x/past", now-1, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got := scan(t, s, "x/#"); got["x/past"] != "" {
		t.Fatalf("a Scan handed on a message past its deadline: %v", got)
	}
	testkit.Eventually(t, func() bool { return s.Len() == 2 }, "expired messages removed (Len %d)", s.Len())
	if got := scan(t, s, "x/#"); len(got) != 2 || got["x/replaced"] != "w" || got["x/never"] != "v" {
		t.Fatalf("after expiry: %v", got)
	}
}

func TestExpiredWhileClosedAreGoneAtOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("gone", time.Now().Unix()-5, []byte("v")); err != nil {
		t.Fatal(err)
	}
	put(t, s, "kept", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (the expired one removed at open)", s.Len())
	}
}

func FuzzLiteralPrefix(f *testing.F) {
	for _, s := range []string{"#", "a/#", "a/+/b", "+/a", "a/b", "a/+", "a//+/#", "/#"} {
		f.Add(s, "a/b")
	}
	f.Fuzz(func(t *testing.T, filter, topic string) {
		if topics.ValidFilter(filter) != nil || topics.ValidName(topic) != nil {
			return
		}
		if topics.Match(filter, topic) && !strings.HasPrefix(topic, literalPrefix(filter)) {
			t.Fatalf("filter %q matches %q, outside its prefix %q", filter, topic, literalPrefix(filter))
		}
	})
}

// TestCloseDuringAScan: a server shutting down closes the store while a
// subscriber's stream is in a Scan whose fn blocks on the subscriber. Close
// does not wait for fn, and the Scan then ends with ErrClosed; it read a
// closed pebble DB before, which panics.
func TestCloseDuringAScan(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range scanChunk + 1 {
		put(t, s, fmt.Sprintf("t/%05d", i), "x")
	}
	inFn, release := make(chan struct{}), make(chan struct{})
	scanned := make(chan error, 1)
	go func() {
		first := true
		scanned <- s.Scan(context.Background(), "#", func(Message) error {
			if first {
				first = false
				close(inFn)
				<-release
			}
			return nil
		})
	}()
	testkit.Next(t, inFn)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := testkit.Next(t, closed); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := testkit.Next(t, scanned); err != ErrClosed {
		t.Fatalf("Scan = %v, want ErrClosed", err)
	}
}
