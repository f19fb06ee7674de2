package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker/retained"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/buildinfo"
	"github.com/opsfirehose/firehose/topics"
)

// Options carries what the broker needs besides its config section.
type Options struct {
	// Logger receives the broker's logs, and mochi's through a slog bridge.
	Logger zerolog.Logger
	// Registerer receives the broker's metrics; nil means no metrics.
	Registerer prometheus.Registerer
}

// Broker is the embedded MQTT broker: mochi with our access control, retained
// persistence and drop accounting. It implements bus.Publisher through mochi's
// inline client, so the bridge publishes without a TCP hop and without ACLs.
type Broker struct {
	cfg     Config
	log     zerolog.Logger
	server  *mqtt.Server
	inline  *mqtt.Client
	auth    *authHook
	gate    *gate
	flow    *flowHook
	drops   *dropHook
	store   *storeHook // sessions, when broker.persistence.sessions is on
	retain  *retainHook
	metrics *metrics

	listeners map[string]listeners.Listener

	started   atomic.Bool
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ bus.Publisher = (*Broker)(nil)

// New validates cfg, opens every listener's socket and prepares the broker.
// Nothing is served until Start. On error, every socket opened is closed again.
func New(cfg Config, opts Options) (_ *Broker, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("broker config: %w", err)
	}
	log := opts.Logger.With().Str("component", "broker").Logger()
	mochiLog := opts.Logger.With().Str("component", "mqtt").Logger()
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumClientWritesPending = int32(cfg.MaxQueuedMessages)
	caps.MaximumInflight = uint16(cfg.MaxInflight)
	caps.MaximumPacketSize = uint32(cfg.MaxPacketSize)
	caps.TopicAliasMaximum = uint16(cfg.MaxTopicAlias)
	// Acks carry no properties of the packet they answer (mochi would echo
	// a publisher's user properties in its PUBACK).
	caps.Compatibilities.NoInheritedPropertiesOnAck = true
	caps.MaximumMessageExpiryInterval = int64(cfg.MaxMessageExpiry.Seconds())
	caps.MaximumSessionExpiryInterval = uint32(cfg.MaxSessionExpiry.Seconds())
	// The retained store keeps retained messages, not mochi (retain.go).
	caps.RetainAvailable = 0
	server := mqtt.New(&mqtt.Options{
		InlineClient:             true,
		Capabilities:             caps,
		SysTopicResendInterval:   int64(cfg.SysInterval.Seconds()),
		ClientNetWriteBufferSize: int(cfg.ClientBuffer),
		ClientNetReadBufferSize:  int(cfg.ClientBuffer),
		Logger:                   slog.New(mochiHandler{zerolog.NewSlogHandler(mochiLog)}),
	})
	// $SYS/broker/version names firehose, as mosquitto's names mosquitto,
	// rather than the mochi library inside it.
	server.Info.Version = "firehose " + buildinfo.Version()
	b := &Broker{
		cfg:       cfg,
		log:       log,
		server:    server,
		metrics:   newMetrics(),
		listeners: map[string]listeners.Listener{},
	}
	inline, ok := server.Clients.Get(mqtt.InlineClientId)
	if !ok {
		return nil, fmt.Errorf("broker: mochi has no inline client")
	}
	b.inline = inline

	b.gate = &gate{
		connectTimeout: cfg.ConnectTimeout,
		maxConnect:     int(cfg.MaxConnectSize),
		hold:           int(cfg.ClientBuffer),
		maxPacket:      int(cfg.MaxPacketSize),
		metrics:        b.metrics,
		log:            log,
		warn:           rateLimitedLog{log: log, what: "connections closed before their CONNECT or for an oversized packet"},
		disconnect:     func(cl *mqtt.Client, code packets.Code) { _ = server.DisconnectClient(cl, code) },
	}
	b.auth = newAuthHook(log, b.metrics, newAccessPolicy(cfg.AllowAnonymous, cfg.Users), cfg)
	b.auth.server = server
	b.gate.screen = b.auth.screen
	if err := server.AddHook(b.auth, nil); err != nil {
		return nil, fmt.Errorf("broker: auth hook: %w", err)
	}
	b.flow = &flowHook{maxQueued: cfg.MaxQueuedMessages, metrics: b.metrics, log: log,
		warn: rateLimitedLog{log: log, what: "QoS 0 messages dropped for slow MQTT 5 subscribers"}}
	if err := server.AddHook(b.flow, nil); err != nil {
		return nil, fmt.Errorf("broker: flow hook: %w", err)
	}
	if err := server.AddHook(&protocolHook{maxPacketSize: uint32(cfg.MaxPacketSize), maxTopicAlias: uint16(cfg.MaxTopicAlias)}, nil); err != nil {
		return nil, fmt.Errorf("broker: protocol hook: %w", err)
	}
	b.drops = newDropHook(log, b.metrics)
	if err := server.AddHook(b.drops, nil); err != nil {
		return nil, fmt.Errorf("broker: drop hook: %w", err)
	}
	retainedDir := ""
	if cfg.Persistence.Path != "" {
		retainedDir = filepath.Join(cfg.Persistence.Path, "retained")
	}
	store, err := retained.Open(retained.Options{Dir: retainedDir, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("broker.persistence.path: %w", err)
	}
	b.gate.retained = store
	b.retain = newRetainHook(store, server, b.auth, cfg.MaxQueuedMessages, b.flow.droppedFor, log)
	if err := server.AddHook(b.retain, nil); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("broker: retained hook: %w", err)
	}
	b.retain.count()
	if cfg.Persistence.Path != "" && cfg.Persistence.Sessions {
		sessions, storeOpts, err := newStoreHook(cfg.Persistence, log)
		if err != nil {
			_ = b.closeHooks()
			return nil, err
		}
		if err := server.AddHook(sessions, storeOpts); err != nil {
			_ = b.closeHooks()
			return nil, fmt.Errorf("broker.persistence.path: open %s: %w", storeOpts.Path, err)
		}
		b.store = sessions
	}
	if opts.Registerer != nil {
		if err := b.metrics.register(opts.Registerer, server.Info, b.RetainedCount); err != nil {
			_ = b.closeHooks()
			return nil, fmt.Errorf("broker: metrics: %w", err)
		}
	}

	defer func() {
		if err != nil {
			for _, l := range b.listeners {
				l.Close(func(string) {})
			}
			_ = b.closeHooks()
		}
	}()
	for i, lc := range cfg.Listeners {
		inner, err := listen(i, lc)
		if err != nil {
			return nil, err
		}
		l := gatedListener{Listener: inner, gate: b.gate, server: server}
		b.listeners[lc.Name] = l
		if err := server.AddListener(l); err != nil {
			return nil, fmt.Errorf("listener %s: %w", lc.Name, err)
		}
	}
	return b, nil
}

