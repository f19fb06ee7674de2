package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// TestScaleOutKeepsEveryAcknowledgedEventThroughAKilledBridge is issue 29's
// run over real processes: two bridges built from this module in external
// mode over Debian's mosquitto (persistence on, as the README asks) with a
// required route of everything to JetStream. Senders post Ansible events
// to the bridges in turn, failing over to the other bridge on a refused
// connection or a 503, as a load balancer would. One bridge is killed with
// SIGKILL and stays down while the senders go on, until mosquitto has
// dropped messages it queued for the dead bridge's router session: its
// max_queued_messages is 100 here, so an outage that outlasts the queue
// takes a few hundred events, not the 30 s at 400/s; what matters
// is that the queue overflowed, which the surviving bridge sees and
// reports (firehose_external_broker_dropped_messages, from mosquitto's
// $SYS count, every sys_interval of 1 s). Then the bridge restarts with the
// same client id, and the senders go on a while. Every event answered 2xx
// must be in the stream, and none twice.
//
// FIREHOSE_LONG=1 runs the issue's own scenario instead, for a person to
// try (about a minute; CI runs the short one): mosquitto's default
// max_queued_messages (1000), senders paced at 400 events a second in all,
// and the bridge down 30 s after its kill (and until the drop is seen).
// The figures (answered 2xx, in the stream, lost, duplicates) are logged
// either way, with -v.
func TestScaleOutKeepsEveryAcknowledgedEventThroughAKilledBridge(t *testing.T) {
	long := os.Getenv("FIREHOSE_LONG") == "1"
	queue, outage, pace := "max_queued_messages 100", time.Duration(0), time.Duration(0)
	if long {
		queue, outage, pace = "max_queued_messages 1000", 30*time.Second, time.Second/400
	}
	s := startScaleOut(t, "persistent_client_expiration 1h", queue, "sys_interval 1")

	// The senders: each takes the next event and posts it until a bridge
	// answers 2xx, starting with the next bridge in turn.
	var (
		next, acked, refused atomic.Int64
		mu                   sync.Mutex
		ackedIDs             = map[string]bool{}
		stop                 = make(chan struct{})
		wg                   sync.WaitGroup
	)
	var tick <-chan time.Time
	if pace > 0 {
		ticker := time.NewTicker(pace)
		defer ticker.Stop()
		tick = ticker.C
	}
	client := &http.Client{Timeout: testkit.Timeout}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if tick != nil {
					select {
					case <-stop:
						return
					case <-tick:
					}
				}
				select {
				case <-stop:
					return
				default:
				}
				n := next.Add(1)
				id, body := ansibleEvent(n)
				for try := n; ; try++ {
					url := "http://" + s.bridges[try%2].http + "/ansible/v1/events"
					resp, err := client.Post(url, "application/json", bytes.NewReader(body))
					if err == nil {
						answer, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode/100 == 2 {
							break
						}
						if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests {
							t.Errorf("event %s: %s answered %d: %s", id, url, resp.StatusCode, answer)
							return
						}
					}
					refused.Add(1)
					select {
					case <-stop:
						return // never answered 2xx: nothing promised
					default:
					}
				}
				mu.Lock()
				ackedIDs[id] = true
				mu.Unlock()
				acked.Add(1)
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitAcked := func(n int64, what string) {
		t.Helper()
		testkit.EventuallyWithin(t, 4*testkit.WaitTimeout, func() bool { return acked.Load() >= n || t.Failed() }, "%d events answered 2xx %s", n, what)
		if t.Failed() {
			t.FailNow()
		}
	}
	waitAcked(200, "before the kill")

	killed, survivor := s.bridges[1], s.bridges[0]
	killed.proc.Kill()
	back := time.Now().Add(outage)
	t.Logf("killed bridge-2 after %d events answered 2xx", acked.Load())
	testkit.EventuallyWithin(t, 4*testkit.WaitTimeout, func() bool {
		return scrape(t, survivor.http, "firehose_external_broker_dropped_messages") > 0
	}, "mosquitto to drop messages queued for the dead bridge, and the surviving bridge to report it")
	// The gauge is set before the drop is logged: wait for the line.
	testkit.EventuallyWithin(t, 4*testkit.WaitTimeout, func() bool {
		return strings.Contains(survivor.proc.Output(), "max_queued_messages")
	}, "the surviving bridge to log the setting that makes mosquitto drop")
	resp, err := http.Get("http://" + survivor.http + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	readyz, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(readyz), "max_queued_messages") {
		t.Errorf("/readyz does not warn of the drops: %s", readyz)
	}
	if long {
		<-time.After(time.Until(back)) // the outage: a scenario, not a condition
	}
	down := acked.Load()
	t.Logf("mosquitto dropped %v messages; %d events answered 2xx so far", scrape(t, survivor.http, "firehose_external_broker_dropped_messages"), down)

	s.start(killed)
	waitAcked(down+200, "after the restart")
	close(stop)
	wg.Wait()

	mu.Lock()
	want := len(ackedIDs)
	mu.Unlock()
	seen := streamCount(t, s.nats, ackedIDs, func(m jetstream.Msg) string {
		return m.Headers().Get(jetstream.MsgIDHeader) // the Ansible adapter's de-duplication id is the event's event_id
	})
	var missing []string
	for id := range ackedIDs {
		if seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	twice := 0
	for id, n := range seen {
		if n > 1 {
			twice++
			t.Errorf("event %s is in the stream %d times", id, n)
		}
	}
	t.Logf("answered 2xx %d, in the stream %d, lost %d, duplicates %d (%d refused or failed over attempts)",
		want, want-len(missing), len(missing), twice, refused.Load())
	if len(missing) > 0 {
		t.Fatalf("%d of %d events answered 2xx are not in the stream, e.g. %v", len(missing), want, missing[:min(5, len(missing))])
	}
}

// TestScaleOutRoutesMQTTPublishersThroughAKilledBridge: what a third-party
// MQTT publisher publishes on the external broker, at QoS 1 and QoS 0,
// reaches the stream whole through a bridge killed with SIGKILL, with
// mosquitto set as the README's broker table asks. The dead bridge's share
// of the shared subscription waits in its session, and is routed when the
// bridge is back with the same client id. Without queue_qos0_messages,
// mosquitto drops that share's QoS 0 messages (150 of 600 here), and counts
// none of them in $SYS/broker/publish/messages/dropped; with
// max_queued_messages 100, it drops QoS 1 messages too.
func TestScaleOutRoutesMQTTPublishersThroughAKilledBridge(t *testing.T) {
	const n = 600
	// The README's settings for mosquitto (Scaling out), persistence aside.
	s := startScaleOut(t, "persistent_client_expiration 1h", "max_queued_messages 0", "max_queued_bytes 0", "queue_qos0_messages true")
	killed := s.bridges[1]
	killed.proc.Kill()

	pub := testkit.Connect(t, s.mosq.URL(), testkit.ClientOptions{})
	want := map[string]bool{}
	for i := range n {
		payload := fmt.Sprintf(`{"reading":%d}`, i)
		want[payload] = true
		if err := pub.Publish(fmt.Sprintf("sensors/%d/temp", i%7), byte(i/2%2), false, payload); err != nil {
			t.Fatal(err)
		}
	}
	s.start(killed)
	seen := streamCount(t, s.nats, want, func(m jetstream.Msg) string { return string(m.Data()) })
	var missing []string
	twice := 0
	for p := range want {
		switch {
		case seen[p] == 0:
			missing = append(missing, p)
		case seen[p] > 1:
			twice++ // at-least-once: a redelivery gets a new id
		}
	}
	t.Logf("published %d (half at QoS 0), in the stream %d, lost %d, duplicates %d", n, n-len(missing), len(missing), twice)
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Fatalf("%d of %d messages published while a bridge was down are not in the stream, e.g. %v", len(missing), n, missing[:min(5, len(missing))])
	}
}

