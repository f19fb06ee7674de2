// Package app wires the bridge together: the embedded broker, the HTTP front
// door and, in later stages, the adapters, router and sinks. cmd/bridge is a
// thin main around it, and tests start it in-process on 127.0.0.1:0 ports.
//
// Everything is wired explicitly in this file; nothing registers itself.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/httpserver"
)

// Bridge is one running bridge process.
type Bridge struct {
	cfg      config.Config
	log      zerolog.Logger
	registry *prometheus.Registry
	broker   *broker.Broker
	http     *httpserver.Server

	shutdownOnce sync.Once
	shutdownErr  error
}

// New builds the bridge from a validated config and opens every socket, so a
// port in use fails here with the listener's name. Nothing is served until Start.
func New(cfg config.Config, log zerolog.Logger) (_ *Bridge, err error) {
	b := &Bridge{cfg: cfg, log: log, registry: newRegistry()}
	defer func() {
		if err != nil {
			b.closeAll(context.Background())
		}
	}()
	b.broker, err = broker.New(cfg.Broker, broker.Options{Logger: log, Registerer: b.registry})
	if err != nil {
		return nil, err
	}
	b.http, err = httpserver.New(cfg.HTTP, httpserver.Options{Logger: log, Registerer: b.registry})
	if err != nil {
		return nil, err
	}
	b.routes()
	return b, nil
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// routes registers every HTTP endpoint. Adapters are added here, one line each.
func (b *Bridge) routes() {
	b.http.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpserver.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	b.http.Handle("GET /readyz", http.HandlerFunc(b.readyz))
	b.http.Handle("GET /metrics", promhttp.HandlerFor(b.registry, promhttp.HandlerOpts{}))
}

// readyz answers 200 when the bridge can take messages: the broker is serving
// (and, once routes exist, every required sink is up).
func (b *Bridge) readyz(w http.ResponseWriter, _ *http.Request) {
	checks := map[string]string{"broker": "ok"}
	status := http.StatusOK
	if !b.broker.Ready() {
		checks["broker"] = "not running"
		status = http.StatusServiceUnavailable
	}
	body := map[string]any{"status": "ok", "checks": checks}
	if status != http.StatusOK {
		body["status"] = "unavailable"
	}
	httpserver.WriteJSON(w, status, body)
}

// Start serves MQTT and HTTP. It returns once both accept connections.
func (b *Bridge) Start() error {
	if err := b.broker.Start(); err != nil {
		return err
	}
	b.http.Start()
	return nil
}

// Run starts the bridge, waits until ctx is done (a signal) or a listener
// fails, then shuts down within the configured shutdown_timeout.
func (b *Bridge) Run(ctx context.Context) error {
	if err := b.Start(); err != nil {
		b.closeAll(context.Background())
		return err
	}
	b.log.Info().Str("http", b.HTTPAddr()).Msg("bridge ready")
	var runErr error
	select {
	case <-ctx.Done():
		b.log.Info().Msg("shutting down")
	case err := <-b.http.Err():
		runErr = fmt.Errorf("http listener: %w", err)
		b.log.Error().Err(err).Msg("HTTP listener failed; shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, b.Shutdown(sctx))
}

// Shutdown stops the bridge in pipeline order: the HTTP intake first, so no
// new message arrives; then (once they exist) the router drains and the sinks
// flush; the broker closes last, so everything accepted reaches subscribers.
// It is idempotent and bounded by ctx.
func (b *Bridge) Shutdown(ctx context.Context) error {
	b.shutdownOnce.Do(func() { b.shutdownErr = b.closeAll(ctx) })
	return b.shutdownErr
}

func (b *Bridge) closeAll(ctx context.Context) error {
	var errs []error
	if b.http != nil {
		if err := b.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	if b.broker != nil {
		if err := within(ctx, b.broker.Close); err != nil {
			errs = append(errs, fmt.Errorf("broker: %w", err))
		}
	}
	return errors.Join(errs...)
}

// HTTPAddr is the HTTP listener's bound address.
func (b *Bridge) HTTPAddr() string { return b.http.Addr() }

// Broker is the embedded broker, for tests and for the listener addresses.
func (b *Bridge) Broker() *broker.Broker { return b.broker }

// Publisher is what adapters publish through.
func (b *Bridge) Publisher() bus.Publisher { return b.broker }
