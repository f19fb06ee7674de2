package outbox

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
)

func msg(i int) bus.Message {
	return bus.Message{
		Topic:   fmt.Sprintf("chef/acme/node-%d/run/start", i),
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)),
		QoS:     1,
		Retain:  i%2 == 0,
		Headers: map[string]string{bus.HeaderMsgID: fmt.Sprint("id-", i), bus.HeaderSource: "chef"},
	}
}

func open(t *testing.T, dir string, max int64) *Outbox {
	t.Helper()
	o, err := Open(dir, max, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

func TestFIFOAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	o := open(t, dir, 0)
	t0 := time.Unix(1700000000, 0)
	for i := 0; i < 10; i++ {
		if err := o.Append([]bus.Message{msg(i)}, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	head, err := o.Peek(3)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(head); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	o = open(t, dir, 0)
	if o.Len() != 7 {
		t.Fatalf("after reopen: %d entries, want 7", o.Len())
	}
	if s := o.Stats(t0.Add(20 * time.Second)); s.OldestAge != 17*time.Second {
		t.Fatalf("oldest age %v, want 17s", s.OldestAge)
	}
	all, err := o.Peek(100)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range all {
		want := msg(i + 3)
		if e.Msg.Topic != want.Topic || string(e.Msg.Payload) != string(want.Payload) || e.Msg.Retain != want.Retain ||
			e.Msg.QoS != 1 || e.Msg.Headers[bus.HeaderMsgID] != want.Headers[bus.HeaderMsgID] {
			t.Fatalf("entry %d = %+v, want %+v", i, e.Msg, want)
		}
	}
	// New appends continue after the old sequence numbers.
	if err := o.Append([]bus.Message{msg(10)}, t0); err != nil {
		t.Fatal(err)
	}
	all, _ = o.Peek(100)
	if last := all[len(all)-1]; last.Msg.Topic != msg(10).Topic || last.Seq <= all[len(all)-2].Seq {
		t.Fatalf("append after reopen: %+v", last)
	}
}

func TestMaxBytesRefusesWholeBatches(t *testing.T) {
	o := open(t, t.TempDir(), 400)
	batch := []bus.Message{msg(1), msg(2), msg(3)}
	if err := o.Append(batch, time.Now()); err != nil {
		t.Fatal(err)
	}
	err := o.Append(batch, time.Now())
	if !errors.Is(err, ErrFull) {
		t.Fatalf("second batch: %v, want ErrFull", err)
	}
	if o.Len() != 3 {
		t.Fatalf("%d entries after a refused batch, want 3 (all or none)", o.Len())
	}
	head, _ := o.Peek(3)
	if err := o.Remove(head); err != nil {
		t.Fatal(err)
	}
	if err := o.Append(batch, time.Now()); err != nil {
		t.Fatalf("after draining, append refused: %v", err)
	}
}

func TestConcurrentAppendsKeepEachSendersOrder(t *testing.T) {
	o := open(t, t.TempDir(), 0)
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				m := bus.Message{Topic: fmt.Sprintf("s/%d", s), Payload: []byte(fmt.Sprint(i))}
				if err := o.Append([]bus.Message{m}, time.Now()); err != nil {
					t.Error(err)
					return
				}
			}
		}(s)
	}
	wg.Wait()
	all, err := o.Peek(senders * each)
	if err != nil || len(all) != senders*each {
		t.Fatalf("%d entries, %v", len(all), err)
	}
	next := map[string]int{}
	for _, e := range all {
		if got := string(e.Msg.Payload); got != fmt.Sprint(next[e.Msg.Topic]) {
			t.Fatalf("sender %s: got %s, want %d", e.Msg.Topic, got, next[e.Msg.Topic])
		}
		next[e.Msg.Topic]++
	}
}

func TestClosed(t *testing.T) {
	o := open(t, t.TempDir(), 0)
	_ = o.Close()
	if err := o.Append([]bus.Message{msg(1)}, time.Now()); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(&bus.Message{Topic: "a/b", Payload: []byte("x"), Headers: map[string]string{"k": "v"}}, time.Unix(1, 0)))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decode(1, b)
		if err != nil {
			return
		}
		again, err := decode(1, encode(&e.Msg, e.EnqueuedAt))
		if err != nil || again.Msg.Topic != e.Msg.Topic || string(again.Msg.Payload) != string(e.Msg.Payload) || len(again.Msg.Headers) != len(e.Msg.Headers) {
			t.Fatalf("re-encoding changed %+v into %+v (%v)", e.Msg, again.Msg, err)
		}
	})
}