// scaleOut is issue 29's set-up: Debian's mosquitto with persistence on, a
// JetStream server, and two bridges built from this module in external
// mode, each with a required route of everything to one stream.
type scaleOut struct {
	t       *testing.T
	bin     string
	mosq    *testkit.Mosquitto
	nats    string // the JetStream server's URL
	bridges []*scaleBridge
}

type scaleBridge struct {
	cfg, http string
	proc      *testkit.Process
}

// startScaleOut starts mosquitto (with mosquittoLines besides persistence),
// JetStream and both bridges, and waits until both are ready.
func startScaleOut(t *testing.T, mosquittoLines ...string) *scaleOut {
	s := &scaleOut{t: t, bin: testkit.BuildBinary(t, "./cmd/bridge")}
	lines := append([]string{"persistence true", "persistence_location " + t.TempDir() + "/"}, mosquittoLines...)
	if u, err := user.Current(); err == nil {
		lines = append(lines, "user "+u.Username) // as root, mosquitto would drop to a user that cannot write the test's directory
	}
	s.mosq = testkit.StartMosquitto(t, lines...)
	s.nats = testnats.Start(t).URL()
	for i := range 2 {
		dir := t.TempDir()
		b := &scaleBridge{cfg: filepath.Join(dir, "bridge.yaml"), http: testkit.FreePort(t)}
		if err := os.WriteFile(b.cfg, []byte(fmt.Sprintf(`
log: {level: info, format: json}
data_dir: %s
http: {address: "%s"}
dashboard: {enabled: false}
configdb: {enabled: false}
broker:
  mode: external
  external: {url: "%s", client_id: bridge-%d, max_reconnect_interval: 200ms}
sinks:
  js:
    type: jetstream
    urls: [%s]
    stream: {name: FIREHOSE, create: true, subjects: ["firehose.>"]}
routes:
  - {name: all, filters: ["#"], sink: js}
`, filepath.Join(dir, "data"), b.http, s.mosq.URL(), i+1, s.nats)), 0o600); err != nil {
			t.Fatal(err)
		}
		s.bridges = append(s.bridges, b)
		s.start(b)
	}
	return s
}

