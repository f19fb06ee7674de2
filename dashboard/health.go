package dashboard

import (
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Route is what the Health view knows of a configured route.
type Route struct {
	Name     string
	Sink     string
	Required bool
}

// HealthSnapshot is the Health view: the numbers /metrics has, read from the
// same registry at the same moment, in the shape the page shows. Counters are
// totals since the bridge started; the page turns them into rates.
type HealthSnapshot struct {
	Time   int64        `json:"time"` // Unix ms
	Broker BrokerHealth `json:"broker"`
	Routes []RouteState `json:"routes"`
	// Requests counts HTTP requests by endpoint and class of status (2xx, 4xx...).
	Requests  []EndpointRequests `json:"requests"`
	Dashboard DashboardHealth    `json:"dashboard"`
}

// BrokerHealth is the embedded broker's side.
type BrokerHealth struct {
	Clients       float64            `json:"clients"`
	Subscriptions float64            `json:"subscriptions"`
	Retained      float64            `json:"retained"`
	Inflight      float64            `json:"inflight"`
	Received      float64            `json:"messages_received"`
	Sent          float64            `json:"messages_sent"`
	Dropped       map[string]float64 `json:"messages_dropped"`
	Denied        float64            `json:"publish_denied"`
	AuthFailures  float64            `json:"auth_failures"`
	Present       bool               `json:"present"` // false in external mode
}

// RouteState is one route and its sink.
type RouteState struct {
	Name           string             `json:"name"`
	Sink           string             `json:"sink"`
	Required       bool               `json:"required"`
	SinkUp         bool               `json:"sink_up"`
	SinkReason     string             `json:"sink_reason,omitempty"` // why the sink is down, when known
	Messages       map[string]float64 `json:"messages"`              // by result: delivered, outboxed, dropped, rejected, refused
	Replayed       float64            `json:"replayed"`
	OutboxMessages float64            `json:"outbox_messages"`
	OutboxBytes    float64            `json:"outbox_bytes"`
	OutboxAge      float64            `json:"outbox_oldest_age_seconds"`
}

// EndpointRequests counts one endpoint's requests.
type EndpointRequests struct {
	Route   string             `json:"route"`
	ByClass map[string]float64 `json:"by_class"`
}

// DashboardHealth is the dashboard's own side.
type DashboardHealth struct {
	Streams float64 `json:"streams"`
	Dropped float64 `json:"dropped"`
}

// health reads families (from a Gatherer) into a HealthSnapshot.
func health(families []*dto.MetricFamily, routes []Route, now int64) HealthSnapshot {
	h := HealthSnapshot{Time: now, Broker: BrokerHealth{Dropped: map[string]float64{}}, Routes: []RouteState{}, Requests: []EndpointRequests{}}
	byRoute := map[string]*RouteState{}
	sinkUp := map[string]bool{}
	for _, r := range routes {
		rs := &RouteState{Name: r.Name, Sink: r.Sink, Required: r.Required, Messages: map[string]float64{}}
		byRoute[r.Name] = rs
	}
	requests := map[string]map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			v := value(m)
			lbl := func(name string) string {
				for _, l := range m.GetLabel() {
					if l.GetName() == name {
						return l.GetValue()
					}
				}
				return ""
			}
			route := func() *RouteState {
				if rs := byRoute[lbl("route")]; rs != nil {
					return rs
				}
				return &RouteState{Messages: map[string]float64{}}
			}
			switch f.GetName() {
			case "firehose_broker_clients_connected":
				h.Broker.Clients, h.Broker.Present = v, true
			case "firehose_broker_subscriptions":
				h.Broker.Subscriptions = v
			case "firehose_broker_retained_messages":
				h.Broker.Retained = v
			case "firehose_broker_inflight_messages":
				h.Broker.Inflight = v
			case "firehose_broker_messages_received_total":
				h.Broker.Received = v
			case "firehose_broker_messages_sent_total":
				h.Broker.Sent = v
			case "firehose_broker_messages_dropped_total":
				h.Broker.Dropped[lbl("reason")] += v
			case "firehose_broker_publish_denied_total":
				h.Broker.Denied = v
			case "firehose_broker_auth_failures_total":
				h.Broker.AuthFailures = v
			case "firehose_route_messages_total":
				route().Messages[lbl("result")] += v
			case "firehose_outbox_replayed_total":
				route().Replayed = v
			case "firehose_outbox_messages":
				route().OutboxMessages = v
			case "firehose_outbox_bytes":
				route().OutboxBytes = v
			case "firehose_outbox_oldest_age_seconds":
				route().OutboxAge = v
			case "firehose_sink_up":
				sinkUp[lbl("sink")] = v == 1
			case "firehose_http_requests_total":
				r := lbl("route")
				if requests[r] == nil {
					requests[r] = map[string]float64{}
				}
				code := lbl("code")
				if len(code) == 3 {
					code = code[:1] + "xx"
				}
				requests[r][code] += v
			case "firehose_dashboard_streams":
				h.Dashboard.Streams = v
			case "firehose_dashboard_messages_dropped_total":
				h.Dashboard.Dropped += v
			}
		}
	}
	for _, r := range routes {
		rs := byRoute[r.Name]
		rs.SinkUp = sinkUp[r.Sink]
		h.Routes = append(h.Routes, *rs)
	}
	for r, by := range requests {
		if strings.HasPrefix(r, "GET ") || r == "unmatched" {
			continue // reads (the page's own, scrapes) would drown the intake
		}
		h.Requests = append(h.Requests, EndpointRequests{Route: r, ByClass: by})
	}
	sort.Slice(h.Requests, func(i, j int) bool { return h.Requests[i].Route < h.Requests[j].Route })
	return h
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
