package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/lifecycle"
	"github.com/opsfirehose/firehose/topics"
)

// BasePath is where the API is served, as in Fuel's service catalog.
const BasePath = "/api/v1/config"

// Options carries what the handler needs besides its config section: what
// the bridge hands every adapter (intake.Options), and ConfigDB's own. The
// Tokens are http.tokens: when configdb.auth configures nothing and they are
// set, they are required, and each may write; when both are empty the API is
// open (the bridge allows that on loopback only). Now is also the clock of
// versions and events.
type Options struct {
	intake.Options
	// DataDir holds the SQLite file when Config.DSN is empty.
	DataDir string
	// TokenChecker replaces the Keystone checker built from the config.
	TokenChecker TokenChecker
	// HTTPClient is used to reach Keystone; nil means a default client.
	HTTPClient *http.Client
}

// Handler serves the ConfigDB API.
type Handler struct {
	cfg     Config
	log     zerolog.Logger
	store   *configdb.Store
	auth    *authenticator
	relay   *relay
	maxBody int64
	// work is the relay, from Start to Close.
	work lifecycle.Background
}

// DatabaseDSN is the database a config uses: Config.DSN, or the SQLite
// file configdb.sqlite in dataDir.
func DatabaseDSN(cfg Config, dataDir string) string {
	if cfg.DSN != "" {
		return cfg.DSN
	}
	if dataDir == "" {
		dataDir = "data"
	}
	return filepath.Join(dataDir, "configdb.sqlite")
}

// Open opens (and migrates) the database and prepares the handler. Unlike
// other adapters' New, it does I/O, hence ctx. Start publishes what the
// outbox holds; Close stops that and releases the database.
func Open(ctx context.Context, cfg Config, opts Options) (*Handler, error) {
	if opts.Publisher == nil {
		return nil, errors.New("configdb: a Publisher is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configdb: %w", err)
	}
	log := opts.Logger
	store, err := configdb.Open(ctx, DatabaseDSN(cfg, opts.DataDir), configdb.Options{
		Topics:    topics.ConfigDB{Prefix: cfg.TopicPrefix},
		Now:       opts.Now,
		CacheSize: int64(cfg.CacheSize),
		MaxConns:  cfg.MaxConnections,
	})
	if err != nil {
		return nil, err
	}
	checker := opts.TokenChecker
	if checker == nil && cfg.Auth.Keystone != nil {
		checker = NewKeystone(*cfg.Auth.Keystone, opts.HTTPClient, opts.Now)
	}
	h := &Handler{
		cfg:     cfg,
		log:     log,
		store:   store,
		auth:    newAuthenticator(cfg.Auth, checker, opts.Tokens),
		relay:   newRelay(store, opts.Publisher, log, cfg.Outbox),
		maxBody: int64(cfg.MaxBody),
	}
	if opts.Registerer != nil {
		if err := h.register(opts.Registerer); err != nil {
			_ = store.Close()
			return nil, fmt.Errorf("configdb metrics: %w", err)
		}
	}
	log.Info().Str("database", store.Backend()).Bool("auth", !h.auth.open).Msg("ConfigDB ready")
	return h, nil
}

func (h *Handler) register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{
		h.relay.published, h.relay.failures,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "firehose_configdb_cache_hits_total",
			Help: "Effective-value GETs answered from the cache.",
		}, func() float64 { hits, _ := h.store.CacheStats(); return float64(hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "firehose_configdb_cache_misses_total",
			Help: "Effective-value GETs that merged from the database.",
		}, func() float64 { _, misses := h.store.CacheStats(); return float64(misses) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "firehose_configdb_outbox_pending",
			Help: "ConfigDB events committed but not yet published.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, _ := h.store.PendingCount(ctx)
			return float64(n)
		}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Register adds the API's routes. *http.ServeMux and *httpserver.Server both fit.
func (h *Handler) Register(mux interface {
	Handle(pattern string, h http.Handler)
}) {
	mux.Handle(BasePath+"/", h)
}

// Start publishes the events waiting in the outbox, and keeps retrying those
// that fail, in the background until Close; ctx bounds the start only. Start
// it with the bridge; close it before the publisher closes.
func (h *Handler) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("configdb: start: %w", err)
	}
	h.work.Start(ctx, h.relay.run)
	return nil
}

// Close stops the relay, waiting for it until ctx is done (events it has not
// published stay in the outbox), then closes the database.
func (h *Handler) Close(ctx context.Context) error {
	if _, err := h.work.Stop(ctx); err != nil {
		return fmt.Errorf("configdb: close: %w", err)
	}
	return h.store.Close()
}

// Store is the handler's database, for tools and tests.
func (h *Handler) Store() *configdb.Store { return h.store }

