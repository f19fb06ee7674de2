package router_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
	"github.com/opsfirehose/firehose/router"
	"github.com/opsfirehose/firehose/sinks"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
	"github.com/opsfirehose/firehose/topics"
)

func sinkConfig(typ, url string) natssink.Config {
	c := *natssink.NewConfig(natssink.TypeNATS)
	c.Type, c.URLs, c.ConfirmTimeout = typ, []string{url}, 2*time.Second
	if typ == natssink.TypeJetStream {
		c.Stream = &natssink.StreamConfig{}
		c.Stream.SetDefaults()
		c.Stream.Name, c.Stream.Create, c.Stream.Subjects = "FIREHOSE", true, []string{"firehose.>"}
	}
	return c
}

func route(name, sink string, filters ...string) router.Config {
	var c router.Config
	c.SetDefaults()
	c.Name, c.Sink, c.Filters = name, sink, filters
	return c
}

type fixture struct {
	router *router.Router
	reg    *prometheus.Registry
	sinks  map[string]sinks.Sink
	logs   *testkit.SyncBuffer // the router's log
}

func newRouter(t testing.TB, dataDir string, routes []router.Config, sinkCfgs map[string]natssink.Config) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry(), sinks: map[string]sinks.Sink{}, logs: &testkit.SyncBuffer{}}
	for name, c := range sinkCfgs {
		// The sinks log where the router does: a failing test shows why a
		// sink stayed down.
		s, err := natssink.NewNATS(name, c, zerolog.New(f.logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		f.sinks[name] = s
	}
	for i := range routes {
		if err := routes[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := router.New(routes, f.sinks, router.Options{DataDir: dataDir, Logger: zerolog.New(f.logs), Registerer: f.reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	t.Cleanup(func() {
		if t.Failed() {
			for name, s := range f.sinks {
				t.Logf("sink %s: ready %v, not ready because %q", name, s.Ready(), s.NotReadyReason())
			}
			t.Logf("router and sink log:\n%s", f.logs.String())
		}
	})
	f.router = r
	return f
}

func waitReady(t *testing.T, s sinks.Sink) {
	t.Helper()
	testkit.Eventually(t, s.Ready, "sink %s to be ready", s.Name())
}

// waitDown waits until the sink has noticed that its server is gone.
func waitDown(t *testing.T, s sinks.Sink) {
	t.Helper()
	testkit.Eventually(t, func() bool { return !s.Ready() }, "sink %s to notice its server is gone", s.Name())
}

func subscribe(t *testing.T, url, subject string) <-chan *nats.Msg {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ch := make(chan *nats.Msg, 100000)
	if _, err := nc.ChanSubscribe(subject, ch); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

func nextMsg(t *testing.T, ch <-chan *nats.Msg) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(testkit.Timeout):
		t.Fatal("nothing arrived on NATS")
		return nil
	}
}

func msg(topic, payload string) bus.Message {
	return bus.NewMessage("test", topic+"|"+payload, topic, []byte(payload), time.Now())
}

func TestFiltersWhereAndSubjectMapping(t *testing.T) {
	srv := testnats.Start(t)
	failures := route("failures", "core", "chef/+/+/run/failure")
	failures.Where = map[string]any{"policy_group": []any{"prod", "staging"}, "attempt": 1}
	tasks := route("tasks", "core", "ansible/playbook/+/task/#")
	tasks.SubjectPrefix = "fh.dc1"
	renamed := route("renamed", "core", "gerrit/#")
	renamed.Rewrite = &router.Rewrite{From: "gerrit", To: "review/gerrit"}
	f := newRouter(t, t.TempDir(), []router.Config{failures, tasks, renamed}, map[string]natssink.Config{"core": sinkConfig(natssink.TypeNATS, srv.URL())})
	waitReady(t, f.sinks["core"])
	got := subscribe(t, srv.URL(), ">")

	in := []bus.Message{
		msg("chef/acme/web1/run/failure", `{"policy_group":"prod","attempt":1}`),
		msg("chef/acme/web2/run/failure", `{"policy_group":"dev","attempt":1}`),     // where: not in the list
		msg("chef/acme/web3/run/failure", `{"policy_group":"staging","attempt":2}`), // where: wrong number
		msg("chef/acme/web4/run/failure", `not json`),                               // where cannot hold
		msg("chef/acme/web5/run/success", `{"policy_group":"prod","attempt":1}`),    // filter
		msg("ansible/playbook/p1/task/web.example.com/OK", `{}`),
		msg("ansible/playbook/p1/task/my host/FAILED", `{}`),
		msg("ansible/playbook/p1/task/*/OK", `{}`),
		msg("ansible/playbook/p1/task/>/OK", `{}`),
		msg("ansible/playbook/p1/task/a%2Fb/OK", `{}`),
		msg("gerrit/openstack/nova/comment-added", `{}`),
	}
	if err := f.router.Route(context.Background(), in...); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"firehose.chef.acme.web1.run.failure":                  true,
		"fh.dc1.ansible.playbook.p1.task.web//example//com.OK": true,
		"fh.dc1.ansible.playbook.p1.task.my%20host.FAILED":     true,
		"fh.dc1.ansible.playbook.p1.task.%2A.OK":               true,
		"fh.dc1.ansible.playbook.p1.task.%3E.OK":               true,
		"fh.dc1.ansible.playbook.p1.task.a%2Fb.OK":             true,
		"firehose.review.gerrit.openstack.nova.comment-added":  true,
	}
	for n := len(want); n > 0; n-- {
		m := nextMsg(t, got)
		if !want[m.Subject] {
			t.Fatalf("unexpected subject %q", m.Subject)
		}
		delete(want, m.Subject)
		if m.Header.Get(bus.HeaderMsgID) == "" || m.Header.Get(bus.HeaderSource) != "test" {
			t.Errorf("%s: headers %v", m.Subject, m.Header)
		}
	}
	// A marker routed after everything proves nothing else was sent.
	if err := f.router.Route(context.Background(), msg("gerrit/end", "{}")); err != nil {
		t.Fatal(err)
	}
	if m := nextMsg(t, got); m.Subject != "firehose.review.gerrit.end" {
		t.Fatalf("unexpected subject %q before the marker", m.Subject)
	}
	if v := metricValue(t, f.reg, "firehose_route_messages_total", "tasks", "delivered"); v != 5 {
		t.Errorf("tasks delivered = %v, want 5", v)
	}
}

func TestRequiredRouteBuffersThroughAnOutageAndReplaysInOrder(t *testing.T) {
	srv := testnats.Start(t)
	dir := t.TempDir()
	f := newRouter(t, dir, []router.Config{route("all", "js", "#")}, map[string]natssink.Config{"js": sinkConfig(natssink.TypeJetStream, srv.URL())})
	waitReady(t, f.sinks["js"])
	if err := f.router.Route(context.Background(), msg("a/b", "before")); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	waitDown(t, f.sinks["js"])
	if down := f.router.Ready(); down["route all"] == "" {
		t.Fatalf("Ready() = %v, want route all reported down", down)
	}
	// A sink known to be down is not waited for: a Route that waited its 2s
	// confirm timeout per message would take ten minutes, far past ctx.
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitTimeout)
	defer cancel()
	for i := 0; i < 300; i++ {
		if err := f.router.Route(ctx, msg("a/b", fmt.Sprint(i))); err != nil {
			t.Fatalf("message %d refused during the outage (a sink known to be down must not be waited for): %v", i, err)
		}
	}
	if v := gauge(t, f.reg, "firehose_outbox_messages", "all"); v != 300 {
		t.Fatalf("outbox depth %v, want 300", v)
	}

	srv.Restart()
	js := testnats.JetStream(t, srv.URL())
	cons, err := js.OrderedConsumer(context.Background(), "FIREHOSE", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{"before"}, func() []string {
		var s []string
		for i := 0; i < 300; i++ {
			s = append(s, fmt.Sprint(i))
		}
		return s
	}()...)
	for i, w := range want {
		m, err := cons.Next(jetstream.FetchMaxWait(testkit.Timeout))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(m.Data()) != w {
			t.Fatalf("message %d is %q, want %q: the replay is out of order", i, m.Data(), w)
		}
	}
	waitOutboxDrained(t, f, "all")
	if v := metricValue(t, f.reg, "firehose_outbox_replayed_total", "all", ""); v != 300 {
		t.Errorf("replayed = %v, want 300", v)
	}
	// Replayed messages are delivered messages too (issue 16, row 6).
	if v := metricValue(t, f.reg, "firehose_route_messages_total", "all", "delivered"); v != 301 {
		t.Errorf("delivered = %v, want 301 (1 at once, 300 replayed)", v)
	}
	// One line for the whole drain, however many batches it took.
	testkit.Eventually(t, func() bool { return strings.Contains(f.logs.String(), "replayed 300 messages to route all after ") },
		"the drain's log line; the log is:\n%s", f.logs)
	if n := strings.Count(f.logs.String(), "replayed "); n != 1 {
		t.Errorf("%d replay lines, want 1:\n%s", n, f.logs)
	}
}

func TestFullOutboxRefusesWithUnavailable(t *testing.T) {
	srv := testnats.Start(t)
	r := route("all", "js", "#")
	r.OutboxMaxBytes = bytesize.MiB
	f := newRouter(t, t.TempDir(), []router.Config{r}, map[string]natssink.Config{"js": sinkConfig(natssink.TypeJetStream, srv.URL())})
	waitReady(t, f.sinks["js"])
	srv.Stop()
	waitDown(t, f.sinks["js"])
	big := strings.Repeat("x", 300<<10)
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		err = f.router.Route(context.Background(), msg("a/b", big))
	}
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("err = %v, want bus.ErrUnavailable once the outbox is full", err)
	}
	if v := metricValue(t, f.reg, "firehose_route_messages_total", "all", "refused"); v != 1 {
		t.Errorf("refused = %v, want 1", v)
	}
}

