package mqttin

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsfirehose/firehose/internal/metric"
)

// Metrics are the MQTT inputs' counters. Both are registered whatever the
// broker mode, so that /metrics names the same series in either.
type Metrics struct {
	refused prometheus.Counter
	// externalDropped counts QoS 0 messages from the external broker that
	// the router subscriber had no room for.
	externalDropped prometheus.Counter
	// brokerDropped is how many messages the external broker says it
	// dropped since the bridge started (mosquitto's
	// $SYS/broker/publish/messages/dropped).
	brokerDropped prometheus.Gauge
	// sessionsLost counts starts at which the external broker had lost the
	// router's persistent session.
	sessionsLost prometheus.Counter
}

// NewMetrics makes the inputs' counters and registers them with reg; nil
// means none.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		refused: metric.Counter("firehose_mqtt_publishes_refused_total",
			"MQTT publishes refused because a required route could not make them safe (the client is told to resend)."),
		externalDropped: metric.Counter("firehose_external_qos0_dropped_total",
			"QoS 0 messages from the external broker dropped because too many were waiting to be routed."),
		brokerDropped: metric.Gauge("firehose_external_broker_dropped_messages",
			"Messages the external broker reports it dropped (mosquitto's $SYS/broker/publish/messages/dropped: queues over max_queued_messages) since the bridge started; a bridge's router session among them is a message from an MQTT publisher lost."),
		sessionsLost: metric.Counter("firehose_external_sessions_lost_total",
			"Starts at which the external broker had no session for the router though it had one before: what it had queued for the bridge is lost."),
	}
	if reg == nil {
		return m, nil
	}
	if err := metric.Register(reg, m.refused, m.externalDropped, m.brokerDropped, m.sessionsLost); err != nil {
		return nil, fmt.Errorf("mqtt input metrics: %w", err)
	}
	return m, nil
}
