package brokeronly

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/buildinfo"
	"github.com/opsfirehose/firehose/internal/lifecycle"
)

var _ lifecycle.Component = (*Server)(nil)

// Server is cmd/broker: the broker alone, from the same `broker:`
// section the bridge uses (the replacement for the OpenStack firehose's
// mosquitto), plus an HTTP listener for health checks and metrics.
type Server struct {
	cfg      Config
	log      zerolog.Logger
	registry *prometheus.Registry
	broker   *broker.Broker
	http     *httpserver.Server

	startOnce sync.Once
	startErr  error
	closeOnce sync.Once
	closeErr  error
}

// New builds cmd/broker from a validated config and opens every
// listening socket, so a port in use fails here. It refuses broker.mode
// external, which only the bridge understands, and warns about the
// bridge-only settings it ignores. Nothing is served until Start.
func New(cfg Config, log zerolog.Logger) (_ *Server, err error) {
	if cfg.Broker.Mode != broker.ModeEmbedded {
		return nil, fmt.Errorf("broker.mode: %q is a bridge setting (the bridge then uses another broker), "+
			"but cmd/broker is the broker itself: remove broker.mode or set it to %s", cfg.Broker.Mode, broker.ModeEmbedded)
	}
	if ignored := cfg.BridgeOnly(); len(ignored) > 0 {
		log.Warn().Strs("ignored", ignored).Msg("cmd/broker ignores these bridge-only settings; they take effect in cmd/bridge")
	}
	s := &Server{cfg: cfg, log: log, registry: buildinfo.NewRegistry()}
	defer func() {
		if err != nil {
			_ = s.closeAll(context.Background())
		}
	}()
	if s.broker, err = broker.New(cfg.Broker, broker.Options{Logger: log, Registerer: s.registry}); err != nil {
		return nil, err
	}
	if s.http, err = httpserver.New(cfg.HTTP, httpserver.Options{Logger: log, Registerer: s.registry}); err != nil {
		return nil, err
	}
	s.http.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpserver.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	s.http.Handle("GET /readyz", http.HandlerFunc(s.readyz))
	s.http.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	return s, nil
}

// readyz answers 200 while the broker serves, in the bridge's JSON shape.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.broker.Ready() {
		httpserver.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "checks": map[string]string{"broker": "ok"}})
		return
	}
	httpserver.WriteJSON(w, http.StatusServiceUnavailable,
		map[string]any{"status": "unavailable", "checks": map[string]string{"broker": "not running"}})
}

// Start serves MQTT, then HTTP. It returns once the listeners accept
// connections; ctx bounds the start only. Calling it again does nothing.
func (s *Server) Start(ctx context.Context) error {
	s.startOnce.Do(func() {
		if s.startErr = s.broker.Start(ctx); s.startErr == nil {
			s.startErr = s.http.Start(ctx)
		}
	})
	return s.startErr
}

// Run starts the broker, waits until ctx is done (a signal) or the HTTP
// listener fails, then shuts down within the configured shutdown_timeout.
func (s *Server) Run(ctx context.Context) error {
	// A ctx already done means start, then shut down at once, as it always
	// has: Start fails only for its own reasons here.
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		_ = s.closeAll(context.WithoutCancel(ctx))
		return err
	}
	s.log.Info().Str("version", buildinfo.Version()).Str("http", s.HTTPAddr()).Strs("mqtt", s.broker.ListenerNames()).Msg("broker ready")
	return lifecycle.Serve(ctx, s.log, s.http.Err(), s.cfg.ShutdownTimeout, s.Close)
}

// Close stops the HTTP listener, then closes the broker, disconnecting
// every client. It is idempotent and bounded by ctx.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.closeAll(ctx) })
	return s.closeErr
}

func (s *Server) closeAll(ctx context.Context) error {
	var ps lifecycle.Parts
	ps.Add(s.http != nil, "http", s.http)
	ps.Add(s.broker != nil, "broker", s.broker)
	return lifecycle.CloseAll(ctx, ps)
}

// HTTPAddr is the HTTP listener's bound address.
func (s *Server) HTTPAddr() string { return s.http.Addr() }

// Broker is the broker.
func (s *Server) Broker() *broker.Broker { return s.broker }

// run runs cmd/broker until ctx is done: New, then Server.Run.
func run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