// Start loads persisted state and starts serving every listener. It returns
// once the broker accepts connections; ctx bounds the start, not the broker's
// life, which Close ends.
func (b *Broker) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("broker: start: %w", err)
	}
	// Last of the hooks, whatever AddHook added (retain.go).
	if err := b.server.AddHook(&retainTail{h: b.retain}, nil); err != nil {
		return fmt.Errorf("broker: start: retained hook: %w", err)
	}
	if err := b.server.Serve(); err != nil {
		return fmt.Errorf("broker: start: %w", err)
	}
	b.started.Store(true)
	for _, name := range b.ListenerNames() {
		l := b.listeners[name]
		b.log.Info().Str("listener", name).Str("protocol", l.Protocol()).Str("address", l.Address()).Msg("MQTT listener up")
	}
	return nil
}

// Ready reports whether the broker is serving.
func (b *Broker) Ready() bool { return b.started.Load() && !b.closed.Load() }

// ListenerNames lists the configured listeners in name order.
func (b *Broker) ListenerNames() []string {
	names := make([]string, 0, len(b.listeners))
	for name := range b.listeners {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Addr returns the bound address of the named listener, or "" if there is none.
func (b *Broker) Addr(name string) string {
	if l, ok := b.listeners[name]; ok {
		return l.Address()
	}
	return ""
}

// AddHook adds a mochi hook, such as the router's. A hook that provides
// OnPublish must be added before Start: Start adds the hook that keeps
// retained publishes, which must see a publish after every other.
func (b *Broker) AddHook(hook mqtt.Hook) error {
	if b.started.Load() && hook.Provides(mqtt.OnPublish) {
		return fmt.Errorf("broker: hook %s provides OnPublish: add it before Start", hook.ID())
	}
	if err := b.server.AddHook(hook, nil); err != nil {
		return fmt.Errorf("broker: hook %s: %w", hook.ID(), err)
	}
	return nil
}

// A Recorder is handed every message the broker delivers (a history). The
// broker calls it from a hook it has anyway: each hook mochi holds costs
// every message an interface call for each of its ten or so events, and
// OnPublished an 800-byte copy of the packet, whether or not the hook
// handles the event (issue 27). It is handed the packet's parts, not the
// packet: a pointer to the hook's copy, passed to an interface, would move
// that copy to the heap for every message, recorded or not.
type Recorder interface {
	// Published is called once mochi has delivered a message published
	// by cl (mochi's inline client for the bridge's own messages), and for
	// each will mochi sends (a delayed one as mochi begins to deliver it,
	// with cl nil: its client may be gone), with its topic, payload and
	// MQTT v5 user properties (which carry the bridge's headers). It is
	// called on the goroutine that delivered the message: cl's own, or the
	// router's pipeline's, which may release cl's messages after cl has
	// gone. It must not block, and must not keep payload or user past the
	// call.
	Published(cl *mqtt.Client, topic string, payload []byte, user []packets.UserProperty)
	// Disconnected is called once cl has gone.
	Disconnected(cl *mqtt.Client)
}

// SetRecorder has the broker hand r every message it delivers. Call it
// before Start.
func (b *Broker) SetRecorder(r Recorder) error {
	if b.started.Load() {
		return fmt.Errorf("broker: set the recorder before Start")
	}
	b.retain.recorder = r
	return nil
}

// Publish publishes through the inline client. mochi hands each message to
// every matching subscriber's queue before InjectPacket returns, and Publish
// returns once the retained messages among msgs are on disk, so a nil error
// means the broker has the messages. Topics are checked here because mochi
// skips validation for its inline client.
func (b *Broker) Publish(ctx context.Context, msgs ...bus.Message) error {
	return b.publish(ctx, true, msgs)
}

// PublishChecked is Publish for messages whose topics the caller has
// checked (router.Publisher, once for the router and the broker).
func (b *Broker) PublishChecked(ctx context.Context, msgs ...bus.Message) error {
	return b.publish(ctx, false, msgs)
}

var _ bus.CheckedPublisher = (*Broker)(nil)

func (b *Broker) publish(ctx context.Context, checkTopics bool, msgs []bus.Message) error {
	retained := false
	for i := range msgs {
		m := &msgs[i]
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("publish %s: %w", m.Topic, err)
		}
		if !b.Ready() {
			return fmt.Errorf("publish %s: broker is not running: %w", m.Topic, bus.ErrUnavailable)
		}
		if checkTopics {
			if err := topics.ValidName(m.Topic); err != nil {
				return fmt.Errorf("publish %q: %w: %w", m.Topic, bus.ErrInvalid, err)
			}
		}
		qos := m.QoS
		if qos > 2 {
			return fmt.Errorf("publish %s: QoS %d: %w", m.Topic, qos, bus.ErrInvalid)
		}
		pk := packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: m.Retain},
			TopicName:   m.Topic,
			Payload:     m.Payload,
			// mochi checks that QoS > 0 packets carry an id; the inline
			// client never receives acks, so any non-zero id will do.
			PacketID: uint16(qos),
		}
		if len(m.Headers) > 0 {
			pk.Properties.User = userProperties(m.Headers)
		}
		if err := b.server.InjectPacket(b.inline, pk); err != nil {
			return fmt.Errorf("publish %s: %w: %w", m.Topic, bus.ErrUnavailable, err)
		}
		if m.Retain {
			retained = true
		}
	}
	if retained {
		// The fleet's state is safe once on disk; concurrent publishers
		// share the sync.
		if err := b.retain.store.Durable(ctx, b.retain.store.Written()); err != nil {
			return fmt.Errorf("publish: retained message not on disk: %w: %w", bus.ErrUnavailable, err)
		}
	}
	return nil
}

