package mqttin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/backoff"
	"github.com/opsfirehose/firehose/internal/connstate"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
	"github.com/opsfirehose/firehose/router"
)

// Subscriber runs the router against an external broker: it holds a shared
// subscription $share/<group>/<filter> for the routes' filters, so N bridges
// route each message once, and acknowledges a message (PUBACK) only after
// Route made it safe. The broker redelivers unacknowledged messages when
// this client id reconnects (its session is persistent: CleanSession false).
//
// Paho calls the message handler on its own goroutine, in arrival order
// (OrderMatters true); the handler only appends the message to a queue and
// never waits. One worker takes the queue in batches, routes each batch,
// and then acknowledges its messages in arrival order.
type Subscriber struct {
	router  *router.Router
	client  paho.Client
	filters []string
	group   string
	// own are the adapters' topic prefixes, whose messages a bridge routed
	// before publishing them (see NewSubscriber).
	own []string
	// sessionMark and sessionsLost: see SubscriberOptions.SessionMark.
	sessionMark  string
	sessionsLost prometheus.Counter
	log          zerolog.Logger
	dropped      prometheus.Counter // QoS 0 messages the queue had no room for
	// brokerDropped is what the external broker says it dropped since the
	// subscriber first heard (see watchBrokerDrops).
	brokerDropped prometheus.Gauge
	// maxBackoff bounds the wait between attempts to subscribe.
	maxBackoff time.Duration
	queue      queue

	// idPrefix and seq make de-duplication ids: unique per message received.
	idPrefix string
	seq      atomic.Uint64

	// state is why the connection is down (a CONNACK's "not Authorized",
	// a refused dial), for Ready and the log.
	state *connstate.State

	mu         sync.Mutex
	conn       uint64 // counts connections; a subscribe loop of an older one stops
	subscribed bool   // the shared subscription is in place on the current connection
	subErr     error  // why the last attempt to subscribe failed
	// dropsLast is the broker's count of dropped messages last heard, and
	// drops how many it dropped since first heard (see watchBrokerDrops).
	dropsLast, drops uint64
	dropsHeard       bool
	sessionLost      bool // the broker had no session at the start, though it once did

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// ErrNotSubscribed is wrapped by Subscriber.Ready while the subscriber is not
// receiving messages from the external broker.
var ErrNotSubscribed = errors.New("router subscriber not receiving from the external broker")

// maxQoS0Queued and maxQoS0Bytes bound the QoS 0 messages waiting to be
// routed, in number and in payload bytes; beyond either they are dropped
// (and counted), as QoS 0 allows. QoS 1 messages are never dropped: the
// broker cannot have more of them unacknowledged than there are packet ids
// (65535), which bounds the queue.
const (
	maxQoS0Queued = 65536
	maxQoS0Bytes  = 64 << 20
)

// SubscriberOptions are what NewSubscriber needs besides the router and the
// connection.
type SubscriberOptions struct {
	// Group is the share group: $share/<Group>/<filter>.
	Group string
	// OwnPrefixes: see NewSubscriber.
	OwnPrefixes []string
	// SessionMark is a file that says the broker once had this client's
	// session; when set, a broker that has none at the next start (it
	// expired, or a restart without persistence lost it) is reported.
	SessionMark string
	Metrics     *Metrics
	Logger      zerolog.Logger
}

// Conn is the subscriber's connection to the external broker.
type Conn struct {
	// URL is tcp://, ssl://, ws:// or wss://host:port.
	URL string
	// ClientID is the subscriber's own, fixed so that the broker keeps its
	// session (and the messages queued for it) across reconnects.
	ClientID           string
	Username, Password string
	TLS                *tlsconfig.Client
	// MaxReconnectInterval bounds the back-off between reconnects.
	MaxReconnectInterval time.Duration
}

// NewSubscriber prepares the subscription for r's routes; cfg describes the
// connection.
//
// OwnPrefixes are the topic prefixes of the bridges' own adapters (chef,
// ansible, ...): the bridge whose adapter accepted such a message routed it
// before publishing it on the broker (a sender's 2xx waits for that), so the
// subscriber acknowledges it without routing it again. MQTT 3.1.1 carries
// nothing else that could tell it which messages a bridge routed already.
func NewSubscriber(r *router.Router, cfg Conn, o SubscriberOptions) (*Subscriber, error) {
	group, ownPrefixes, m, log := o.Group, o.OwnPrefixes, o.Metrics, o.Logger
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails
	s := &Subscriber{
		router:        r,
		filters:       routeFilters(r.Filters()),
		group:         group,
		own:           ownPrefixes,
		sessionMark:   o.SessionMark,
		sessionsLost:  m.sessionsLost,
		log:           log.With().Str("component", "router-subscriber").Logger(),
		dropped:       m.externalDropped,
		brokerDropped: m.brokerDropped,
		maxBackoff:    cfg.MaxReconnectInterval,
		idPrefix:      "mqtt-" + hex.EncodeToString(nonce[:]) + "-",
		done:          make(chan struct{}),
	}
	if s.maxBackoff <= 0 {
		s.maxBackoff = 30 * time.Second
	}
	s.state = connstate.New(s.log, "router subscriber")
	s.queue.init()
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
		SetOrderMatters(true). // handlers run in arrival order, on paho's goroutine: receive only queues
		SetOnConnectHandler(s.onConnect).
		SetConnectionLostHandler(func(c paho.Client, err error) {
			// Paho runs this beside its reconnect: once a new connection is
			// open, its onConnect owns the state, and this loss is old news.
			if !c.IsConnectionOpen() {
				s.setSubscribed(0, false, nil)
			}
			s.state.Lost(err)
			s.log.Warn().Err(err).Msg("lost the external broker; unacknowledged messages will be redelivered")
		}).
		SetDefaultPublishHandler(s.receive).
		// paho retries quietly; this is where it tells why an attempt
		// failed, for the log and /readyz.
		SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
			if f, ok := n.(paho.ConnectionNotificationFailed); ok && s.ctx.Err() == nil {
				s.state.Failed(f.Reason, "cannot connect to "+cfg.URL)
			}
		})
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