func TestOptionalRouteDropsAndCounts(t *testing.T) {
	srv := testnats.Start(t)
	r := route("best-effort", "core", "#")
	r.Required = false
	f := newRouter(t, t.TempDir(), []router.Config{r}, map[string]natssink.Config{"core": sinkConfig(natssink.TypeNATS, srv.URL())})
	waitReady(t, f.sinks["core"])
	srv.Stop()
	waitDown(t, f.sinks["core"])
	for i := 0; i < 5; i++ {
		if err := f.router.Route(context.Background(), msg("a/b", "x")); err != nil {
			t.Fatalf("an optional route must never refuse: %v", err)
		}
	}
	testkit.Eventually(t, func() bool { // the optional sender is asynchronous
		return metricValue(t, f.reg, "firehose_route_messages_total", "best-effort", "dropped") == 5
	}, "the 5 dropped messages to be counted")
}

func TestOutboxSurvivesARestartOfTheRouter(t *testing.T) {
	srv := testnats.Start(t)
	dir := t.TempDir()
	cfgs := map[string]natssink.Config{"js": sinkConfig(natssink.TypeJetStream, srv.URL())}
	f := newRouter(t, dir, []router.Config{route("all", "js", "#")}, cfgs)
	waitReady(t, f.sinks["js"])
	srv.Stop()
	waitDown(t, f.sinks["js"])
	for i := 0; i < 10; i++ {
		if err := f.router.Route(context.Background(), msg("a/b", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.router.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	srv.Restart()
	newRouter(t, dir, []router.Config{route("all", "js", "#")}, cfgs) // replays in the background
	js := testnats.JetStream(t, srv.URL())
	testkit.Eventually(t, func() bool { // the stream exists once the replay created it
		st, err := js.Stream(context.Background(), "FIREHOSE")
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 10
	}, "the outbox from before the restart to be replayed (10 messages in the stream)")
}

// waitOutboxDrained polls until the route's replayer has emptied its outbox.
func waitOutboxDrained(t *testing.T, f *fixture, route string) {
	t.Helper()
	testkit.Eventually(t, func() bool { return gauge(t, f.reg, "firehose_outbox_messages", route) == 0 },
		"the outbox of route %s to drain", route)
}

func gauge(t *testing.T, reg *prometheus.Registry, name, route string) float64 {
	t.Helper()
	return metricValue(t, reg, name, route, "")
}

func metricValue(t *testing.T, reg *prometheus.Registry, name, route, result string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" && l.GetValue() != route || l.GetName() == "result" && l.GetValue() != result {
					continue metric
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return 0
}

// TestJetStreamClusterNodeLoss routes into an R3 stream on a three-node
// cluster and kills one node mid-run: nothing is lost, and the consumer sees
// no duplicate.
func TestJetStreamClusterNodeLoss(t *testing.T) {
	cluster := testnats.StartCluster(t)
	sc := sinkConfig(natssink.TypeJetStream, cluster.URLs()[0])
	sc.URLs = cluster.URLs()
	sc.ConfirmTimeout = 5 * time.Second
	sc.Stream.Replicas = 3
	f := newRouter(t, t.TempDir(), []router.Config{route("all", "js", "#")}, map[string]natssink.Config{"js": sc})
	// Ready once the R3 stream exists: another election, which on a busy
	// machine may take longer than Eventually's bound.
	testkit.EventuallyWithin(t, 4*testkit.WaitTimeout, f.sinks["js"].Ready, "sink js to be ready (its R3 stream made)")

	const n = 3000
	errs := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := f.router.Route(context.Background(), bus.NewMessage("test", fmt.Sprint("m-", i), "a/b", []byte(fmt.Sprint(i)), time.Now())); err != nil {
				errs <- err
				return
			}
			if i == n/3 {
				cluster.Servers[0].Stop()
			}
		}
		errs <- nil
	}()
	select {
	case err := <-errs:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4 * testkit.WaitTimeout):
		t.Fatal("routing the messages never finished")
	}
	// What the lost node did not confirm in time is in the outbox; Route
	// returned for it, and the replayer stores it once the cluster has a
	// leader again: an election, then up to n messages replayed one
	// confirmation at a time, which under -race on a busy machine takes
	// longer than Eventually's bound.
	testkit.EventuallyWithin(t, 4*testkit.WaitTimeout, func() bool { return gauge(t, f.reg, "firehose_outbox_messages", "all") == 0 },
		"the outbox of route all to drain after the node loss")

	js := testnats.JetStream(t, strings.Join(cluster.URLs()[1:], ","))
	// The stream's leader and the cluster's meta leader (which creating a
	// consumer needs) may still be in election after the node loss: ask
	// until they answer.
	var st jetstream.Stream
	var info *jetstream.StreamInfo
	var err error
	testkit.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if st, err = js.Stream(ctx, "FIREHOSE"); err != nil {
			return false
		}
		info, err = st.Info(ctx)
		return err == nil
	}, "the stream's info after the node loss")
	if info.State.Msgs != n {
		t.Fatalf("the stream holds %d messages, want %d (outbox %v)", info.State.Msgs, n, gauge(t, f.reg, "firehose_outbox_messages", "all"))
	}
	var cons jetstream.Consumer
	testkit.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cons, err = st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		return err == nil
	}, "a consumer after the node loss")
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	// Next has no deadline of its own: stopping the iterator ends a wait
	// for a message that never comes.
	deadline := time.AfterFunc(4*testkit.WaitTimeout, it.Stop)
	defer deadline.Stop()
	seen := map[string]bool{}
	for len(seen) < n {
		m, err := it.Next()
		if err != nil {
			t.Fatalf("%d of %d messages consumed: %v", len(seen), n, err)
		}
		if seen[string(m.Data())] {
			t.Fatalf("message %s delivered twice", m.Data())
		}
		seen[string(m.Data())] = true
	}
}