// Subscribe delivers to fn what an MQTT subscriber of filter would get,
// through the inline client: first the retained messages that match (with
// Retain set), on the caller's goroutine, before Subscribe returns; then every
// matching message as it is published (Retain false), on the publisher's
// goroutine, so fn must not block and must copy Payload to keep it. A
// message published while the retained ones are read is handed on after
// them, so fn never sees a topic's retained message after a newer one. As
// for any subscriber, "#" and "+" do not match "$" topics. id must be unique
// among the broker's inline subscriptions to the same filter, and positive
// (negative ids are the broker's own: wills.go); the returned function ends
// the subscription.
func (b *Broker) Subscribe(id int, filter string, fn func(bus.Message)) (unsubscribe func(), err error) {
	var (
		mu        sync.Mutex
		replaying atomic.Bool
		pending   []bus.Message
	)
	replaying.Store(true)
	dollar := strings.HasPrefix(filter, "$")
	handler := func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
		if !dollar && strings.HasPrefix(pk.TopicName, "$") {
			return // mochi hands inline subscribers of "#" its $SYS topics too
		}
		m := bus.Message{Topic: pk.TopicName, Payload: pk.Payload, QoS: pk.FixedHeader.Qos, Retain: dollar && replaying.Load() && pk.FixedHeader.Retain}
		if replaying.Load() {
			mu.Lock()
			if replaying.Load() {
				m.Payload = bytes.Clone(m.Payload)
				pending = append(pending, m)
				mu.Unlock()
				return
			}
			mu.Unlock()
		}
		fn(m)
	}
	if err := b.server.Subscribe(filter, id, handler); err != nil {
		return nil, fmt.Errorf("subscribe %q: %w", filter, err)
	}
	err = b.retain.store.Scan(context.Background(), filter, func(r retained.Message) error {
		var pk packets.Packet
		if err := decodeStored(r.Value, &pk); err != nil {
			return nil
		}
		fn(bus.Message{Topic: r.Topic, Payload: pk.Payload, QoS: pk.FixedHeader.Qos, Retain: true})
		return nil
	})
	// What was published meanwhile follows, in order; then fn is called
	// directly.
	mu.Lock()
	for _, m := range pending {
		fn(m)
	}
	pending = nil
	replaying.Store(false)
	mu.Unlock()
	unsubscribe = func() { _ = b.server.Unsubscribe(filter, id) }
	if err != nil {
		unsubscribe()
		return nil, fmt.Errorf("subscribe %q: retained messages: %w", filter, err)
	}
	return unsubscribe, nil
}