// Start connects (retrying in the background) and starts routing, until
// Close; ctx bounds the start only, which does not wait for the connection.
func (s *Subscriber) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("router subscriber: start: %w", err)
	}
	tok := s.client.Connect()
	go s.run()
	go s.checkSession(tok)
	return nil
}

// checkSession reports a broker that has no session for this client at the
// first connection though it had one before (SessionMark says so): what it
// had queued for the bridge while it was down is gone. Only the first
// connection's CONNACK is seen: paho does not show those of its reconnects.
func (s *Subscriber) checkSession(tok paho.Token) {
	if s.sessionMark == "" {
		return
	}
	select {
	case <-tok.Done():
	case <-s.ctx.Done():
		return
	}
	ct, ok := tok.(*paho.ConnectToken)
	if !ok || tok.Error() != nil {
		return
	}
	if _, err := os.Stat(s.sessionMark); err == nil && !ct.SessionPresent() {
		s.mu.Lock()
		s.sessionLost = true
		s.mu.Unlock()
		s.sessionsLost.Inc()
		s.log.Error().Msg("the external broker had no session for the router though it had one before: it expired (mosquitto persistent_client_expiration, EMQX session_expiry_interval) or a broker restart lost it (mosquitto persistence true); what it queued for this bridge while it was down is lost")
		return
	}
	err := os.MkdirAll(filepath.Dir(s.sessionMark), 0o750)
	if err == nil {
		err = os.WriteFile(s.sessionMark, []byte("the external broker holds a persistent session for this bridge's router\n"), 0o600)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("cannot note that the broker has the router's session; a session it loses will not be reported")
	}
}

