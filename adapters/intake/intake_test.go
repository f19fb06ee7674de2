package intake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
)

func TestValidateNamesEveryBadKey(t *testing.T) {
	c := Config{Enabled: true, TopicPrefix: "a/+", MaxBody: 0, Tokens: []httpserver.Token{{Name: "ok", Token: "x"}, {Name: "empty"}}}
	err := c.Validate()
	for _, key := range []string{"topic_prefix", "max_body", "tokens[1].token"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error %v does not name %s", err, key)
		}
	}
	if strings.Contains(err.Error(), "tokens[0]") {
		t.Errorf("a good token was reported: %v", err)
	}
	good := Config{Enabled: true, TopicPrefix: "gerrit", MaxBody: 1}
	if err := good.Validate(); err != nil {
		t.Errorf("a good section: %v", err)
	}
}

// publisherFunc is a bus.Publisher that answers with err.
type publisherFunc func(context.Context, ...bus.Message) error

func (f publisherFunc) Publish(ctx context.Context, msgs ...bus.Message) error {
	return f(ctx, msgs...)
}

// TestIntakeFamily: two sources register the one family on one registry,
// and Base counts each way a request ends by its outcome.
func TestIntakeFamily(t *testing.T) {
	reg := prometheus.NewRegistry()
	var publishErr error
	pub := publisherFunc(func(context.Context, ...bus.Message) error { return publishErr })
	bases := map[string]*Base{}
	for _, source := range []string{"gerrit", "subunit"} {
		var b Base
		err := b.Init(source, nil, Endpoint{Path: "/" + source, Handler: http.NotFoundHandler()},
			Options{Publisher: pub, Registerer: reg, Tokens: httpserver.NewTokens([]httpserver.Token{{Token: "t"}})})
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		bases[source] = &b
	}
	if err := new(Base).Init("nobody", nil, Endpoint{Path: "/x"}, Options{}); err == nil {
		t.Fatal("a base without a publisher")
	}
	g := bases["gerrit"]
	req := func() *http.Request { return httptest.NewRequest("POST", "/gerrit", strings.NewReader("{}")) }
	if _, ok := g.Authenticate(httptest.NewRecorder(), req()); ok { // no token: 401, rejected
		t.Fatal("authenticated without a token")
	}
	g.BadRequest(httptest.NewRecorder(), req(), "", errors.New("bad"), "field") // rejected
	g.Publish(httptest.NewRecorder(), req(), "", 3, bus.Message{})              // 3 accepted
	publishErr = bus.ErrUnavailable
	g.Publish(httptest.NewRecorder(), req(), "", 1, bus.Message{}) // failed
	publishErr = fmt.Errorf("route x: %w", bus.ErrTooLarge)
	g.Publish(httptest.NewRecorder(), req(), "", 1, bus.Message{}) // rejected: 413
	bases["subunit"].Metrics.Warnings.WithLabelValues("r").Inc()

	want := `
# HELP firehose_intake_messages_total Messages of each source by outcome: accepted (published on the bus), rejected (request refused for good, counted once), failed (not published now; the sender retries).
# TYPE firehose_intake_messages_total counter
firehose_intake_messages_total{outcome="accepted",source="gerrit"} 3
firehose_intake_messages_total{outcome="accepted",source="subunit"} 0
firehose_intake_messages_total{outcome="failed",source="gerrit"} 1
firehose_intake_messages_total{outcome="failed",source="subunit"} 0
firehose_intake_messages_total{outcome="rejected",source="gerrit"} 3
firehose_intake_messages_total{outcome="rejected",source="subunit"} 0
# HELP firehose_intake_warnings_total Problems found in messages that were published all the same, by source and reason.
# TYPE firehose_intake_warnings_total counter
firehose_intake_warnings_total{reason="r",source="subunit"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