// userProperties turns headers into MQTT v5 user properties in key order, so
// subscribers see a stable order.
func userProperties(headers map[string]string) []packets.UserProperty {
	props := make([]packets.UserProperty, 0, len(headers))
	for k, v := range headers {
		props = append(props, packets.UserProperty{Key: k, Val: v})
	}
	sort.Slice(props, func(i, j int) bool { return props[i].Key < props[j].Key })
	return props
}

// Close disconnects every client, closes the listeners and the store. It is
// idempotent, and safe to call without Start. mochi's close does not wait on
// clients, so it takes no longer than closing the store; ctx is there for the
// one lifecycle shape (and callers bound it with their own deadline).
func (b *Broker) Close(_ context.Context) error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		// The delayed wills of the clients it disconnects will never be due.
		b.retain.wills.stop()
		defer b.stopLogs() // after the clients, whose last refusals and drops they count
		if b.started.Load() {
			b.closeErr = b.server.Close() // closes listeners, clients and hooks
			return
		}
		for _, l := range b.listeners {
			l.Close(func(string) {})
		}
		b.closeErr = b.closeHooks()
	})
	return b.closeErr
}

// stopLogs writes the counts of refusals and drops not logged yet, and ends
// their logs' timers.
func (b *Broker) stopLogs() {
	b.auth.denials.stop()
	for _, l := range []*rateLimitedLog{&b.auth.loginLog, &b.gate.warn, &b.flow.warn, &b.drops.warn} {
		l.stop()
	}
}

func (b *Broker) closeHooks() error {
	var errs []error
	if b.store != nil && b.store.Hook != nil {
		errs = append(errs, b.store.Stop())
	}
	if b.retain != nil {
		errs = append(errs, b.retain.Stop())
	}
	return errors.Join(errs...)
}

// RetainedCount is the number of retained messages the broker holds,
// $SYS topics included.
func (b *Broker) RetainedCount() int {
	return b.server.Topics.Retained.Len() + b.retain.store.Len()
}
