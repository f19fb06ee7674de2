package broker

import (
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/mochi-mqtt/server/v2/system"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/metric"
)

// Reasons a message is dropped, as the `reason` label of firehose_broker_messages_dropped_total.
const (
	dropSlowSubscriber = "slow_subscriber" // the subscriber's outbound queue was full
	dropInflightQuota  = "inflight_quota"  // too many unacknowledged QoS 1/2 messages for the subscriber
	dropExpired        = "expired"         // a queued QoS 1/2 message expired before delivery
)

type metrics struct {
	authFailures  prometheus.Counter
	publishDenied prometheus.Counter
	refused       *prometheus.CounterVec
	// Drops are counted on the publisher's goroutine; plain atomics keep that cheap.
	droppedSlow    atomic.Int64
	droppedExpired atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{
		authFailures: metric.Counter("firehose_broker_auth_failures_total",
			"MQTT connections refused for bad credentials."),
		publishDenied: metric.Counter("firehose_broker_publish_denied_total",
			"MQTT publishes refused by the ACL, including every anonymous publish and every will refused at CONNECT."),
		refused: metric.CounterVec("firehose_broker_connections_refused_total",
			"MQTT connections refused or ended by the trust boundary, by reason.", "reason"),
	}
}

// refuse counts a connection refused for reason.
func (m *metrics) refuse(reason string) { m.refused.WithLabelValues(reason).Inc() }

// register adds the broker's metrics to reg. Gauges read mochi's own atomic
// counters at scrape time, so the publish path pays nothing for them.
func (m *metrics) register(reg prometheus.Registerer, info *system.Info, retained func() int) error {
	gauge := func(name, help string, v *int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(atomic.LoadInt64(v)) })
	}
	counter := func(name, help string, v *int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(atomic.LoadInt64(v)) })
	}
	for _, c := range []prometheus.Collector{
		gauge("firehose_broker_clients_connected", "MQTT clients connected now.", &info.ClientsConnected),
		gauge("firehose_broker_subscriptions", "Active subscriptions.", &info.Subscriptions),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "firehose_broker_retained_messages", Help: "Retained messages held."},
			func() float64 { return float64(retained()) }),
		gauge("firehose_broker_inflight_messages", "QoS 1/2 messages awaiting acknowledgement.", &info.Inflight),
		counter("firehose_broker_messages_received_total", "PUBLISH packets received by the broker, from clients and from the bridge.", &info.MessagesReceived),
		counter("firehose_broker_messages_sent_total", "PUBLISH packets sent to subscribers.", &info.MessagesSent),
		counter("firehose_broker_bytes_received_total", "Bytes received from MQTT clients.", &info.BytesReceived),
		counter("firehose_broker_bytes_sent_total", "Bytes sent to MQTT clients.", &info.BytesSent),
		m.authFailures,
		m.publishDenied,
		m.refused,
		&droppedCollector{m: m, info: info},
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// droppedCollector reports every drop reason under one metric name, including
// mochi's own count of in-flight quota drops, which has no hook.
type droppedCollector struct {
	m    *metrics
	info *system.Info
}

var droppedDesc = prometheus.NewDesc("firehose_broker_messages_dropped_total",
	"Messages the broker dropped for a subscriber, by reason.", []string{"reason"}, nil)

func (d *droppedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- droppedDesc }

func (d *droppedCollector) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range map[string]int64{
		dropSlowSubscriber: d.m.droppedSlow.Load(),
		dropExpired:        d.m.droppedExpired.Load(),
		dropInflightQuota:  atomic.LoadInt64(&d.info.InflightDropped),
	} {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(n), reason)
	}
}

// dropHook counts and reports messages mochi drops for slow subscribers.
type dropHook struct {
	mqtt.HookBase
	log     zerolog.Logger
	metrics *metrics
	warn    rateLimitedLog
}

func newDropHook(log zerolog.Logger, m *metrics) *dropHook {
	return &dropHook{log: log, metrics: m, warn: rateLimitedLog{log: log, what: "messages dropped for slow subscribers"}}
}

func (h *dropHook) ID() string { return "firehose-drops" }

func (h *dropHook) Provides(b byte) bool { return b == mqtt.OnPublishDropped || b == mqtt.OnQosDropped }

// OnPublishDropped runs on the publisher's goroutine, so it only counts, and
// logs at most once per interval.
func (h *dropHook) OnPublishDropped(cl *mqtt.Client, pk packets.Packet) {
	h.metrics.droppedSlow.Add(1)
	h.warn.do(func() {
		h.log.Warn().Str("client", cl.ID).Str("remote", cl.Net.Remote).Str("topic", pk.TopicName).
			Msg("dropping messages for a slow subscriber: its queue is full (broker.max_queued_messages)")
	})
}

// OnQosDropped counts QoS 1/2 messages that expired before the subscriber took them.
func (h *dropHook) OnQosDropped(cl *mqtt.Client, pk packets.Packet) {
	h.metrics.droppedExpired.Add(1)
}
