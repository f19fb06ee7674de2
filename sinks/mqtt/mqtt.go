package mqtt

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/connstate"
	"github.com/opsfirehose/firehose/sinks"
)

// Sink is a sink on an external MQTT broker (mosquitto, EMQX) through paho:
// QoS 1, a fixed client id with CleanSession false and a file store, so a
// message sent but not yet acknowledged survives a reconnect or a restart.
// It is also the bridge's publisher in external broker mode.
type Sink struct {
	name      string
	client    paho.Client
	log       zerolog.Logger
	timeout   time.Duration
	maxPacket int
	limit     sinks.Limit // made once: Limit runs for every routed message
	state     *connstate.State
	whenLost  string // what happens to messages while disconnected, for the log
	// resumed says paho has resent what its store held since the
	// connection opened (Ready): set when it lists the store while
	// connected, cleared before each reconnect.
	resumed atomic.Bool

	closed    atomic.Bool
	closeOnce sync.Once
}

var _ sinks.Sink = (*Sink)(nil)

// Option changes a sink New makes.
type Option func(*Sink)

// WhenLost is what the log says happens to messages while the connection
// is down. A route's sink says they wait in the route's outbox; the
// bridge's own publisher on an external broker says its senders are told
// to retry.
func WhenLost(what string) Option { return func(s *Sink) { s.whenLost = what } }

// New starts connecting in the background and keeps reconnecting, with the
// back-off bounded by max_reconnect_interval. dataDir holds the file store
// unless store_dir is set.
func New(name string, cfg Config, dataDir string, log zerolog.Logger, opts ...Option) (*Sink, error) {
	s := &Sink{name: name, log: log.With().Str("sink", name).Logger(), timeout: cfg.ConfirmTimeout,
		maxPacket: int(cfg.EffectiveMaxPacketSize()),
		whenLost:  "messages for required routes wait in their outbox (senders get 503 once it is full)"}
	for _, o := range opts {
		o(s)
	}
	s.limit = cfg.ConfiguredLimit(name)
	s.state = connstate.New(s.log, "MQTT sink "+name)
	storeDir := cfg.StoreDir
	if storeDir == "" {
		storeDir = filepath.Join(dataDir, "mqtt", name)
	}
	popts := paho.NewClientOptions().
		AddBroker(cfg.URL).
		SetClientID(cfg.ClientID).
		SetCleanSession(false).
		SetStore(listingStore{Store: paho.NewFileStore(storeDir), listed: s.storeListed}).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).
		SetMaxReconnectInterval(cfg.MaxReconnectInterval).
		SetKeepAlive(30 * time.Second).
		SetUsername(cfg.Username).
		SetPassword(cfg.Password).
		SetOnConnectHandler(func(paho.Client) {
			ev := s.log.Info().Str("url", cfg.URL)
			if n := s.state.Connected(); n > 0 {
				ev = ev.Int("failed_attempts", n)
			}
			ev.Msg("MQTT sink connected")
		}).
		// Called before each attempt to connect again, on the goroutine
		// that then connects and resends: before the connection opens.
		SetReconnectingHandler(func(paho.Client, *paho.ClientOptions) { s.resumed.Store(false) }).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			s.state.Lost(err)
			s.log.Warn().Err(err).Msg("MQTT sink disconnected; " + s.whenLost)
		}).
		// paho retries quietly; this is where it tells why an attempt
		// failed (a CONNACK's "not Authorized", a refused dial).
		SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
			if f, ok := n.(paho.ConnectionNotificationFailed); ok && !s.closed.Load() {
				s.state.Failed(f.Reason, "cannot connect to "+cfg.URL)
			}
		})
	if cfg.TLS != nil {
		tlsCfg, err := cfg.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("sink %s: tls: %w", name, err)
		}
		popts.SetTLSConfig(tlsCfg)
	}
	s.client = paho.NewClient(popts)
	s.client.Connect() // with ConnectRetry, this keeps trying in the background
	return s, nil
}

// Name is the sink's configured name.
func (s *Sink) Name() string { return s.name }

