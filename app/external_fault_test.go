package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// TestExternalModeManualAcksThroughAJetStreamOutage runs one bridge in
// external mode against Debian's mosquitto (with persistence, as the README
// asks of the broker), with a required route of everything to JetStream.
// A real MQTT client publishes 3,000 distinct QoS 1 messages; the JetStream
// server is stopped partway, publishing goes on, and the server comes back.
// The bridge acknowledges a message to mosquitto only once it is safe (in
// the stream or in the route's outbox), so the stream ends up holding every
// message. A duplicate is allowed (at-least-once) and counted; a missing
// message fails the test.
func TestExternalModeManualAcksThroughAJetStreamOutage(t *testing.T) {
	const n = 3000
	mosq := testkit.StartMosquitto(t, mosquittoPersistence(t)...)
	srv := testnats.Start(t)
	js := routedConfig(t, srv.URL()).Sinks["js"]
	cfg := externalConfig(t, mosq.URL(), "bridge-outage", js, "#")
	b := startBridge(t, cfg)
	waitFor(t, "the external broker, the shared subscription and the sink", func() bool {
		return b.external.Ready() && b.subscriber.Ready() == nil && len(b.router.Ready()) == 0
	})

	pub := testkit.Connect(t, mosq.URL(), testkit.ClientOptions{})
	// publish sends messages [from, to) without waiting for each, so many are
	// in flight at once, then waits for mosquitto's PUBACKs.
	publish := func(from, to int) {
		t.Helper()
		tokens := make([]interface {
			WaitTimeout(time.Duration) bool
			Error() error
		}, 0, to-from)
		for i := from; i < to; i++ {
			tokens = append(tokens, pub.Client.Publish(fmt.Sprintf("sensors/%d/temp", i%7), 1, false, payloadOf(i)))
		}
		for i, tok := range tokens {
			if !tok.WaitTimeout(testkit.Timeout) {
				t.Fatalf("mosquitto did not acknowledge message %d", from+i)
			}
			if err := tok.Error(); err != nil {
				t.Fatalf("publishing message %d: %v", from+i, err)
			}
		}
	}

	// A first third, and the outage once routing is under way.
	publish(0, n/3)
	waitFor(t, "the first messages in the stream", func() bool { return streamMsgs(t, srv.URL()) >= n/6 })
	srv.Stop()
	waitFor(t, "the bridge to see the sink down", func() bool { return !b.sinks["out"].Ready() })

	// A second third while JetStream is down: the bridge keeps it in the
	// outbox, and only then acknowledges it to mosquitto. (Were the route
	// optional, it would drop it, and count it as dropped.)
	publish(n/3, 2*n/3)
	waitFor(t, "the second third routed during the outage", func() bool {
		return metricValue(t, b, "firehose_route_messages_total", "result", "outboxed")+
			metricValue(t, b, "firehose_route_messages_total", "result", "dropped") >= n/3
	})

	// The last third while JetStream comes back and the outbox replays.
	srv.Restart()
	publish(2*n/3, n)

	seen, dups, others := consumeByPayload(t, srv.URL(), n)
	var missing []int
	for i := range n {
		if seen[payloadOf(i)] == 0 {
			missing = append(missing, i)
		}
	}
	t.Logf("stream: %d distinct of %d messages, %d duplicates; %v outboxed, %v replayed",
		len(seen), n, dups,
		metricValue(t, b, "firehose_route_messages_total", "result", "outboxed"),
		metricValue(t, b, "firehose_outbox_replayed_total", "", ""))
	if others > 0 {
		t.Errorf("the stream holds %d messages that were never published", others)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d messages never reached JetStream; the first: %v", len(missing), n, missing[:min(10, len(missing))])
	}
	if metricValue(t, b, "firehose_outbox_replayed_total", "", "") == 0 {
		t.Fatal("nothing was replayed from the outbox: the outage did not exercise the outbox path")
	}
}