// Ready returns nil while the subscriber is connected to the external broker
// with its shared subscription in place; otherwise an error wrapping
// ErrNotSubscribed says why.
func (s *Subscriber) Ready() error {
	if !s.client.IsConnectionOpen() {
		return fmt.Errorf("%w: %s", ErrNotSubscribed, s.state.Why("not connected yet"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.subscribed:
		return nil
	case s.subErr != nil:
		return fmt.Errorf("%w: the shared subscription failed: %w", ErrNotSubscribed, s.subErr)
	default:
		return fmt.Errorf("%w: subscribing", ErrNotSubscribed)
	}
}

// receive is paho's message handler: it queues and returns at once.
func (s *Subscriber) receive(_ paho.Client, m paho.Message) {
	if !s.queue.push(m) {
		s.dropped.Inc()
		s.log.Debug().Str("topic", m.Topic()).Msg("QoS 0 message dropped: too many waiting to be routed")
	}
}

// onConnect runs on a goroutine of its own for each (re)connection. It
// subscribes, retrying with back-off until the broker grants every filter,
// the connection is lost, or the subscriber closes. Paho does not subscribe
// again by itself, and disconnecting here would end its reconnecting for good.
func (s *Subscriber) onConnect(c paho.Client) {
	if n := s.state.Connected(); n > 0 {
		s.log.Info().Int("failed_attempts", n).Msg("connected to the external broker")
	}
	s.mu.Lock()
	s.conn++
	conn := s.conn
	s.subscribed, s.subErr = false, nil
	s.mu.Unlock()
	if len(s.filters) == 0 {
		s.setSubscribed(conn, true, nil)
		return
	}
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: s.maxBackoff}
	for {
		err := s.subscribe(c)
		if !s.setSubscribed(conn, err == nil, err) {
			return // a newer connection subscribes
		}
		if err == nil {
			s.log.Info().Strs("filters", s.filters).Str("group", s.group).Strs("routed_by_adapters", s.own).
				Msg("routing from the external broker; messages under the adapters' topic prefixes were routed by the bridge that accepted them, and are not routed again (an MQTT publisher's message there is not routed)")
			s.watchBrokerDrops(c)
			return
		}
		wait := retry.Next()
		s.log.Error().Err(err).Dur("retry_in", wait).Msg("shared subscription failed; nothing is routed from the external broker until it succeeds")
		if !backoff.Sleep(s.ctx, wait) {
			return
		}
		if !c.IsConnectionOpen() {
			return // the next connection subscribes
		}
	}
}

// brokerDropsTopic is where mosquitto publishes how many messages it has
// dropped (every sys_interval, 10s by default): a queue for a disconnected
// client over max_queued_messages or max_queued_bytes, which is how a dead
// bridge's share of the shared subscription is lost.
const brokerDropsTopic = "$SYS/broker/publish/messages/dropped"

// watchBrokerDrops subscribes to what the broker says of the messages it
// drops, where it says it (mosquitto; EMQX and others publish no such
// topic, and an ACL may refuse it: then nothing is known, and nothing is
// said). The count when first heard is the base: drops before the bridge
// started may be any client's. Every rise after it is logged, counted and
// shown by /readyz.
func (s *Subscriber) watchBrokerDrops(c paho.Client) {
	c.Subscribe(brokerDropsTopic, 0, func(_ paho.Client, m paho.Message) {
		n, err := strconv.ParseUint(strings.TrimSpace(string(m.Payload())), 10, 64)
		if err != nil {
			return
		}
		s.mu.Lock()
		if !s.dropsHeard {
			s.dropsLast, s.dropsHeard = n, true
		}
		if n < s.dropsLast {
			s.dropsLast = 0 // the broker restarted, and counts from 0 again
		}
		rise := n - s.dropsLast
		s.dropsLast = n
		s.drops += rise
		total := s.drops
		s.mu.Unlock()
		s.brokerDropped.Set(float64(total))
		if rise > 0 {
			s.log.Error().Uint64("dropped", rise).Uint64("dropped_since_start", total).
				Msg("the external broker dropped messages it had queued (mosquitto's max_queued_messages, max_queued_bytes): if they were a stopped bridge's share of the shared subscription, messages from MQTT publishers are lost; set max_queued_messages 0 (see the README's broker settings)")
		}
	})
}

// Warnings are what the subscriber has seen of an external broker that
// drops messages, for /readyz: they do not make the bridge unready (the
// other bridges see the same), but say what to change.
func (s *Subscriber) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if s.sessionLost {
		out = append(out, "the external broker had lost the router's session at the start (raise mosquitto's persistent_client_expiration, EMQX's session_expiry_interval; mosquitto persistence true)")
	}
	if s.drops == 0 {
		return out
	}
	return append(out, fmt.Sprintf("the external broker dropped %d messages since this bridge started (%s); raise mosquitto's max_queued_messages (0: no limit)", s.drops, brokerDropsTopic))
}

// setSubscribed records the outcome of subscribing on connection conn (0:
// the connection is lost) and reports whether conn is still the current one.
func (s *Subscriber) setSubscribed(conn uint64, ok bool, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn == 0 {
		s.subscribed = false
		return false
	}
	if conn != s.conn {
		return false
	}
	s.subscribed, s.subErr = ok, err
	return true
}

// subscribe sends one SUBSCRIBE for every filter and checks that the broker
// granted each (a SUBACK code of 0x80 or above is a refusal, which paho does
// not report as an error).
func (s *Subscriber) subscribe(c paho.Client) error {
	subs := make(map[string]byte, len(s.filters))
	for _, f := range s.filters {
		subs["$share/"+s.group+"/"+f] = 1
	}
	tok := c.SubscribeMultiple(subs, nil) // messages arrive at the default handler
	if !tok.WaitTimeout(10 * time.Second) {
		return errors.New("no SUBACK within 10s")
	}
	if err := tok.Error(); err != nil {
		return err
	}
	var refused []string
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for f, code := range st.Result() {
			if code >= 0x80 {
				refused = append(refused, f)
			}
		}
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return fmt.Errorf("the broker refused %s (check its ACL for this client)", strings.Join(refused, ", "))
	}
	return nil
}

