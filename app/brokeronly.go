package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/buildinfo"
)

// DefaultBrokerHTTPAddress is where cmd/broker serves /healthz, /readyz and
// /metrics when the config file does not set http.address: loopback, like
// the bridge's 127.0.0.1:8080, but on a port of its own, so that a bridge
// and a broker can run on one host with no config.
const DefaultBrokerHTTPAddress = "127.0.0.1:9883"

// BrokerOnly is cmd/broker: the broker alone, from the same `broker:`
// section the bridge uses (the replacement for the OpenStack firehose's
// mosquitto), plus an HTTP listener for health checks and metrics.
type BrokerOnly struct {
	cfg      config.Config
	log      zerolog.Logger
	registry *prometheus.Registry
	broker   *broker.Broker
	http     *httpserver.Server

	startOnce sync.Once
	startErr  error
	closeOnce sync.Once
	closeErr  error
}

// NewBrokerOnly builds cmd/broker from a validated config and opens every
// listening socket, so a port in use fails here. It refuses broker.mode
// external, which only the bridge understands, and warns about the
// bridge-only settings it ignores. Nothing is served until Start.
func NewBrokerOnly(cfg config.Config, log zerolog.Logger) (_ *BrokerOnly, err error) {
	if cfg.Broker.Mode != broker.ModeEmbedded {
		return nil, fmt.Errorf("broker.mode: %q is a bridge setting (the bridge then uses another broker), "+
			"but cmd/broker is the broker itself: remove broker.mode or set it to %s", cfg.Broker.Mode, broker.ModeEmbedded)
	}
	if ignored := bridgeOnlyKeys(&cfg); len(ignored) > 0 {
		log.Warn().Strs("ignored", ignored).Msg("cmd/broker ignores these bridge-only settings; they take effect in cmd/bridge")
	}
	s := &BrokerOnly{cfg: cfg, log: log, registry: newRegistry()}
	defer func() {
		if err != nil {
			_ = s.closeAll(context.Background())
		}
	}()
	if s.broker, err = broker.New(cfg.Broker, broker.Options{Logger: log, Registerer: s.registry}); err != nil {
		return nil, err
	}
	if s.http, err = httpserver.New(brokerHTTPConfig(&cfg), httpserver.Options{Logger: log, Registerer: s.registry}); err != nil {
		return nil, err
	}
	s.http.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpserver.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	s.http.Handle("GET /readyz", http.HandlerFunc(s.readyz))
	s.http.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	return s, nil
}

// brokerHTTPConfig is the `http:` section as cmd/broker uses it: the
// bridge's, except that an http.address the file leaves out means
// DefaultBrokerHTTPAddress rather than the bridge's default.
func brokerHTTPConfig(cfg *config.Config) httpserver.Config {
	hc := cfg.HTTP
	if !cfg.Given("http.address") {
		hc.Address = DefaultBrokerHTTPAddress
	}
	return hc
}

// bridgeOnlyKeys lists the settings in the file that only the bridge uses:
// routes, sinks, data_dir and the adapters' sections.
func bridgeOnlyKeys(cfg *config.Config) []string {
	keys := []string{"sinks", "routes", "data_dir"}
	for _, in := range cfg.Intakes() {
		keys = append(keys, in.Key)
	}
	var given []string
	for _, k := range keys {
		if cfg.Given(k) {
			given = append(given, k)
		}
	}
	return given
}

// readyz answers 200 while the broker serves, in the bridge's JSON shape.
func (s *BrokerOnly) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.broker.Ready() {
		httpserver.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "checks": map[string]string{"broker": "ok"}})
		return
	}
	httpserver.WriteJSON(w, http.StatusServiceUnavailable,
		map[string]any{"status": "unavailable", "checks": map[string]string{"broker": "not running"}})
}

// Start serves MQTT, then HTTP. It returns once the listeners accept
// connections; ctx bounds the start only. Calling it again does nothing.
func (s *BrokerOnly) Start(ctx context.Context) error {
	s.startOnce.Do(func() {
		if s.startErr = s.broker.Start(ctx); s.startErr == nil {
			s.startErr = s.http.Start(ctx)
		}
	})
	return s.startErr
}

// Run starts the broker, waits until ctx is done (a signal) or the HTTP
// listener fails, then shuts down within the configured shutdown_timeout.
func (s *BrokerOnly) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		_ = s.closeAll(context.WithoutCancel(ctx))
		return err
	}
	s.log.Info().Str("version", buildinfo.Version()).Str("http", s.HTTPAddr()).Strs("mqtt", s.broker.ListenerNames()).Msg("broker ready")
	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info().Msg("shutting down")
	case err := <-s.http.Err():
		runErr = fmt.Errorf("http listener: %w", err)
		s.log.Error().Err(err).Msg("HTTP listener failed; shutting down")
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, s.Close(sctx))
}

// Close stops the HTTP listener, then closes the broker, disconnecting
// every client. It is idempotent and bounded by ctx.
func (s *BrokerOnly) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.closeAll(ctx) })
	return s.closeErr
}

func (s *BrokerOnly) closeAll(ctx context.Context) error {
	var ps parts
	ps.add(s.http != nil, "http", s.http)
	ps.add(s.broker != nil, "broker", s.broker)
	return closeParts(ctx, ps)
}

// HTTPAddr is the HTTP listener's bound address.
func (s *BrokerOnly) HTTPAddr() string { return s.http.Addr() }

// Broker is the broker.
func (s *BrokerOnly) Broker() *broker.Broker { return s.broker }

// RunBroker runs cmd/broker until ctx is done: NewBrokerOnly, then Run.
func RunBroker(ctx context.Context, cfg config.Config, log zerolog.Logger) error {
	s, err := NewBrokerOnly(cfg, log)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// within runs fn, giving up when ctx is done, so one stuck component cannot
// hold shutdown past its deadline.
func within(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("gave up waiting: %w", ctx.Err())
	}
}
