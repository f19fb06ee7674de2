// Package app wires the bridge together: the broker (embedded, or an external
// one), the HTTP front door, the adapters, the router and its sinks.
// cmd/bridge is a thin main around it, and tests start it in-process on
// 127.0.0.1:0 ports.
//
// Everything is wired explicitly in this file; nothing registers itself.
package app

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/chef"
	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/config"
	configdbapi "github.com/opsfirehose/firehose/configdb/api"
	"github.com/opsfirehose/firehose/dashboard"
	"github.com/opsfirehose/firehose/history"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/buildinfo"
	"github.com/opsfirehose/firehose/internal/datadir"
	"github.com/opsfirehose/firehose/internal/lifecycle"
	"github.com/opsfirehose/firehose/mqttin"
	"github.com/opsfirehose/firehose/router"
	"github.com/opsfirehose/firehose/sinks"
	mqttsink "github.com/opsfirehose/firehose/sinks/mqtt"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
)

// Bridge is one running bridge process.
type Bridge struct {
	cfg      config.Config
	log      zerolog.Logger
	registry *prometheus.Registry
	http     *httpserver.Server

	broker     *broker.Broker     // embedded mode
	external   *mqttsink.Sink     // external mode: where adapters publish
	subscriber *mqttin.Subscriber // external mode: where the router reads
	sinks      map[string]sinks.Sink
	router     *router.Router
	publisher  bus.Publisher

	dashboard *dashboard.Dashboard // nil when dashboard.enabled is false
	history   *history.History     // nil when history.enabled is false, or in external mode
	dataDir   *datadir.Lock        // held from New to Close, before any store in it is opened

	configdb *configdbapi.Handler // its relay publishes the outbox from Start to Close
	chef     *chef.Handler        // it reloads policy locks and publishes tallies from Start to Close

	startOnce sync.Once
	startErr  error
	closeOnce sync.Once
	closeErr  error
	stop      chan struct{} // closed when the bridge shuts down
	stopOnce  sync.Once
}

// The parts the bridge runs, in the one lifecycle shape.
var (
	_ lifecycle.Component = (*broker.Broker)(nil)
	_ lifecycle.Component = (*httpserver.Server)(nil)
	_ lifecycle.Component = (*router.Router)(nil)
	_ lifecycle.Component = (*mqttin.Subscriber)(nil)
	_ lifecycle.Component = (*dashboard.Dashboard)(nil)
	_ lifecycle.Component = (*chef.Handler)(nil)
	_ lifecycle.Component = (*configdbapi.Handler)(nil)
	_ lifecycle.Component = (*history.History)(nil)
	_ lifecycle.Component = (*Bridge)(nil)
)