// run routes what arrives in batches and acknowledges each batch in arrival
// order, as MQTT asks. A batch that cannot be made safe (an outbox full) is
// retried until it can: holding the acks is the back-pressure.
func (s *Subscriber) run() {
	defer close(s.done)
	go func() { <-s.ctx.Done(); s.queue.close() }()
	for {
		batch := s.queue.take(router.MaxBatch)
		if batch == nil {
			return
		}
		msgs := make([]bus.Message, 0, len(batch))
		now := s.router.Now()
		for _, m := range batch {
			if s.routedByAdapter(m.Topic()) {
				continue // acknowledged with the batch: its bridge routed it
			}
			msg := bus.Message{Topic: m.Topic(), Payload: m.Payload(), QoS: m.Qos(), Retain: m.Retained(), Headers: map[string]string{
				bus.HeaderMsgID:      s.msgID(),
				bus.HeaderSource:     SourceMQTT,
				bus.HeaderReceivedAt: now.UTC().Format(time.RFC3339Nano),
			}}
			// The external broker acknowledged it to its publisher already;
			// no retry can make it fit, and holding its ack would stop
			// everything behind it. Fit counted it as too_large.
			if err := s.router.Fit(&msg); err != nil {
				s.log.Warn().Err(err).Msg("a message from the external broker is too large for a required route; dropped")
				continue
			}
			msgs = append(msgs, msg)
		}
		retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
		for {
			err := s.router.Route(s.ctx, msgs...)
			if err == nil {
				break
			}
			s.log.Warn().Err(err).Msg("cannot make messages from the external broker safe; holding their acks and retrying")
			if !retry.Wait(s.ctx) {
				return
			}
		}
		for _, m := range batch {
			m.Ack()
		}
	}
}

// msgID is a de-duplication id made when a message is received: it travels
// with the message through the sinks' retries and the outbox, so those are
// stored once, while two identical messages (heartbeats) are two. A
// redelivery by the external broker (after a reconnect) gets a new id: MQTT
// 3.1.1 carries no header that could say it is the same message, so it may
// be stored twice, as at-least-once allows.
func (s *Subscriber) msgID() string {
	return s.idPrefix + strconv.FormatUint(s.seq.Add(1), 10)
}

// routedByAdapter reports whether topic is under one of the adapters'
// topic prefixes.
func (s *Subscriber) routedByAdapter(topic string) bool {
	for _, p := range s.own {
		if topic == p || strings.HasPrefix(topic, p+"/") {
			return true
		}
	}
	return false
}

// Close stops routing and disconnects. Messages received but not acknowledged
// are redelivered when this client id connects again.
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

// queue holds received messages until the worker routes them. push never
// blocks, so paho's goroutine never waits on routing.
type queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	items  []paho.Message
	qos0   int // QoS 0 messages in items
	qos0B  int // their payload bytes
	closed bool
}

func (q *queue) init() { q.cond = sync.NewCond(&q.mu) }

// push appends m, or drops it when it is QoS 0 and the QoS 0 messages
// waiting already reach maxQoS0Queued or maxQoS0Bytes; it reports whether m
// was queued.
func (q *queue) push(m paho.Message) bool {
	q.mu.Lock()
	if m.Qos() == 0 {
		if q.qos0 >= maxQoS0Queued || q.qos0B+len(m.Payload()) > maxQoS0Bytes {
			q.mu.Unlock()
			return false
		}
		q.qos0++
		q.qos0B += len(m.Payload())
	}
	q.items = append(q.items, m)
	q.mu.Unlock()
	q.cond.Signal()
	return true
}

// take waits for messages and returns up to n of them, oldest first; nil
// once the queue is closed.
func (q *queue) take(n int) []paho.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil
	}
	n = min(n, len(q.items))
	batch := append([]paho.Message(nil), q.items[:n]...)
	clear(q.items[:n])
	q.items = q.items[n:]
	for _, m := range batch {
		if m.Qos() == 0 {
			q.qos0--
			q.qos0B -= len(m.Payload())
		}
	}
	return batch
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// routeFilters is the smallest set of the routes' filters that covers them
// all, so that overlapping routes do not make the broker send a message twice.
func routeFilters(all []string) []string {
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