// Ready reports whether the connection is up, and paho done with setting
// it up. paho says a connection is open before it resends what its store
// holds (the session is kept: clean_session false), and it resends from a
// list of the store taken then: a message published in between went twice,
// as the conformance suite's BatchArrivesInOrder saw under load. So the
// sink is ready once paho has listed its store on the open connection
// (listingStore).
func (s *Sink) Ready() bool {
	return !s.closed.Load() && s.client.IsConnectionOpen() && s.resumed.Load()
}

// storeListed notes that paho listed its store. It does so before it
// connects, to reserve the stored messages' ids, and on each connection,
// once it is open, to resend them: only the second says it is done.
func (s *Sink) storeListed() {
	if s.client != nil && s.client.IsConnectionOpen() {
		s.resumed.Store(true)
	}
}

// listingStore is a paho.Store that tells when paho lists it (All).
type listingStore struct {
	paho.Store
	listed func()
}

// All lists the store's keys, and then says so.
func (l listingStore) All() []string {
	keys := l.Store.All()
	l.listed()
	return keys
}

// NotReadyReason is why the sink is not connected: the reason paho gave
// for its last failed attempt, or for losing the connection.
func (s *Sink) NotReadyReason() string {
	switch {
	case s.closed.Load():
		return "closed"
	case s.Ready():
		return ""
	case s.client.IsConnectionOpen():
		return "connected, resending the messages its store held"
	}
	return s.state.Why("not connected yet")
}

// Limit is max_packet_size: MQTT 3.1.1 cannot ask the broker.
func (s *Sink) Limit() sinks.Limit { return s.limit }

// Address is topic itself: MQTT takes the bus's topics as they are, and a
// route's subject_prefix does not apply.
func (s *Sink) Address(_, topic string) (string, error) { return topic, nil }

// MessageSize is the size of the QoS 1 PUBLISH packet that carries m.
func (s *Sink) MessageSize(m *bus.Message) int { return PublishPacketSize(m.Topic, len(m.Payload)) }

// PublishPacketSize is the size of an MQTT 3.1.1 QoS 1 PUBLISH packet: a
// fixed header of one byte and a remaining length of 1 to 4 bytes, then the
// topic (with its 2-byte length), the packet id (2 bytes) and the payload.
func PublishPacketSize(topic string, payload int) int {
	rest := 2 + len(topic) + 2 + payload
	n := 1 + 1
	for r := rest; r > 127; r >>= 7 {
		n++
	}
	return n + rest
}

// Publish publishes every message at QoS 1 and waits for the PUBACKs. A
// message over max_packet_size is not sent (the broker would disconnect
// the bridge, which would send it again, forever); it is refused for good,
// with the others published.
func (s *Sink) Publish(ctx context.Context, msgs ...bus.Message) error {
	if !s.Ready() {
		return fmt.Errorf("sink %s: not connected: %w", s.name, bus.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var refused sinks.Refusals
	tokens := make([]paho.Token, len(msgs))
	for i := range msgs {
		if size := s.MessageSize(&msgs[i]); size > s.maxPacket {
			refused.Add(fmt.Errorf("sink %s: publish %s: %w: a PUBLISH packet of %d bytes is over max_packet_size %d", s.name, msgs[i].Topic, bus.ErrInvalid, size, s.maxPacket))
			continue
		}
		tokens[i] = s.client.Publish(msgs[i].Topic, 1, msgs[i].Retain, msgs[i].Payload)
	}
	for i, tok := range tokens {
		if tok == nil {
			continue
		}
		select {
		case <-tok.Done():
			if err := tok.Error(); err != nil {
				return fmt.Errorf("sink %s: publish %s: %w: %w", s.name, msgs[i].Topic, bus.ErrUnavailable, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("sink %s: waiting for PUBACK: %w: %w", s.name, bus.ErrUnavailable, ctx.Err())
		}
	}
	return refused.Err()
}

// Close disconnects, giving in-flight publishes until ctx is done.
func (s *Sink) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		quiesce := uint(250)
		if dl, ok := ctx.Deadline(); ok {
			if d := time.Until(dl); d > 0 && d < time.Second {
				quiesce = uint(d / time.Millisecond)
			}
		}
		s.client.Disconnect(quiesce)
	})
	return nil
}
