// Package gerrit is the bridge's intake for Gerrit's stream-events JSON,
// which germqtt used to publish: POST /gerrit/v1/events takes one event (as
// Gerrit's webhooks plugin sends it) or NDJSON (as `bridge ingest gerrit`
// relays `gerrit stream-events`), and publishes each event unchanged on
// gerrit/<project path>/<event type>.
//
// It must not publish anything from a request it refuses.
package gerrit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/bytesize"
	"github.com/opsfirehose/firehose/httpserver"
	payload "github.com/opsfirehose/firehose/payloads/gerrit"
	"github.com/opsfirehose/firehose/topics"
)

// Source is the adapter's name, in the Firehose-Source header and logs.
const Source = "gerrit"

// Path is the endpoint.
const Path = "/gerrit/v1/events"

// Token headers, besides "Authorization: Bearer <token>": the source's own,
// and the one the other adapters share. Gerrit's webhooks plugin cannot set
// headers, so the token may also come as ?token= in the URL it is given.
const (
	TokenHeader       = "X-Gerrit-Token"
	SharedTokenHeader = "X-Firehose-Token"
	TokenQuery        = "token"
)

// Config is the `gerrit:` section: enabled (default true), topic_prefix
// (default "gerrit"), tokens, max_body (default 8MiB) and max_batch, the
// most events of one NDJSON request (default 1000; `bridge ingest gerrit`
// posts at most 100).
type Config = intake.Batched

// DefaultConfig is enabled, with the firehose's prefix.
func DefaultConfig() Config {
	return Config{
		Config:   intake.Config{Enabled: true, TopicPrefix: topics.DefaultGerritPrefix, MaxBody: 8 * bytesize.MiB},
		MaxBatch: 1000,
	}
}

// Options are what the handler needs besides its config section.
type Options = intake.Options

// Handler serves POST /gerrit/v1/events. It is safe for concurrent use.
type Handler struct {
	cfg       Config
	pub       bus.Publisher
	log       zerolog.Logger
	tokens    *httpserver.Tokens
	now       func() time.Time
	topics    topics.Gerrit
	published prometheus.Counter
}

// New validates the config and prepares the handler; it does no I/O.
func New(cfg Config, opts Options) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gerrit: %w", err)
	}
	if opts.Publisher == nil {
		return nil, errors.New("gerrit: no publisher")
	}
	h := &Handler{
		cfg: cfg, pub: opts.Publisher, log: opts.Logger, tokens: opts.Tokens, now: opts.Clock(),
		topics: topics.Gerrit{Prefix: cfg.TopicPrefix},
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "firehose_gerrit_events_published_total",
			Help: "Gerrit events published on the bus.",
		}),
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(h.published); err != nil {
			return nil, fmt.Errorf("gerrit metrics: %w", err)
		}
	}
	return h, nil
}

// Register adds POST /gerrit/v1/events to mux.
func (h *Handler) Register(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("POST "+Path, h)
}

// errorBody is httpserver.ErrorBody plus the line of an NDJSON body at fault.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	Line  int    `json:"line,omitempty"`
}

// ServeHTTP authenticates, parses the whole body, and publishes every event
// in one call, or none.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(TokenHeader) == "" {
		if t := r.URL.Query().Get(TokenQuery); t != "" {
			r.Header.Set(TokenHeader, t)
		}
	}
	client, ok := httpserver.Authenticate(w, r, h.tokens, "Authorization", TokenHeader, SharedTokenHeader)
	if !ok {
		h.refused(r, client, "authentication")
		return
	}
	body, ok := httpserver.ReadBody(w, r, h.cfg.MaxBody)
	if !ok {
		h.refused(r, client, "body")
		return
	}
	events, err := payload.Parse(body, h.cfg.MaxBatch)
	if errors.Is(err, payload.ErrTooMany) {
		h.log.Info().Str("remote", r.RemoteAddr).Str("client", client).Msg("gerrit request refused: over max_batch")
		httpserver.WriteError(w, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("more than %d events in one request, over gerrit.max_batch; send smaller batches", h.cfg.MaxBatch), "")
		return
	}
	if err != nil {
		var e *payload.Error
		errors.As(err, &e)
		h.reject(w, r, client, errorBody{Error: err.Error(), Field: e.Field, Line: e.Line})
		return
	}
	now := h.now()
	msgs := make([]bus.Message, len(events))
	for i, ev := range events {
		topic, err := h.topics.Event(ev.Project, ev.Type)
		if err != nil {
			field := ev.ProjectField
			var le *topics.LevelError
			if errors.As(err, &le) && le.Level == "event_type" {
				field = payload.FieldType
			}
			h.reject(w, r, client, errorBody{Error: fmt.Sprintf("line %d: %s: %v", ev.Line, field, err), Field: field, Line: ev.Line})
			return
		}
		msgs[i] = bus.NewMessage(Source, dedupID(ev.Raw), topic, ev.Raw, now)
		h.log.Debug().Str("topic", topic).Int("line", ev.Line).Msg("gerrit event")
	}
	if err := h.pub.Publish(r.Context(), msgs...); err != nil {
		h.log.Warn().Err(err).Int("events", len(msgs)).Str("client", client).Msg("gerrit events not published")
		httpserver.WritePublishError(w, err)
		return
	}
	h.published.Add(float64(len(msgs)))
	httpserver.WriteJSON(w, http.StatusOK, map[string]int{"accepted": len(msgs)})
}

func (h *Handler) reject(w http.ResponseWriter, r *http.Request, client string, body errorBody) {
	h.log.Info().Str("remote", r.RemoteAddr).Str("client", client).Str("error", body.Error).Msg("gerrit request refused")
	httpserver.WriteJSON(w, http.StatusBadRequest, body)
}

func (h *Handler) refused(r *http.Request, client, why string) {
	h.log.Info().Str("remote", r.RemoteAddr).Str("client", client).Str("stage", why).Msg("gerrit request refused")
}

// dedupID is the same whenever the same event is sent again, so JetStream
// can drop the copy.
func dedupID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}
