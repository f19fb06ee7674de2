package router

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsfirehose/firehose/internal/metric"
)

type metrics struct {
	messages *prometheus.CounterVec
	replayed *prometheus.CounterVec
}

type routeMetrics struct {
	delivered, outboxed, replayed, dropped, rejected, refused, tooLarge prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		messages: metric.CounterVec("firehose_route_messages_total",
			"Messages per route by result: delivered (confirmed by the sink, at once or replayed from the outbox), outboxed (kept for replay), "+
				"dropped (optional route, sink unable), rejected (the sink can never take them), refused (outbox full; the sender was told to retry), "+
				"too_large (over the sink's size limit, refused before the sender was answered: HTTP 413, MQTT 5 PUBACK 0x97; an MQTT 3.1.1 publish is acked and dropped).",
			"route", "result"),
		replayed: metric.CounterVec("firehose_outbox_replayed_total",
			"Messages delivered from a route's outbox after its sink came back.", "route"),
	}
}

func (m *metrics) forRoute(name string) routeMetrics {
	return routeMetrics{
		delivered: m.messages.WithLabelValues(name, "delivered"),
		outboxed:  m.messages.WithLabelValues(name, "outboxed"),
		dropped:   m.messages.WithLabelValues(name, "dropped"),
		rejected:  m.messages.WithLabelValues(name, "rejected"),
		refused:   m.messages.WithLabelValues(name, "refused"),
		tooLarge:  m.messages.WithLabelValues(name, "too_large"),
		replayed:  m.replayed.WithLabelValues(name),
	}
}

func (m *metrics) register(reg prometheus.Registerer, r *Router) error {
	return metric.Register(reg, m.messages, m.replayed, &outboxCollector{r: r})
}

var (
	outboxMessagesDesc = prometheus.NewDesc("firehose_outbox_messages", "Messages waiting in a route's outbox.", []string{"route"}, nil)
	outboxBytesDesc    = prometheus.NewDesc("firehose_outbox_bytes", "Bytes waiting in a route's outbox.", []string{"route"}, nil)
	outboxAgeDesc      = prometheus.NewDesc("firehose_outbox_oldest_age_seconds", "Age of the oldest message in a route's outbox; 0 when empty.", []string{"route"}, nil)
	sinkUpDesc         = prometheus.NewDesc("firehose_sink_up", "1 when the sink is connected and confirming.", []string{"sink"}, nil)
)

// outboxCollector reads the outboxes at scrape time.
type outboxCollector struct{ r *Router }

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxMessagesDesc
	ch <- outboxBytesDesc
	ch <- outboxAgeDesc
	ch <- sinkUpDesc
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.r.now()
	sinksSeen := map[string]bool{}
	for _, rt := range c.r.routes {
		if !sinksSeen[rt.sink.Name()] {
			sinksSeen[rt.sink.Name()] = true
			up := 0.0
			if rt.sink.Ready() {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(sinkUpDesc, prometheus.GaugeValue, up, rt.sink.Name())
		}
		if rt.outbox == nil {
			continue
		}
		s := rt.outbox.Stats(now)
		ch <- prometheus.MustNewConstMetric(outboxMessagesDesc, prometheus.GaugeValue, float64(s.Messages), rt.cfg.Name)
		ch <- prometheus.MustNewConstMetric(outboxBytesDesc, prometheus.GaugeValue, float64(s.Bytes), rt.cfg.Name)
		ch <- prometheus.MustNewConstMetric(outboxAgeDesc, prometheus.GaugeValue, s.OldestAge.Seconds(), rt.cfg.Name)
	}
}