// New builds the bridge from a validated config and opens every listening
// socket, so a port in use fails here with the listener's name. Nothing is
// served until Start; sinks start connecting at once, in the background.
// ctx bounds the building, which with ConfigDB on PostgreSQL connects and
// migrates: when it is done first (SIGTERM), New returns an error wrapping
// ctx's.
func New(ctx context.Context, cfg config.Config, log zerolog.Logger) (_ *Bridge, err error) {
	b := &Bridge{cfg: cfg, log: log, registry: buildinfo.NewRegistry(), sinks: map[string]sinks.Sink{}, stop: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = b.closeAll(context.WithoutCancel(ctx))
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// First, so that a second bridge on the directory gets one error that
	// says what to do, not a store's lock error.
	if cfg.DataDir != "" {
		if b.dataDir, err = datadir.Acquire(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Sinks)) {
		sc := cfg.Sinks[name]
		var s sinks.Sink
		switch {
		case sc.NATS != nil:
			s, err = natssink.NewNATS(name, *sc.NATS, log)
		case sc.MQTT != nil:
			s, err = mqttsink.New(name, *sc.MQTT, cfg.DataDir, log)
		default:
			err = fmt.Errorf("sinks.%s.type: %q is not a sink type", name, sc.Type)
		}
		if err != nil {
			return nil, err
		}
		b.sinks[name] = s
	}
	b.router, err = router.New(cfg.Routes, b.sinks, router.Options{DataDir: cfg.DataDir, Logger: log, Registerer: b.registry})
	if err != nil {
		return nil, err
	}
	inputMetrics, err := mqttin.NewMetrics(b.registry)
	if err != nil {
		return nil, err
	}

	switch cfg.Broker.Mode {
	case broker.ModeExternal:
		ext := cfg.Broker.External
		// Its messages are routed before they are published here, but a
		// 2xx also means "on the broker": while it is down, senders retry.
		lost := mqttsink.WhenLost("HTTP senders get 503 until it is back, and retry")
		if b.external, err = mqttsink.New("external-broker", externalSinkConfig(ext), cfg.DataDir, log, lost); err != nil {
			return nil, err
		}
		if b.subscriber, err = mqttin.NewSubscriber(b.router, mqttin.Conn{
			URL: ext.URL, ClientID: ext.ClientID + "-router", Username: ext.Username, Password: ext.Password,
			TLS: ext.TLS, MaxReconnectInterval: ext.MaxReconnectInterval,
		}, mqttin.SubscriberOptions{
			Group: ext.ShareGroup, OwnPrefixes: adapterTopicPrefixes(cfg), Metrics: inputMetrics, Logger: log,
			SessionMark: filepath.Join(cfg.DataDir, "mqtt", ext.ClientID+"-router.session"),
		}); err != nil {
			return nil, err
		}
		b.publisher = router.NewPublisher(b.router, b.external)
	default:
		if b.broker, err = broker.New(brokerConfig(cfg), broker.Options{Logger: log, Registerer: b.registry}); err != nil {
			return nil, err
		}
		if len(cfg.Routes) > 0 {
			if err = b.broker.AddHook(mqttin.NewHook(b.router, b.broker, inputMetrics, log)); err != nil {
				return nil, err
			}
		}
		b.publisher = router.NewPublisher(b.router, b.broker)
	}

	if b.http, err = httpserver.New(cfg.HTTP, httpserver.Options{Logger: log, Registerer: b.registry}); err != nil {
		return nil, err
	}
	b.routes()
	if err = b.openHistory(ctx); err != nil {
		return nil, err
	}
	if cfg.Dashboard.Enabled {
		if b.dashboard, err = b.newDashboard(); err != nil {
			return nil, err
		}
		b.dashboard.Register(b.http)
	}
	if err = b.registerAdapters(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// externalSinkConfig describes the bridge's publishing connection to the
// external broker, an mqtt sink; the other, the router's subscription, is
// mqttin's.
func externalSinkConfig(ext *broker.External) mqttsink.Config {
	return mqttsink.Config{
		URL:                  ext.URL,
		ClientID:             ext.ClientID + "-pub",
		Username:             ext.Username,
		Password:             ext.Password,
		TLS:                  ext.TLS,
		MaxReconnectInterval: ext.MaxReconnectInterval,
		ConfirmTimeout:       ext.ConfirmTimeout,
		// The external broker is the bus: its limit is its own, as for
		// any MQTT client, not a route's.
		MaxPacketSize: mqttsink.MaxPacket,
	}
}

// routes registers every HTTP endpoint. Adapters are added here, one block each.
func (b *Bridge) routes() {
	b.http.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpserver.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	b.http.Handle("GET /readyz", http.HandlerFunc(b.readyz))
	b.http.Handle("GET /metrics", promhttp.HandlerFor(b.registry, promhttp.HandlerOpts{}))
}

// readyz answers 200 when the bridge can take messages and deliver them: the
// broker is up, in external mode the router's subscription there is in
// place, and every required route's sink is connected. The body says what
// fails, and each route's state with its sink's reason (a wrong password);
// "warnings" says what the bridge saw of an external broker that drops
// messages, which does not make it unready.
func (b *Bridge) readyz(w http.ResponseWriter, _ *http.Request) {
	checks, ready := b.readiness()
	routes := map[string]router.RouteStatus{}
	for _, st := range b.router.Status() {
		routes[st.Route] = st
	}
	body := map[string]any{"status": "ok", "checks": checks, "routes": routes}
	if b.subscriber != nil {
		if w := b.subscriber.Warnings(); len(w) > 0 {
			body["warnings"] = w
		}
	}
	if b.history != nil {
		// Not a check: a degraded history leaves live traffic as it is.
		body["history"] = b.history.Status()
	}
	status := http.StatusOK
	if !ready {
		body["status"], status = "unavailable", http.StatusServiceUnavailable
	}
	httpserver.WriteJSON(w, status, body)
}

// readiness is every check of /readyz, "ok" or what fails, and whether all pass.
func (b *Bridge) readiness() (checks map[string]string, ready bool) {
	checks = map[string]string{}
	switch {
	case b.broker != nil && !b.broker.Ready():
		checks["broker"] = "not running"
	case b.external != nil && !b.external.Ready():
		checks["broker"] = "external broker not connected: " + b.external.NotReadyReason()
	default:
		checks["broker"] = "ok"
	}
	ready = checks["broker"] == "ok"
	if b.subscriber != nil {
		checks["router subscriber"] = "ok"
		if err := b.subscriber.Ready(); err != nil {
			checks["router subscriber"], ready = err.Error(), false
		}
	}
	for k, v := range b.router.Ready() {
		checks[k] = v
		ready = false
	}
	return checks, ready
}

// Start serves MQTT and HTTP and starts routing. It returns once the
// listeners accept connections; ctx bounds the start only. Calling it again
// does nothing.
func (b *Bridge) Start(ctx context.Context) error {
	b.startOnce.Do(func() { b.startErr = b.start(ctx) })
	return b.startErr
}

// closeOrder lists the parts in the order they close, the pipeline's: the
// HTTP intake first, so no new message arrives (the dashboard before it: its
// streams never end by themselves, and the HTTP server waits for them); the
// adapters with background work next, which publish their last messages
// through the router; then the router stops (its outboxes stay on disk) and
// the sinks flush; the broker closes last, so everything accepted reaches
// subscribers, and then the history writes what it still holds.
func (b *Bridge) closeOrder() lifecycle.Parts {
	var ps lifecycle.Parts
	ps.Add(b.dashboard != nil, "dashboard", b.dashboard)
	ps.Add(b.http != nil, "http", b.http)
	ps.Add(b.chef != nil, "chef", b.chef)
	ps.Add(b.configdb != nil, "configdb", b.configdb)
	ps.Add(b.subscriber != nil, "router subscriber", b.subscriber)
	ps.Add(b.router != nil, "router", b.router)
	for _, name := range slices.Sorted(maps.Keys(b.sinks)) {
		ps.Add(true, "sink "+name, connected{b.sinks[name]})
	}
	ps.Add(b.external != nil, "external broker", connected{b.external})
	ps.Add(b.broker != nil, "broker", b.broker)
	ps.Add(b.history != nil, "history", b.history) // after the broker, which records into it
	ps.Add(b.dataDir != nil, "data directory", b.dataDir)
	return ps
}

// connected is a sink as a lifecycle.Component: it starts connecting in its
// New, in the background, so there is nothing left for Start to do.
type connected struct{ sinks.Sink }

func (connected) Start(context.Context) error { return nil }

// start starts the parts: the broker first, as the bus everything else
// publishes to (the dashboard reads the retained statuses it restored); the
// HTTP intake last, once everything behind it works. The sinks started
// connecting in New.
func (b *Bridge) start(ctx context.Context) error {
	for _, p := range []struct {
		present bool
		c       lifecycle.Component
	}{
		{b.broker != nil, b.broker},
		{true, b.router},
		{b.subscriber != nil, b.subscriber},
		{b.dashboard != nil, b.dashboard},
		{b.configdb != nil, b.configdb}, // its relay publishes what a crash or a refusal left in its outbox
		{b.chef != nil, b.chef},
		{true, b.http},
	} {
		if !p.present {
			continue
		}
		if err := p.c.Start(ctx); err != nil {
			return err // each part's errors name it
		}
	}
	b.warnSizeLimits()
	return nil
}

// Run starts the bridge, waits until ctx is done (a signal) or a listener
// fails, then shuts down within the configured shutdown_timeout.
func (b *Bridge) Run(ctx context.Context) error {
	// A ctx already done means start, then shut down at once, as it always
	// has: Start fails only for its own reasons here.
	if err := b.Start(context.WithoutCancel(ctx)); err != nil {
		_ = b.closeAll(context.WithoutCancel(ctx))
		return err
	}
	b.log.Info().Str("version", buildinfo.Version()).Str("http", b.HTTPAddr()).Str("broker", b.cfg.Broker.Mode).Int("routes", len(b.cfg.Routes)).Msg("bridge started")
	watched := make(chan struct{})
	go func() { defer close(watched); b.watchReady(readyPoll) }()
	defer func() { <-watched }() // Close stops it
	return lifecycle.Serve(ctx, b.log, b.http.Err(), b.cfg.ShutdownTimeout, b.Close)
}

// Close stops the bridge in pipeline order (closeOrder). It is idempotent
// and bounded by ctx: a part that has not closed when ctx is done is left
// behind, with an error that names it.
func (b *Bridge) Close(ctx context.Context) error {
	b.closeOnce.Do(func() { b.closeErr = b.closeAll(ctx) })
	return b.closeErr
}

func (b *Bridge) closeAll(ctx context.Context) error {
	b.stopOnce.Do(func() { close(b.stop) })
	return lifecycle.CloseAll(ctx, b.closeOrder())
}

// warnSizeLimits logs, for each sink, the inputs whose messages may be
// larger than a required route to it delivers (config.SizeWarnings), once
// the sink's limit is known: at once for an MQTT sink, whose limit is
// configured; when a NATS sink has read its server's.
func (b *Bridge) warnSizeLimits() {
	warn := func(name string, s sinks.Sink) {
		lim := s.Limit()
		for _, w := range b.cfg.SizeWarnings(func(sink string) (sinks.Limit, bool) { return lim, sink == name }) {
			b.log.Warn().Str("key", w.Key).Str("sink", name).Msg(w.Msg)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b.sinks)) {
		s := b.sinks[name]
		known, ok := s.(interface{ LimitKnown() <-chan struct{} })
		if !ok {
			warn(name, s)
			continue
		}
		go func() {
			select {
			case <-known.LimitKnown():
				warn(name, s)
			case <-b.stop:
			}
		}()
	}
}

// HTTPAddr is the HTTP listener's bound address.
func (b *Bridge) HTTPAddr() string { return b.http.Addr() }

// Broker is the embedded broker (nil in external mode).
func (b *Bridge) Broker() *broker.Broker { return b.broker }

// Publisher is what adapters publish through: the router, then the broker
// (embedded or external).
func (b *Bridge) Publisher() bus.Publisher { return b.publisher }

// brokerConfig is the embedded broker's section, with its stores under the
// bridge's data_dir unless broker.persistence says otherwise: the fleet's
// retained state survives a restart by default.
func brokerConfig(cfg config.Config) broker.Config {
	bc := cfg.Broker
	if bc.Persistence.Path == "" && !bc.Persistence.Memory {
		bc.Persistence.Path = cfg.DataDir
	}
	return bc
}
