package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// TestNATSKilledMidStreamLosesNothing is issue 6's fault test: 50,000 Gerrit
// events arrive over HTTP in NDJSON batches while the JetStream server is
// stopped and restarted twice. Senders behave as the ingest relay does: a
// 429/503 must carry Retry-After, and the batch is sent again after it. Any
// other answer but 200 fails the test. At the end the stream holds every
// event, and a consumer de-duplicating by Nats-Msg-Id sees each exactly once.
func TestNATSKilledMidStreamLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("50,000 messages through two NATS outages")
	}
	const (
		events  = 50_000
		batch   = 100
		senders = 4
	)
	ns := testnats.Start(t)
	cfg := routedConfig(t, ns.URL())
	cfg.Routes[0].OutboxMaxBytes = bytesize.MiB // the smallest allowed, so the outages fill it
	b := startBridge(t, cfg)
	url := "http://" + b.HTTPAddr() + "/gerrit/v1/events"

	var accepted, refused atomic.Int64 // events answered 200; requests answered 429/503
	batches := make(chan int, events/batch)
	for i := 0; i < events; i += batch {
		batches <- i
	}
	close(batches)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := range batches {
				if err := sendUntilAccepted(url, ndjsonBatch(first, batch), &refused); err != nil {
					errs <- err
					return
				}
				accepted.Add(batch)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Two outages, each from a point mid-stream until the outbox has filled
	// and a sender was told to retry: at either point more events are left
	// than the 1 MiB outbox holds, so it fills.
	for _, at := range []int64{events / 5, events * 3 / 5} {
		// Under -race on a busy machine the senders may take minutes to get there.
		testkit.EventuallyWithin(t, 3*time.Minute, func() bool { return accepted.Load() >= at }, "%d events accepted", at)
		refusedBefore := refused.Load()
		ns.Stop()
		testkit.EventuallyWithin(t, 3*time.Minute, func() bool { return refused.Load() > refusedBefore },
			"a sender refused during the outage at %d accepted events (the outbox full)", at)
		t.Logf("outage at %d accepted events: %d requests refused so far", at, refused.Load())
		ns.Restart()
	}
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(5 * time.Minute):
		t.Fatalf("senders stuck: %d events accepted", accepted.Load())
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if refused.Load() == 0 {
		t.Error("the outbox never filled, so the 503 path went untested: no sender was refused")
	}

	// Every accepted event reaches the stream, the outboxes drained in replay.
	testkit.EventuallyWithin(t, 3*time.Minute, func() bool { return streamMsgs(t, ns.URL()) >= events },
		"every accepted event in the stream (the outboxes replayed)")
	seen := consumeDeduplicated(t, ns.URL())
	if len(seen) != events {
		t.Fatalf("the consumer saw %d distinct messages, want %d", len(seen), events)
	}
	for seq := range events {
		if !seen[seq] {
			t.Fatalf("event %d never reached JetStream", seq)
		}
	}
}

// ndjsonBatch is n Gerrit events numbered from first, each distinct, so
// each has its own de-duplication id.
func ndjsonBatch(first, n int) string {
	var sb strings.Builder
	for seq := first; seq < first+n; seq++ {
		fmt.Fprintf(&sb, `{"type":"comment-added","project":"openstack/nova","seq":%d,"comment":"Patch Set 1: Code-Review+1"}`+"\n", seq)
	}
	return sb.String()
}

// sendUntilAccepted posts body until it gets 200. A 429 or 503 must carry
// Retry-After, which it honours; any other answer is an error.
func sendUntilAccepted(url, body string, refused *atomic.Int64) error {
	for {
		resp, err := http.Post(url, "application/x-ndjson", strings.NewReader(body))
		if err != nil {
			return fmt.Errorf("post: %w", err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return nil
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil || secs < 1 {
				return fmt.Errorf("%d without a usable Retry-After (%q): %s", resp.StatusCode, resp.Header.Get("Retry-After"), answer)
			}
			refused.Add(1)
			time.Sleep(time.Duration(secs) * time.Second) // as the sender is told
		default:
			return fmt.Errorf("answer %d: %s", resp.StatusCode, answer)
		}
	}
}

// firehoseConsumer is an ordered consumer of the FIREHOSE stream on the
// server at url, from its first message; its connection closes with the test.
func firehoseConsumer(ctx context.Context, t *testing.T, url string) jetstream.Consumer {
	t.Helper()
	js := testnats.JetStream(t, url)
	cons, err := js.OrderedConsumer(ctx, "FIREHOSE", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

// consumeDeduplicated reads the whole stream as a consumer would, dropping
// repeats by Nats-Msg-Id, and returns the event numbers it saw.
func consumeDeduplicated(t *testing.T, url string) map[int]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons := firehoseConsumer(ctx, t, url)
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := info.NumPending
	ids := map[string]bool{}
	seen := map[int]bool{}
	repeats := 0
	for read := uint64(0); read < total; {
		msgs, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			read++
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if id == "" {
				t.Fatalf("message on %s has no %s", m.Subject(), jetstream.MsgIDHeader)
			}
			if ids[id] {
				repeats++
				continue
			}
			ids[id] = true
			var ev struct{ Seq int }
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				t.Fatalf("payload %q: %v", m.Data(), err)
			}
			seen[ev.Seq] = true
		}
		if err := msgs.Error(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("stream: %d messages, %d distinct, %d repeats dropped by Nats-Msg-Id", total, len(ids), repeats)
	return seen
}
