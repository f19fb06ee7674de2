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

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/payloads"
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
	SharedTokenHeader = intake.SharedTokenHeader
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
	intake.Base
	cfg    Config
	topics topics.Gerrit
}

// New validates the config and prepares the handler; it does no I/O.
func New(cfg Config, opts Options) (*Handler, error) {
	h := &Handler{cfg: cfg, topics: topics.Gerrit{Prefix: cfg.TopicPrefix}}
	if err := h.Init(Source, cfg.Validate(), intake.Endpoint{Path: Path, TokenHeaders: []string{TokenHeader, SharedTokenHeader}, Handler: h}, opts); err != nil {
		return nil, err
	}
	return h, nil
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
	client, body, ok := h.Receive(w, r, h.cfg.MaxBody)
	if !ok {
		return
	}
	events, err := payload.Parse(body, h.cfg.MaxBatch)
	if errors.Is(err, payload.ErrTooMany) {
		h.Refused(r, client, "max_batch", err)
		httpserver.WriteError(w, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("more than %d events in one request, over gerrit.max_batch; send smaller batches", h.cfg.MaxBatch), "")
		return
	}
	if err != nil {
		// Parse returns a *payloads.FieldError; anything else is answered
		// without a field rather than trusted to be one.
		var e *payloads.FieldError
		if !errors.As(err, &e) {
			e = &payloads.FieldError{}
		}
		h.reject(w, r, client, errorBody{Error: err.Error(), Field: e.Field, Line: e.Line})
		return
	}
	now := h.Now()
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
		h.Log.Debug().Str("topic", topic).Int("line", ev.Line).Msg("gerrit event")
	}
	if !h.Publish(w, r, client, len(msgs), msgs...) {
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]int{"accepted": len(msgs)})
}

// reject answers 400 with the line at fault, which Base.BadRequest's body
// has no place for.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, client string, body errorBody) {
	h.Refused(r, client, "input", errors.New(body.Error))
	httpserver.WriteJSON(w, http.StatusBadRequest, body)
}

// dedupID is the same whenever the same event is sent again, so JetStream
// can drop the copy.
func dedupID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}
