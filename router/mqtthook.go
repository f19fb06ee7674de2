package router

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsfirehose/firehose/bus"
)

// SourceMQTT is the Firehose-Source header of messages that MQTT clients
// published straight to the embedded broker.
const SourceMQTT = "mqtt"

// Hook routes what MQTT clients publish to the embedded broker, in the
// publish path: mochi sends a QoS 1 publisher its PUBACK only after OnPublish
// returns, so the PUBACK means the message is safe on every required route.
// The bridge's own inline client is skipped: the bridge's publisher has
// already routed those messages.
type Hook struct {
	mqtt.HookBase
	router   *Router
	broker   Disconnecter
	rejected prometheus.Counter
}

// Disconnecter ends a client's connection; the embedded broker is one.
type Disconnecter interface {
	Disconnect(cl *mqtt.Client, code packets.Code) error
}

// NewHook returns the hook; the broker is needed to disconnect MQTT 3.1.1
// publishers whose message cannot be made safe.
func NewHook(r *Router, broker Disconnecter) *Hook {
	return &Hook{router: r, broker: broker, rejected: r.metrics.mqttRefused}
}

// ID names the hook in mochi's logs.
func (h *Hook) ID() string { return "firehose-router" }

// Provides says the hook handles OnPublish only.
func (h *Hook) Provides(b byte) bool { return bytes.IndexByte([]byte{mqtt.OnPublish}, b) >= 0 }

// OnPublish routes one message from an MQTT client.
func (h *Hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline || len(h.router.routes) == 0 {
		return pk, nil
	}
	now := h.router.now()
	msg := bus.Message{
		Topic:   pk.TopicName,
		Payload: pk.Payload,
		QoS:     pk.FixedHeader.Qos,
		Retain:  pk.FixedHeader.Retain,
		Headers: map[string]string{
			bus.HeaderMsgID:      clientMsgID(cl.ID, pk, now),
			bus.HeaderSource:     SourceMQTT,
			bus.HeaderReceivedAt: now.UTC().Format(time.RFC3339Nano),
		},
	}
	err := h.router.Route(context.Background(), msg)
	if err == nil {
		return pk, nil
	}
	h.router.log.Warn().Err(err).Str("client", cl.ID).Str("topic", pk.TopicName).Msg("an MQTT publish could not be made safe; refusing it so the client resends")
	h.rejected.Inc()
	switch {
	case pk.FixedHeader.Qos == 0:
		// QoS 0 promises nothing and has no ack to withhold: deliver it locally.
		return pk, nil
	case cl.Properties.ProtocolVersion == 5:
		// mochi answers with this reason code in the PUBACK and does not deliver.
		return pk, packets.ErrQuotaExceeded
	default:
		// MQTT 3.1.1 has no negative ack: no PUBACK, and a disconnect so the
		// client resends the message when it reconnects.
		_ = h.broker.Disconnect(cl, packets.ErrServerBusy)
		return pk, packets.ErrRejectPacket
	}
}

// clientMsgID is a stable de-duplication id for a client's QoS 1 message: a
// client resending the same packet after a reconnect produces the same id, so
// JetStream stores it once; a new message gets a new packet id. QoS 0
// messages are never resent, so their id also covers the arrival time, lest
// two identical readings be taken for one.
func clientMsgID(clientID string, pk packets.Packet, now time.Time) string {
	h := sha256.New()
	var n [10]byte
	binary.BigEndian.PutUint16(n[:2], pk.PacketID)
	if pk.FixedHeader.Qos == 0 {
		binary.BigEndian.PutUint64(n[2:], uint64(now.UnixNano()))
	}
	h.Write([]byte(clientID))
	h.Write([]byte{0})
	h.Write(n[:])
	h.Write([]byte(pk.TopicName))
	h.Write([]byte{0})
	h.Write(pk.Payload)
	return "mqtt-" + hex.EncodeToString(h.Sum(nil)[:16])
}
