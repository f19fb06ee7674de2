package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/metric"
	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Options carries what the server needs besides its config section.
type Options struct {
	Logger zerolog.Logger
	// Registerer receives the HTTP metrics; nil means none.
	Registerer prometheus.Registerer
}

// Server is the bridge's one HTTP listener. Handlers are added with Handle
// before Start; every request is counted by route and status code.
type Server struct {
	log     zerolog.Logger
	ln      net.Listener
	mux     *http.ServeMux
	srv     *http.Server
	tokens  *Tokens
	cfg     Config
	metrics *httpMetrics
	// patterns are the ones given to Handle: any other pattern the mux
	// reports is one it made up to redirect an unclean path.
	patterns map[string]bool
	// lingerBuffers hold what lingering reads and throws away.
	lingerBuffers sync.Pool

	serveErr  chan error
	startOnce sync.Once
}

// Fixed bounds on what a client may cost before its request is handed to a
// handler (and so before any token is checked): the request line and headers
// must arrive within ReadHeaderTimeout and hold at most MaxHeaderBytes (more
// gets 431). The intake's own senders send a few hundred bytes of headers.
// An idle keep-alive connection is closed after IdleTimeout.
const (
	ReadHeaderTimeout = 10 * time.Second
	MaxHeaderBytes    = 64 << 10
	IdleTimeout       = 2 * time.Minute
)

// New opens the listening socket, so a port in use fails here, and prepares
// the server. Call Close to release the socket even if Start is never called.
func New(cfg Config, opts Options) (*Server, error) {
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		var err error
		if tlsCfg, err = cfg.TLS.Server(); err != nil {
			return nil, fmt.Errorf("http.tls: %w", err)
		}
	}
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, &strictyaml.KeyError{Key: "http.address", Err: err} // the command line names the flag that set it
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s := &Server{
		log:      opts.Logger.With().Str("component", "http").Logger(),
		ln:       ln,
		mux:      http.NewServeMux(),
		tokens:   NewTokens(cfg.Tokens),
		cfg:      cfg,
		metrics:  newHTTPMetrics(),
		serveErr: make(chan error, 1),
	}
	s.lingerBuffers.New = func() any { b := make([]byte, lingerBufferSize); return &b }
	if opts.Registerer != nil {
		if err := s.metrics.register(opts.Registerer); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("http metrics: %w", err)
		}
	}
	s.srv = &http.Server{
		Handler:           s.instrument(http.HandlerFunc(s.route)),
		ReadHeaderTimeout: ReadHeaderTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ConnState: func(_ net.Conn, state http.ConnState) {
			switch state {
			case http.StateNew:
				s.metrics.conns.Inc()
			case http.StateClosed, http.StateHijacked:
				s.metrics.conns.Dec()
			}
		},
	}
	return s, nil
}

// Tokens returns the configured intake tokens, for adapters to check.
func (s *Server) Tokens() *Tokens { return s.tokens }

// Handle registers a handler for a ServeMux pattern such as "POST /ansible/v1/events".
// The pattern is also the `route` label of the request metrics.
func (s *Server) Handle(pattern string, h http.Handler) {
	if s.patterns == nil {
		s.patterns = map[string]bool{}
	}
	s.patterns[pattern] = true
	s.mux.Handle(pattern, h)
}

// Addr is the bound address, with the real port when the config said :0.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start serves in the background, until Close. It returns at once (ctx bounds
// the start only); a later failure of the listener is reported by Err.
func (s *Server) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("http: start: %w", err)
	}
	s.startOnce.Do(func() {
		go func() {
			err := s.srv.Serve(s.ln)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			s.serveErr <- err
		}()
		s.log.Info().Str("address", s.Addr()).Bool("tls", s.cfg.TLS != nil).
			Bool("tokens_required", s.tokens.Required()).Msg("HTTP listener up")
	})
	return nil
}

// Err delivers the error that stopped the server, if it stopped on its own.
func (s *Server) Err() <-chan error { return s.serveErr }

// Close stops accepting requests and waits, until ctx is done, for the
// requests in progress to finish (http.Server's Shutdown); it closes the
// socket even if Start was never called. Requests still running when ctx ends
// are cut off.
func (s *Server) Close(ctx context.Context) error {
	s.startOnce.Do(func() {}) // a Start after Close must not serve
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	_ = s.ln.Close()
	return err
}