// TestFitIsExactAndRefusesBeforeDelivering: a message of exactly a required
// route's limit (the server's max_payload, headers included) is routed; a
// byte more and Route delivers nothing of the call, on no route, and says
// which route and limit. An optional route's limit refuses nothing.
func TestFitIsExactAndRefusesBeforeDelivering(t *testing.T) {
	srv := testnats.Start(t, func(o *server.Options) { o.MaxPayload = 4096 })
	required := route("required", "core", "big/#")
	optional := route("optional", "core", "#")
	optional.Required, optional.SubjectPrefix = false, "opt"
	f := newRouter(t, t.TempDir(), []router.Config{required, optional}, map[string]natssink.Config{"core": sinkConfig(natssink.TypeNATS, srv.URL())})
	waitReady(t, f.sinks["core"])
	got := subscribe(t, srv.URL(), ">")
	sink := f.sinks["core"]
	sized := func(topic string, size int) bus.Message {
		m := msg(topic, "")
		m.Payload = make([]byte, size-sink.MessageSize(&m))
		return m
	}
	exact := sized("big/a", 4096)
	if err := f.router.Fit(&exact); err != nil {
		t.Fatalf("a message of exactly the limit: %v", err)
	}
	over := sized("big/a", 4097)
	small := msg("big/b", "small")
	err := f.router.Route(context.Background(), small, over)
	var tl *router.TooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, bus.ErrTooLarge) || tl.Route != "required" || tl.Size != 4097 || tl.Limit.Bytes != 4096 ||
		!strings.Contains(err.Error(), "over the limit of required route required: 4096 bytes (the NATS server's max_payload)") {
		t.Fatalf("a message a byte over: %v", err)
	}
	if err := f.router.Route(context.Background(), exact); err != nil {
		t.Fatal(err)
	}
	// Only the exact message arrives, on both routes: nothing of the refused call.
	for _, subject := range []string{"firehose.big.a", "opt.big.a"} {
		if m := nextMsg(t, got); len(m.Data) != len(exact.Payload) {
			t.Fatalf("%s arrived with %d bytes, want the exact message's %d (wanted on %s)", m.Subject, len(m.Data), len(exact.Payload), subject)
		}
	}
	if n := metricValue(t, f.reg, "firehose_route_messages_total", "required", "too_large"); n != 1 {
		t.Errorf("too_large counted %v, want 1", n)
	}
	// Too large only for the optional route: routed, and dropped there.
	if err := f.router.Fit(&[]bus.Message{sized("other/x", 5000)}[0]); err != nil {
		t.Errorf("a message too large for an optional route only: %v", err)
	}
}

