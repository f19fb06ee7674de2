package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/dashboard"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
	"github.com/opsfirehose/firehose/router"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
)

func bridgeWith(t *testing.T, edit func(*config.Config)) (*app.Bridge, string) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.Broker.Listeners = []broker.ListenerConfig{{Name: "mqtt", Type: broker.ListenerTCP, Address: "127.0.0.1:0"}}
	if edit != nil {
		edit(&cfg)
	}
	b, err := app.New(t.Context(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b, "http://" + b.HTTPAddr()
}

// sse reads Server-Sent Events as curl -N would print them.
type sse struct {
	resp *http.Response
	r    *bufio.Reader
}

func openStream(t *testing.T, base string, query url.Values) *sse {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/stream?" + query.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sse{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next returns the next event of the given type and its data.
func (s *sse) next(t *testing.T, event string) string {
	t.Helper()
	deadline := time.AfterFunc(testkit.WaitTimeout, func() { s.resp.Body.Close() })
	defer deadline.Stop()
	var typ string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("no %q event: %v", event, err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && typ == event:
			return strings.TrimPrefix(line, "data: ")
		}
	}
}

func TestStreamDeliversWhatAnAnonymousSubscriberGets(t *testing.T) {
	b, base := bridgeWith(t, nil)
	pub := func(topic, payload string, retain bool) {
		t.Helper()
		if err := b.Publisher().Publish(context.Background(), bus.Message{Topic: topic, Payload: []byte(payload), QoS: 1, Retain: retain}); err != nil {
			t.Fatal(err)
		}
	}
	pub("chef/acme/web01/status", "{\n \"status\": \"failure\"\n}", true)

	s := openStream(t, base, url.Values{"filter": {"chef/+/+/status", "chef/#"}, "retained": {"1"}})
	if got := s.next(t, "open"); got != `{"filters":["chef/+/+/status","chef/#"],"retained":1}` {
		t.Errorf("open: %s", got)
	}
	var m struct {
		Topic    string
		Retained bool
		QoS      int
		Payload  map[string]any
		Time     string
	}
	if err := json.Unmarshal([]byte(s.next(t, "message")), &m); err != nil {
		t.Fatal(err)
	}
	if m.Topic != "chef/acme/web01/status" || !m.Retained || m.Payload["status"] != "failure" || m.Time == "" {
		t.Errorf("retained message: %+v", m)
	}
	// Live: once per message, though both filters match; text payloads as text.
	pub("chef/acme/web02/status", `{"status":"success"}`, true)
	pub("chef/acme/web02/run/start", "not json", false)
	pub("ansible/playbook/x/action/start", `{}`, false)
	if got := s.next(t, "message"); !strings.Contains(got, `"topic":"chef/acme/web02/status","qos":1,"retained":false,"payload":{"status":"success"}`) {
		t.Errorf("live: %s", got)
	}
	if got := s.next(t, "message"); !strings.Contains(got, `"topic":"chef/acme/web02/run/start"`) || !strings.Contains(got, `"text":"not json"`) {
		t.Errorf("text payload: %s", got)
	}
	if got := s.next(t, "stats"); !strings.Contains(got, `"sent":2`) || !strings.Contains(got, `"dropped":0`) {
		t.Errorf("stats: %s", got)
	}

	// payload=0 gives topics only.
	s2 := openStream(t, base, url.Values{"filter": {"chef/#"}, "payload": {"0"}})
	s2.next(t, "open")
	pub("chef/acme/web03/run/start", `{"x":1}`, false)
	if got := s2.next(t, "message"); strings.Contains(got, "payload") || !strings.Contains(got, "web03") {
		t.Errorf("payload=0: %s", got)
	}
}

// A stream outlives the listener's read and write timeouts, which bound
// requests, not an open stream.
func TestStreamOutlivesHTTPTimeouts(t *testing.T) {
	_, base := bridgeWith(t, func(c *config.Config) {
		// Short enough that the second stats event (two seconds in) comes
		// after both, long enough that a busy machine still reads the
		// request that opens the stream within them.
		c.HTTP.ReadTimeout, c.HTTP.WriteTimeout = time.Second, time.Second
	})
	s := openStream(t, base, url.Values{"filter": {"#"}})
	s.next(t, "open")
	for i := 1; i <= 2; i++ { // a stats event a second: past both timeouts
		if got := s.next(t, "stats"); !strings.Contains(got, `"sent":0`) {
			t.Fatalf("stats %d: %s", i, got)
		}
	}
}

// A client that stops reading costs a bounded queue: beyond it, messages
// are dropped for that client alone and counted in its stats.
func TestSlowStreamDropsBeyondItsQueue(t *testing.T) {
	b, base := bridgeWith(t, nil)
	s := openStream(t, base, url.Values{"filter": {"big/#"}})
	s.next(t, "open")
	payload := []byte(`"` + strings.Repeat("x", 1<<20) + `"`)
	for i := 0; i < 64; i++ { // 64 MiB: more than the socket buffers and the 8 MiB queue
		if err := b.Publisher().Publish(context.Background(), bus.Message{Topic: "big/x", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		var st struct{ Sent, Dropped int }
		if err := json.Unmarshal([]byte(s.next(t, "stats")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Sent+st.Dropped == 64 {
			if st.Dropped == 0 || st.Sent < 8 {
				t.Errorf("sent %d, dropped %d", st.Sent, st.Dropped)
			}
			return
		}
	}
}

func TestStreamRefusesBadRequests(t *testing.T) {
	_, base := bridgeWith(t, func(c *config.Config) { c.Dashboard.MaxStreams = 1 })
	for q, want := range map[string]string{
		"filter=a/%23/b":                      `"field":"filter"`,
		"filter=%24share/g/x":                 "shared subscriptions",
		"retained=maybe":                      `"field":"retained"`,
		"filter=" + strings.Repeat("a", 1025): "at most 1024 bytes",
	} {
		code, body := get(t, base+"/api/v1/stream?"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%.40s: %d %s", q, code, body)
		}
	}
	openStream(t, base, url.Values{"filter": {"#"}}).next(t, "open")
	resp, err := http.Get(base + "/api/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a stream beyond max_streams: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestFleetSnapshotFiltersAndSortsOnTheServer(t *testing.T) {
	b, base := bridgeWith(t, nil)
	var msgs []bus.Message
	for _, n := range []struct{ org, node, status, group, end string }{
		{"acme", "web-01", "success", "prod", "2026-01-01T10:00:00Z"},
		{"acme", "web-02", "failure", "prod", "2026-01-01T09:00:00Z"},
		{"acme", "db-01", "failure", "staging", "2026-01-01T11:00:00Z"},
		{"other", "web-03", "success", "prod", "2026-01-01T12:00:00Z"},
	} {
		payload, _ := json.Marshal(map[string]any{"node_name": n.node, "organization_name": n.org, "status": n.status, "policy_group": n.group,
			"end_time": n.end, "failed_cookbook": map[string]string{"name": "mysql", "version": "8.0.2"}, "owner": "dba", "new_field": 1})
		msgs = append(msgs, bus.Message{Topic: "chef/" + n.org + "/" + n.node + "/status", Payload: payload, QoS: 1, Retain: true})
	}
	if err := b.Publisher().Publish(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Total, Matched, Listed int
		Counts                 map[string]int
		Orgs                   []string
		Rows                   []struct {
			Name, Status, Owner string
			FailedCookbook      string `json:"failed_cookbook"`
		} `json:"rows"`
	}
	names := func(p page) string {
		var s []string
		for _, r := range p.Rows {
			s = append(s, r.Name)
		}
		return strings.Join(s, " ")
	}
	var p page
	testkit.Eventually(t, func() bool { getJSON(t, base+"/api/v1/fleet", &p); return p.Total == 4 }, "four nodes")
	if names(p) != "db-01 web-02 web-03 web-01" || p.Counts["failure"] != 2 || strings.Join(p.Orgs, ",") != "acme,other" {
		t.Errorf("failures first, newest first: %+v", p)
	}
	getJSON(t, base+"/api/v1/fleet?org=acme&policy_group=prod&q=WEB", &p)
	if names(p) != "web-02 web-01" || p.Matched != 2 || p.Counts["success"] != 1 {
		t.Errorf("org, group and name filters: %+v", p)
	}
	getJSON(t, base+"/api/v1/fleet?status=failure&offset=1&limit=1", &p)
	if names(p) != "web-02" || p.Listed != 2 || p.Matched != 4 {
		t.Errorf("status filter and paging: %+v", p)
	}
	if p.Rows[0].FailedCookbook != "mysql 8.0.2" || p.Rows[0].Owner != "dba" {
		t.Errorf("fields the chef adapter adds: %+v", p.Rows[0])
	}
	if code, body := get(t, base+"/api/v1/fleet?limit=-1"); code != http.StatusBadRequest || !strings.Contains(body, `"field":"limit"`) {
		t.Errorf("bad limit: %d %s", code, body)
	}
	// A cleared retained status removes the node.
	if err := b.Publisher().Publish(context.Background(), bus.Message{Topic: "chef/other/web-03/status", QoS: 1, Retain: true}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() bool { getJSON(t, base+"/api/v1/fleet", &p); return p.Total == 3 }, "the cleared node gone")
}

func TestPageAndAnonymousRule(t *testing.T) {
	_, base := bridgeWith(t, nil)
	code, body := get(t, base+"/")
	if code != http.StatusOK || !strings.Contains(body, `<script src="assets/app.js"`) {
		t.Fatalf("GET /: %d", code)
	}
	for _, asset := range []string{"/assets/app.js", "/assets/app.css", "/assets/favicon.svg"} {
		if code, _ := get(t, base+asset); code != http.StatusOK {
			t.Errorf("%s: %d", asset, code)
		}
	}
	if code, _ := get(t, base+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d", code)
	}

	// Anonymous clients may not read: neither may the dashboard, but Health.
	_, closed := bridgeWith(t, func(c *config.Config) { c.Broker.AllowAnonymous = false })
	for _, path := range []string{"/api/v1/stream", "/api/v1/fleet", "/api/v1/ansible", "/api/v1/changes"} {
		code, body := get(t, closed+path)
		if code != http.StatusForbidden || !strings.Contains(body, "broker.allow_anonymous is false") {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, _ := get(t, closed+"/api/v1/health"); code != http.StatusOK {
		t.Errorf("health: %d", code)
	}
	var info struct{ Available bool }
	getJSON(t, closed+"/api/v1/info", &info)
	if info.Available {
		t.Error("info says available")
	}

	// Turned off: no page, as before it existed.
	_, off := bridgeWith(t, func(c *config.Config) { c.Dashboard.Enabled = false })
	if code, body := get(t, off+"/"); code != http.StatusNotFound || !strings.Contains(body, "no such endpoint") {
		t.Errorf("disabled: %d %s", code, body)
	}
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, sb.String()
}

// A snapshot holds every message published before it was asked for, though
// the aggregator applies them on a goroutine of its own: a burst it cannot
// have applied by the time the request arrives shows it (and
// TestAStreamMessageIsInTheSnapshotItPrompts, that this holds for the
// message a stream just showed).
func TestASnapshotHoldsWhatWasPublishedBeforeIt(t *testing.T) {
	b, base := bridgeWith(t, nil)
	const n = 4000 // below the aggregator's queue, so none is dropped
	var last string
	for i := range n {
		last = fmt.Sprintf("gerrit/openstack/repo-%d/comment-added", i)
		if err := b.Publisher().Publish(context.Background(), bus.Message{Topic: last, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var snap dashboard.ChangesSnapshot
	getJSON(t, base+"/api/v1/changes", &snap)
	if len(snap.Changes) == 0 || snap.Changes[0].Topic != last {
		newest := "none"
		if len(snap.Changes) > 0 {
			newest = snap.Changes[0].Topic
		}
		t.Fatalf("the newest change is %s, want %s, published before the request", newest, last)
	}
}

// The Health view says why a route's sink is down, with the reason /readyz
// gives (here the NATS server's answer to a wrong password), not only that
// it is down.
func TestHealthSaysWhyASinkIsDown(t *testing.T) {
	srv := testnats.Start(t, func(o *server.Options) { o.Username, o.Password = "bridge", "right" })
	_, base := bridgeWith(t, func(c *config.Config) {
		sc := *natssink.NewConfig(natssink.TypeNATS)
		sc.Type, sc.URLs, sc.Username, sc.Password = sinkconfig.TypeNATS, []string{srv.URL()}, "bridge", "wrong"
		c.Sinks = map[string]sinkconfig.Config{"target": sinkconfig.NATSConfig(&sc)}
		var rc router.Config
		rc.SetDefaults()
		rc.Name, rc.Sink, rc.Filters = "out", "target", []string{"#"}
		c.Routes = []router.Config{rc}
	})
	var route dashboard.RouteState
	testkit.Eventually(t, func() bool {
		var h dashboard.HealthSnapshot
		getJSON(t, base+"/api/v1/health", &h)
		if len(h.Routes) != 1 {
			t.Fatalf("routes in Health: %+v", h.Routes)
		}
		route = h.Routes[0]
		return strings.Contains(route.SinkReason, "Authorization Violation")
	}, "Health to give the sink's reason; route out is %+v", &route)
	if route.SinkUp || route.Name != "out" || route.Sink != "target" {
		t.Errorf("route out in Health: %+v", route)
	}
}