func payloadOf(i int) string { return fmt.Sprintf("reading-%05d", i) }

// mosquittoPersistence is mosquitto config that keeps sessions and their
// QoS 1 messages on disk. Run as root, mosquitto would drop to the user
// mosquitto, which cannot write a test's temporary directory; naming the
// current user keeps it (the setting is ignored when not run as root).
func mosquittoPersistence(t *testing.T) []string {
	t.Helper()
	lines := []string{"persistence true", "persistence_location " + t.TempDir() + "/"}
	if u, err := user.Current(); err == nil {
		lines = append(lines, "user "+u.Username)
	}
	return lines
}

// metricValue is the sum of the bridge's samples of a counter or gauge,
// those with label=value when label is set.
func metricValue(t *testing.T, b *Bridge, name, label, value string) float64 {
	t.Helper()
	families, err := b.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					match = true
				}
			}
			if !match {
				continue
			}
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			} else if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

// consumeByPayload reads the stream as a consumer would, from the start,
// until it has seen want distinct payloads or a deadline passes; it returns
// how often each payload arrived, how many arrivals were repeats, and how
// many messages carried a payload that was never published.
func consumeByPayload(t *testing.T, url string, want int) (seen map[string]int, dups, others int) {
	t.Helper()
	published := make(map[string]bool, want)
	for i := range want {
		published[payloadOf(i)] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	cons := firehoseConsumer(ctx, t, url)
	seen = make(map[string]int, want)
	// Meanwhile the sink reconnects and the outbox replays.
	deadline := time.Now().Add(testkit.Timeout)
	// pending is what the stream held beyond the last message read, so that
	// repeats stored after the last distinct message are counted too.
	pending := uint64(0)
	for (len(seen) < want || pending > 0) && time.Now().Before(deadline) {
		msgs, err := cons.Fetch(1000, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			if md, err := m.Metadata(); err == nil {
				pending = md.NumPending
			}
			p := string(m.Data())
			if !published[p] {
				others++
				continue
			}
			seen[p]++
			if seen[p] > 1 {
				dups++
				t.Logf("duplicate: %s (%s %s)", p, jetstream.MsgIDHeader, m.Headers().Get(jetstream.MsgIDHeader))
			}
		}
		if err := msgs.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
	}
	return seen, dups, others
}

// TestExternalModeReportsASessionTheBrokerLost: a bridge whose router
// session the broker no longer has at its next start (mosquitto without
// persistence, restarted meanwhile: what it queued for the bridge is gone)
// says so in its metrics and in /readyz, which stays 200. A first start, with
// no session before, is not reported.
func TestExternalModeReportsASessionTheBrokerLost(t *testing.T) {
	mosq := testkit.StartMosquitto(t)
	srv := testnats.Start(t)
	cfg := externalConfig(t, mosq.URL(), "bridge-session", coreSink(srv.URL()), "events/#")
	first := startBridge(t, cfg)
	waitSubscribed(t, first, nil)
	waitFor(t, "the session noted", func() bool {
		_, err := os.Stat(filepath.Join(cfg.DataDir, "mqtt", "bridge-session-router.session"))
		return err == nil
	})
	if n := metricValue(t, first, "firehose_external_sessions_lost_total", "", ""); n != 0 {
		t.Fatalf("a first start reported %v lost sessions", n)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mosq.Restart() // persistence false: the session is gone

	second := startBridge(t, cfg)
	waitSubscribed(t, second, nil)
	waitFor(t, "the lost session reported", func() bool {
		return metricValue(t, second, "firehose_external_sessions_lost_total", "", "") == 1
	})
	waitFor(t, "/readyz to answer 200 with a warning of the lost session", func() bool {
		code, body := testkit.Get(t, "http://"+second.HTTPAddr()+"/readyz")
		return code == 200 && strings.Contains(body, "persistent_client_expiration")
	})
}