// BenchmarkFit is what the size check costs every routed message: a
// message far below the smallest limit of the required routes.
func BenchmarkFit(b *testing.B) {
	cfg := sinkConfig(natssink.TypeJetStream, "nats://127.0.0.1:1") // never connects: the configured limit
	f := newRouter(b, b.TempDir(), []router.Config{route("all", "js", "#"), route("chef", "js", "chef/#")}, map[string]natssink.Config{"js": cfg})
	m := msg("chef/acme/web1/run/success", strings.Repeat("x", 2000))
	for b.Loop() {
		if err := f.router.Fit(&m); err != nil {
			b.Fatal(err)
		}
	}
}

// addressingSink is a sink with an addressing of its own, so that a test
// sees the router send what the sink's Address says, not a mapping of the
// router's. It confirms every message at once.
type addressingSink struct {
	mu    sync.Mutex
	got   []string
	name  string
	limit int // Limit().Bytes
	// unchecked are the invalid topics Address was given: none, as the
	// Sink contract promises.
	unchecked []string
}

func (s *addressingSink) Address(prefix, topic string) (string, error) {
	if err := topics.ValidName(topic); err != nil {
		s.mu.Lock()
		s.unchecked = append(s.unchecked, topic)
		s.mu.Unlock()
	}
	if strings.Contains(topic, "nowhere") {
		return "", fmt.Errorf("%w: %s has no destination here", bus.ErrInvalid, topic)
	}
	return "to " + prefix + " " + topic, nil
}

