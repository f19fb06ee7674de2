package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/sinks"
)

// Subscriber runs the router against an external broker: it holds a shared
// subscription $share/<group>/<filter> for the routes' filters, so N bridges
// route each message once, and acknowledges a message (PUBACK) only after
// Route made it safe. Unacknowledged messages are redelivered by the broker
// when the subscriber reconnects.
type Subscriber struct {
	router   *Router
	client   paho.Client
	filters  []string
	group    string
	log      zerolog.Logger
	incoming chan paho.Message

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// maxReceived bounds messages received but not yet acknowledged. Brokers cap
// in-flight QoS 1 messages per client far lower (mosquitto: 20 by default),
// so paho's handler never blocks on this queue in practice.
const maxReceived = 65536

// NewSubscriber prepares the subscription; cfg describes the connection (as
// for an mqtt sink, with its own client id).
func NewSubscriber(r *Router, cfg sinks.Config, group string, log zerolog.Logger) (*Subscriber, error) {
	s := &Subscriber{
		router:   r,
		filters:  routeFilters(r),
		group:    group,
		log:      log.With().Str("component", "router-subscriber").Logger(),
		incoming: make(chan paho.Message, maxReceived),
		done:     make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	opts := paho.NewClientOptions().
		AddBroker(cfg.URL).
		SetClientID(cfg.ClientID).
		SetCleanSession(false).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).
		SetMaxReconnectInterval(cfg.MaxReconnectInterval).
		SetUsername(cfg.Username).
		SetPassword(cfg.Password).
		SetAutoAckDisabled(true).
		SetOrderMatters(false). // the handler only queues; it must never block paho
		SetOnConnectHandler(s.subscribe).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			s.log.Warn().Err(err).Msg("lost the external broker; unacknowledged messages will be redelivered")
		}).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.incoming <- m })
	if cfg.TLS != nil {
		tlsCfg, err := cfg.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("broker.external.tls: %w", err)
		}
		opts.SetTLSConfig(tlsCfg)
	}
	s.client = paho.NewClient(opts)
	return s, nil
}

// Start connects (retrying in the background) and starts routing.
func (s *Subscriber) Start() {
	s.client.Connect()
	go s.run()
}

func (s *Subscriber) subscribe(c paho.Client) {
	if len(s.filters) == 0 {
		return
	}
	subs := map[string]byte{}
	for _, f := range s.filters {
		subs["$share/"+s.group+"/"+f] = 1
	}
	tok := c.SubscribeMultiple(subs, nil) // messages arrive at the default handler
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		s.log.Error().Err(tok.Error()).Msg("shared subscription failed; reconnecting")
		c.Disconnect(0)
		return
	}
	s.log.Info().Strs("filters", s.filters).Str("group", s.group).Msg("routing from the external broker")
}

// run routes what arrives in batches and acknowledges in arrival order, as
// MQTT asks. A batch that cannot be made safe (an outbox full) is retried
// until it can: holding the acks is the back-pressure.
func (s *Subscriber) run() {
	defer close(s.done)
	for {
		var batch []paho.Message
		select {
		case <-s.ctx.Done():
			return
		case m := <-s.incoming:
			batch = append(batch, m)
		}
	more:
		for len(batch) < replayBatch {
			select {
			case m := <-s.incoming:
				batch = append(batch, m)
			default:
				break more
			}
		}
		msgs := make([]bus.Message, len(batch))
		now := s.router.now()
		for i, m := range batch {
			msgs[i] = bus.Message{Topic: m.Topic(), Payload: m.Payload(), QoS: m.Qos(), Retain: m.Retained(), Headers: map[string]string{
				bus.HeaderMsgID:      contentMsgID(m.Topic(), m.Payload()),
				bus.HeaderSource:     SourceMQTT,
				bus.HeaderReceivedAt: now.UTC().Format(time.RFC3339Nano),
			}}
		}
		backoff := 100 * time.Millisecond
		for {
			err := s.router.Route(s.ctx, msgs...)
			if err == nil {
				break
			}
			s.log.Warn().Err(err).Msg("cannot make messages from the external broker safe; holding their acks and retrying")
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
		}
		for _, m := range batch {
			m.Ack()
		}
	}
}

// contentMsgID de-duplicates by content: an MQTT 3.1.1 subscriber sees no
// headers, so a message redelivered by the broker can only be recognised by
// its topic and payload.
func contentMsgID(topic string, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write(payload)
	return "mqtt-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Close stops routing and disconnects. Messages received but not acknowledged
// are redelivered, to this bridge or another, after the reconnect.
func (s *Subscriber) Close(ctx context.Context) error {
	s.once.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
		}
		s.client.Disconnect(250)
	})
	return nil
}

// routeFilters is the smallest set of the routes' filters that covers them
// all, so that overlapping routes do not make the broker send a message twice.
func routeFilters(r *Router) []string {
	var all []string
	for _, rt := range r.routes {
		all = append(all, rt.cfg.Filters...)
	}
	sort.Strings(all)
	var out []string
	for i, f := range all {
		covered := false
		for j, g := range all {
			if i != j && covers(g, f) && (!covers(f, g) || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, f)
		}
	}
	return out
}

// covers reports whether every topic that filter b matches, a matches too.
func covers(a, b string) bool {
	al, bl := strings.Split(a, "/"), strings.Split(b, "/")
	for i, x := range al {
		if x == "#" {
			return true
		}
		if i >= len(bl) {
			return false
		}
		y := bl[i]
		switch {
		case y == "#":
			return false
		case x == "+":
		case x != y || y == "+":
			return false
		}
	}
	return len(al) == len(bl)
}