// route serves a request through the mux, turning the mux's plain-text 404
// and 405 answers into JSON errors, with the Allow header kept.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// The mux would redirect an unclean path ("//", ".."). Senders such
		// as chef-client raise on a redirected POST and others drop the
		// body, so a write is told where to go instead.
		if clean := cleanPath(r.URL.Path); clean != r.URL.Path {
			WriteError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+"; did you mean "+clean+"?", "")
			return
		}
	}
	h, pattern := s.mux.Handler(r)
	if s.patterns[pattern] {
		s.mux.ServeHTTP(w, r)
		return
	}
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	switch probe.code {
	case http.StatusMethodNotAllowed:
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		WriteError(w, probe.code, r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+allow, "")
	case http.StatusNotFound:
		WriteError(w, probe.code, "no such endpoint: "+r.URL.Path, "")
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		// The mux adds a missing "/" for a subtree pattern; as above, only
		// reads are redirected.
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			WriteError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+"; did you mean "+probe.header.Get("Location")+"?", "")
			return
		}
		fallthrough
	default:
		for k, v := range probe.header {
			w.Header()[k] = v
		}
		w.WriteHeader(probe.code)
	}
}

// cleanPath is the mux's canonical form of a path: path.Clean, keeping a
// trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	clean := path.Clean(p)
	if p[len(p)-1] == '/' && clean != "/" {
		clean += "/"
	}
	return clean
}

// probeWriter captures the mux's own 404/405/redirect answer, body discarded.
type probeWriter struct {
	header http.Header
	code   int
}

func (p *probeWriter) Header() http.Header  { return p.header }
func (p *probeWriter) WriteHeader(code int) { p.code = code }
func (p *probeWriter) Write(b []byte) (int, error) {
	if p.code == 0 {
		p.code = http.StatusOK
	}
	return len(b), nil
}

// statusRecorder keeps the status code for the metrics, and runs before,
// once, just before the answer starts.
type statusRecorder struct {
	http.ResponseWriter
	status int
	before func()
}

func (r *statusRecorder) start(code int) {
	if r.status == 0 {
		r.status = code
		if r.before != nil {
			r.before()
		}
	}
}

func (r *statusRecorder) WriteHeader(code int) {
	r.start(code)
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.start(http.StatusOK)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer (flush, deadlines).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument counts requests and body bytes, and lingers after an answer
// given before the body was read (see linger).
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.metrics.inFlight.Inc()
		defer s.metrics.inFlight.Dec()
		// The handlers get a copy of the request: net/http looks at the
		// type of its own request's Body after the answer starts.
		body := &trackedBody{ReadCloser: r.Body, received: s.metrics.bodyBytes}
		// net/http counts WriteTimeout from the end of the headers, so an
		// upload that took most of read_timeout left the answer no time: the
		// message was published and the client saw a reset, and sent it
		// again. write_timeout counts from the end of the body instead.
		// (0, as in net/http, means no write timeout at all.)
		if s.cfg.WriteTimeout > 0 {
			body.atEnd = func() { _ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) }
		}
		r = r.WithContext(r.Context())
		r.Body = body
		lingering := false
		rec := &statusRecorder{ResponseWriter: w}
		rec.before = func() { lingering = answering(w, r, body) }
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.start(http.StatusOK)
		}
		if lingering {
			s.linger(w, body)
		}
		// ServeMux records the matched pattern on the request it was given.
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched"
		}
		s.metrics.observe(route, rec.status, time.Since(start))
	})
}

type httpMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	inFlight  prometheus.Gauge
	conns     prometheus.Gauge
	bodyBytes prometheus.Counter
	lingered  prometheus.Counter
}

func newHTTPMetrics() *httpMetrics {
	return &httpMetrics{
		requests: metric.CounterVec("firehose_http_requests_total",
			"HTTP requests by route pattern and status code.", "route", "code"),
		duration: metric.HistogramVec("firehose_http_request_duration_seconds",
			"HTTP request duration by route pattern.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "route"),
		inFlight: metric.Gauge("firehose_http_requests_in_flight",
			"HTTP requests being served now: headers read, answer not finished."),
		conns: metric.Gauge("firehose_http_connections",
			"HTTP connections open now, idle or not."),
		bodyBytes: metric.Counter("firehose_http_request_body_bytes_total",
			"Request body bytes received, counted as they arrive, on every route."),
		lingered: metric.Counter("firehose_http_lingered_bytes_total",
			"Request body bytes read and discarded after an answer given before the body was read (a 413, a 401), so that the client reads the answer."),
	}
}

func (m *httpMetrics) register(reg prometheus.Registerer) error {
	return metric.Register(reg, m.requests, m.duration, m.inFlight, m.conns, m.bodyBytes, m.lingered)
}

func (m *httpMetrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