func (s *addressingSink) Publish(_ context.Context, msgs ...bus.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.got = append(s.got, m.Topic)
	}
	return nil
}

func (s *addressingSink) Name() string                    { return s.name }
func (s *addressingSink) Ready() bool                     { return true }
func (s *addressingSink) NotReadyReason() string          { return "" }
func (s *addressingSink) Limit() sinks.Limit              { return sinks.Limit{Bytes: s.limit, From: "test"} }
func (s *addressingSink) MessageSize(m *bus.Message) int  { return len(m.Payload) }
func (s *addressingSink) Close(ctx context.Context) error { return nil }

// TestTheSinkAddressesEachMessage: the router applies a route's rewrite,
// then sends each message where its sink's Address says, under the route's
// subject_prefix; a topic the sink cannot address is dropped for that route
// alone.
func TestTheSinkAddressesEachMessage(t *testing.T) {
	s := &addressingSink{name: "own"}
	plain := route("plain", "own", "chef/#")
	moved := route("moved", "own", "chef/#")
	moved.SubjectPrefix, moved.Rewrite = "dc1", &router.Rewrite{From: "chef", To: "dc1/chef"}
	r, err := router.New([]router.Config{plain, moved}, map[string]sinks.Sink{"own": s},
		router.Options{DataDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if err := r.Route(t.Context(), bus.Message{Topic: "chef/acme/web1/status"}, bus.Message{Topic: "chef/nowhere"}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.got)
	want := []string{"to dc1 dc1/chef/acme/web1/status", "to firehose chef/acme/web1/status"}
	if !slices.Equal(s.got, want) {
		t.Errorf("the sink got %q, want %q", s.got, want)
	}
}

// TestPublisherRoutesFirstThenTheBus: the publish policy refuses a bad topic
// before any sink or the bus sees it, routes before it publishes on the bus,
// and publishes nothing on the bus when routing fails.
func TestPublisherRoutesFirstThenTheBus(t *testing.T) {
	s := &addressingSink{name: "own", limit: 10}
	r, err := router.New([]router.Config{route("all", "own", "#")}, map[string]sinks.Sink{"own": s},
		router.Options{DataDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	// The bus records how many messages the sink had when each reached it.
	var onBus []string
	busPub := publisherFunc(func(_ context.Context, msgs ...bus.Message) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range msgs {
			onBus = append(onBus, fmt.Sprintf("%s after %d routed", m.Topic, len(s.got)))
		}
		return nil
	})
	p := router.NewPublisher(r, busPub)

	err = p.Publish(t.Context(), bus.Message{Topic: "ok/1"}, bus.Message{Topic: "bad/+"})
	if !errors.Is(err, bus.ErrInvalid) || len(s.got) != 0 || len(onBus) != 0 {
		t.Fatalf("a bad topic: err %v, sink got %q, bus got %q; want ErrInvalid and nothing anywhere", err, s.got, onBus)
	}
	if err := p.Publish(t.Context(), bus.Message{Topic: "ok/1"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ok/1 after 1 routed"}; !slices.Equal(onBus, want) {
		t.Errorf("bus got %q, want %q", onBus, want)
	}
	if err := p.Publish(t.Context(), bus.Message{Topic: "nowhere/2"}); err != nil {
		t.Fatal(err) // dropped for the route, still published on the bus
	}
	if len(onBus) != 2 {
		t.Errorf("bus got %q; a message no sink can address still goes on the bus", onBus)
	}
	err = p.Publish(t.Context(), bus.Message{Topic: "big/3", Payload: []byte("eleven byte")})
	if tooLarge := (*router.TooLargeError)(nil); !errors.As(err, &tooLarge) || len(onBus) != 2 {
		t.Errorf("a message too large for the route: err %v, bus got %q; want a *TooLargeError and nothing more on the bus", err, onBus)
	}
}

type publisherFunc func(ctx context.Context, msgs ...bus.Message) error

func (f publisherFunc) Publish(ctx context.Context, msgs ...bus.Message) error {
	return f(ctx, msgs...)
}

// TestRouteChecksEachTopicOnce: Route is where MQTT publishers' messages
// enter, and their topics are checked there, before any sink's Address (a
// NATS subject) sees them: an invalid one is rejected by every route that
// would take it, and its batch's valid messages are delivered. A rewrite
// that makes a topic too long is rejected for its route alone.
func TestRouteChecksEachTopicOnce(t *testing.T) {
	s := &addressingSink{name: "own"}
	plain := route("plain", "own", "#")
	long := route("long", "own", "a/#")
	long.Rewrite = &router.Rewrite{From: "a", To: strings.Repeat("x", 100)}
	reg := prometheus.NewRegistry()
	r, err := router.New([]router.Config{plain, long}, map[string]sinks.Sink{"own": s},
		router.Options{DataDir: t.TempDir(), Logger: zerolog.Nop(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	hostile := []string{"a/+", "a/#", "a/\x00", "a/\xff", ""}
	msgs := []bus.Message{{Topic: "a/ok"}}
	for _, h := range hostile {
		msgs = append(msgs, bus.Message{Topic: h})
		if err := r.Fit(&bus.Message{Topic: h}); err != nil {
			t.Errorf("Fit(%q): %v; an invalid topic fits, and Route drops it", h, err)
		}
	}
	near := "a/" + strings.Repeat("y", topics.MaxTopicBytes-2) // valid; too long once rewritten
	msgs = append(msgs, bus.Message{Topic: near})
	if err := r.Route(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	got, unchecked := slices.Clone(s.got), slices.Clone(s.unchecked)
	s.mu.Unlock()
	if len(unchecked) > 0 {
		t.Errorf("Address was given invalid topics %q", unchecked)
	}
	slices.Sort(got)
	want := []string{"to firehose " + near, "to firehose a/ok", "to firehose " + strings.Repeat("x", 100) + "/ok"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the sink got %d messages %.60q, want %.60q", len(got), got, want)
	}
	// plain takes every hostile topic; long the four under a/, and the one
	// its rewrite makes too long.
	if n := metricValue(t, reg, "firehose_route_messages_total", "plain", "rejected"); n != float64(len(hostile)) {
		t.Errorf("route plain rejected %v, want %d", n, len(hostile))
	}
	if n := metricValue(t, reg, "firehose_route_messages_total", "long", "rejected"); n != 5 {
		t.Errorf("route long rejected %v, want 5", n)
	}
}

// checkedBus is a bus that checks topics itself, as the embedded broker
// does, and says which way it was called.
type checkedBus struct {
	mu             sync.Mutex
	plain, checked []string
}

func (b *checkedBus) Publish(_ context.Context, msgs ...bus.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range msgs {
		b.plain = append(b.plain, m.Topic)
	}
	return nil
}

func (b *checkedBus) PublishChecked(_ context.Context, msgs ...bus.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range msgs {
		b.checked = append(b.checked, m.Topic)
	}
	return nil
}

// TestPublisherChecksEachTopicOnce: the Publisher checks the adapters'
// topics, and a bus that could check them again is told they are checked;
// a bad topic still reaches neither the sink nor the bus.
func TestPublisherChecksEachTopicOnce(t *testing.T) {
	s := &addressingSink{name: "own"}
	r, err := router.New([]router.Config{route("all", "own", "#")}, map[string]sinks.Sink{"own": s},
		router.Options{DataDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	b := &checkedBus{}
	p := router.NewPublisher(r, b)
	if err := p.Publish(t.Context(), bus.Message{Topic: "ok/1"}, bus.Message{Topic: "bad/\x00"}); !errors.Is(err, bus.ErrInvalid) {
		t.Fatalf("a bad topic: %v, want ErrInvalid", err)
	}
	if err := p.Publish(t.Context(), bus.Message{Topic: "ok/2"}); err != nil {
		t.Fatal(err)
	}
	if len(s.got) != 1 || len(s.unchecked) > 0 || len(b.plain) != 0 || !slices.Equal(b.checked, []string{"ok/2"}) {
		t.Errorf("sink got %q (unchecked %q), bus got %q by Publish and %q by PublishChecked; want ok/2 in the sink and by PublishChecked",
			s.got, s.unchecked, b.plain, b.checked)
	}
}

// TestNewRefusesPrefixesTheSinksCannotTrust: the sinks' Address trusts a
// route's subject_prefix and rewrite, so New checks them for callers that
// did not validate the config.
func TestNewRefusesPrefixesTheSinksCannotTrust(t *testing.T) {
	badPrefix := route("p", "own", "#")
	badPrefix.SubjectPrefix = "a.*"
	badRewrite := route("r", "own", "#")
	badRewrite.Rewrite = &router.Rewrite{From: "a", To: "b/+"}
	for _, c := range []router.Config{badPrefix, badRewrite} {
		r, err := router.New([]router.Config{c}, map[string]sinks.Sink{"own": &addressingSink{name: "own"}},
			router.Options{DataDir: t.TempDir(), Logger: zerolog.Nop()})
		if err == nil {
			_ = r.Close(context.Background())
			t.Errorf("route %s: New took it", c.Name)
		}
	}
}