// ServeHTTP authenticates, authorizes and routes a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, fail := h.auth.authenticate(r)
	if fail == nil {
		fail = authorize(id, r.Method)
	}
	if fail != nil {
		if fail.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="configdb"`)
		}
		if fail.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		h.log.Info().Str("method", r.Method).Str("path", r.URL.Path).Int("status", fail.status).Msg("refused: " + fail.msg)
		writeMsg(w, fail.status, fail.msg, "")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), BasePath+"/")
	if !ok {
		h.notFound(w, r)
		return
	}
	req := &request{h: h, w: w, r: r, id: id, rest: rest}
	req.route()
}

// request is one request being served.
type request struct {
	h    *Handler
	w    http.ResponseWriter
	r    *http.Request
	id   Identity
	rest string
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	writeMsg(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path, "")
}

// methods answers 405 unless the request's method is one of allowed. HEAD is
// served as GET.
func (q *request) methods(allowed ...string) bool {
	m := q.r.Method
	if m == http.MethodHead {
		m = http.MethodGet
	}
	for _, a := range allowed {
		if m == a {
			return true
		}
	}
	q.w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeMsg(q.w, http.StatusMethodNotAllowed, q.r.Method+" is not allowed on "+q.r.URL.Path+"; allowed: "+strings.Join(allowed, ", "), "")
	return false
}

// errorBody is every error answer: "msg" as tuning-box's clients read it,
// "error" (the same text) and "field" as the rest of firehose answers.
type errorBody struct {
	Msg   string `json:"msg"`
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeMsg(w http.ResponseWriter, status int, msg, field string) {
	writeJSON(w, status, errorBody{Msg: msg, Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeMsg(w, http.StatusInternalServerError, "encoding the answer: "+err.Error(), "")
		return
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ok answers v with 200, or err as fail does: a store read's two results.
func (q *request) ok(v any, err error) {
	if err != nil {
		q.fail(err)
		return
	}
	writeJSON(q.w, http.StatusOK, v)
}

// fail answers an error from the store: its kind's status for the caller's
// mistakes, 503 with Retry-After for storage trouble, which is logged.
func (q *request) fail(err error) {
	var e *configdb.Error
	if errors.As(err, &e) {
		status := map[configdb.ErrorKind]int{
			configdb.Invalid:            http.StatusBadRequest,
			configdb.NotFound:           http.StatusNotFound,
			configdb.Conflict:           http.StatusConflict,
			configdb.PreconditionFailed: http.StatusPreconditionFailed,
		}[e.Kind]
		q.h.log.Info().Str("method", q.r.Method).Str("path", q.r.URL.Path).Int("status", status).Msg("refused: " + e.Msg)
		writeMsg(q.w, status, e.Msg, e.Field)
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		q.w.Header().Set("Retry-After", "5")
		writeMsg(q.w, http.StatusServiceUnavailable, "the request was cancelled before it completed; retry", "")
		return
	}
	q.h.log.Error().Err(err).Str("method", q.r.Method).Str("path", q.r.URL.Path).Msg("ConfigDB storage failed")
	q.w.Header().Set("Retry-After", "5")
	writeMsg(q.w, http.StatusServiceUnavailable, "the ConfigDB database is unavailable; retry later", "")
}

func invalid(field, format string, args ...any) error {
	return &configdb.Error{Kind: configdb.Invalid, Msg: fmt.Sprintf(format, args...), Field: field}
}

// body reads the request body up to max_body, as every intake does
// (httpserver.ReadAll: the buffer grows with what arrives).
func (q *request) body() ([]byte, bool) {
	b, err := httpserver.ReadAll(q.r, bytesize.Size(q.h.maxBody))
	if err != nil {
		if errors.Is(err, httpserver.ErrBodyTooLarge) {
			writeMsg(q.w, http.StatusRequestEntityTooLarge, err.Error(), "")
		} else {
			writeMsg(q.w, http.StatusBadRequest, "reading the body: "+err.Error(), "")
		}
		return nil, false
	}
	return b, true
}

// object reads the body as a JSON object, for the entity endpoints.
func (q *request) object() (jsonObject, bool) {
	b, ok := q.body()
	if !ok {
		return nil, false
	}
	var o jsonObject
	if err := json.Unmarshal(b, &o); err != nil || o == nil {
		var msg string
		if err != nil {
			msg = "the body must be a JSON object: " + err.Error()
		} else {
			msg = "the body must be a JSON object, not null"
		}
		writeMsg(q.w, http.StatusBadRequest, msg, "")
		return nil, false
	}
	return o, true
}

// afterWrite publishes the change's event when the bus takes it; see relay.
func (q *request) afterWrite() { q.h.relay.afterWrite(q.r.Context()) }

// created answers 201 with the new object and its Location.
func (q *request) created(location string, v any) {
	q.afterWrite()
	q.w.Header().Set("Location", BasePath+location)
	writeJSON(q.w, http.StatusCreated, v)
}

// noContent answers 204 after a write.
func (q *request) noContent(etag string) {
	q.afterWrite()
	if etag != "" {
		q.w.Header().Set("ETag", etag)
	}
	q.w.WriteHeader(http.StatusNoContent)
}