// start starts b's process and waits until its /readyz answers 200.
func (s *scaleOut) start(b *scaleBridge) {
	s.t.Helper()
	b.proc = testkit.Start(s.t, "", s.bin, "--config", b.cfg)
	testkit.WaitHTTP(s.t, b.proc, "http://"+b.http+"/readyz")
}

// ansibleEvent is the n-th event of the senders: its event_id, and its JSON.
func ansibleEvent(n int64) (string, []byte) {
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
	body, _ := json.Marshal(map[string]any{"ansible_result": map[string]bool{"changed": false},
		"event_id": id, "status": "OK", "host": "controller", "ansible_host": fmt.Sprintf("node-%d", n%50),
		"session": "8485e65b-dfad-44b1-866b-57b9861acadf", "ansible_type": "task", "playbook_id": "ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d", "playbook_name": "scale-out", "ansible_task": "TASK: ping",
	})
	return id, body
}

// scrape is the sum of a metric's samples on the bridge's /metrics.
func scrape(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			f := strings.Fields(rest)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// streamCount reads the stream from the start until every key of want is
// seen and nothing is left, or a deadline passes, and counts the messages
// of each key.
func streamCount(t *testing.T, url string, want map[string]bool, key func(jetstream.Msg) string) map[string]int {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*testkit.WaitTimeout)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "FIREHOSE", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	found := 0
	pending := uint64(1)
	for (found < len(want) || pending > 0) && ctx.Err() == nil {
		msgs, err := cons.Fetch(1000, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		pending = 0
		for m := range msgs.Messages() {
			if md, err := m.Metadata(); err == nil {
				pending = md.NumPending
			}
			k := key(m)
			if seen[k]++; seen[k] == 1 && want[k] {
				found++
			}
		}
		if err := msgs.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
	}
	return seen
}
