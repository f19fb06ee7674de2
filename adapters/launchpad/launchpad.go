// Package launchpad is the bridge's intake for Launchpad's notification
// mails, which lpmqtt used to read from IMAP: POST /launchpad/v1/events
// takes one mail (Content-Type: message/rfc822), from `bridge ingest
// launchpad` in an MTA pipe or from curl, and publishes lpmqtt's payload on
// launchpad/<project>/<event type>/<bug number>, filled left to right until
// a level is unknown.
//
// It must not publish anything from a request it refuses.
package launchpad

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/metric"
	"github.com/opsfirehose/firehose/payloads"
	payload "github.com/opsfirehose/firehose/payloads/launchpad"
	"github.com/opsfirehose/firehose/topics"
)

// Source is the adapter's name, in the Firehose-Source header and logs.
const Source = "launchpad"

// Path is the endpoint.
const Path = "/launchpad/v1/events"

// Token headers, besides "Authorization: Bearer <token>": the source's own,
// and the one the other adapters share.
const (
	TokenHeader       = "X-Launchpad-Token"
	SharedTokenHeader = intake.SharedTokenHeader
)

// ContentType is the media type of a mail.
const ContentType = "message/rfc822"

// Config is the `launchpad:` section: enabled, topic_prefix, tokens and max_body.
type Config = intake.Config

// DefaultConfig is enabled, with the firehose's prefix.
func DefaultConfig() Config {
	return Config{Enabled: true, TopicPrefix: topics.DefaultLaunchpadPrefix, MaxBody: 10 * bytesize.MiB}
}

// Options are what the handler needs besides its config section.
type Options = intake.Options

// Handler serves POST /launchpad/v1/events. It is safe for concurrent use.
type Handler struct {
	intake.Base
	cfg       Config
	topics    topics.Launchpad
	published *prometheus.CounterVec
}

// New validates the config and prepares the handler; it does no I/O.
func New(cfg Config, opts Options) (*Handler, error) {
	h := &Handler{
		cfg: cfg, topics: topics.Launchpad{Prefix: cfg.TopicPrefix},
		published: metric.CounterVec("firehose_launchpad_notifications_published_total",
			"Launchpad notification mails published on the bus, by kind (bug or other).", "kind"),
	}
	if err := h.Init(Source, cfg.Validate(), intake.Endpoint{Path: Path, TokenHeaders: []string{TokenHeader, SharedTokenHeader}, Handler: h}, opts, h.published); err != nil {
		return nil, err
	}
	return h, nil
}

// ServeHTTP authenticates, parses the mail and publishes its notification.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	client, ok := h.Authenticate(w, r)
	if !ok {
		return
	}
	if ct := r.Header.Get("Content-Type"); !acceptedType(ct) {
		h.Refused(r, client, "content type", nil)
		httpserver.WriteError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q: send the mail as %s", ct, ContentType), "Content-Type")
		return
	}
	body, ok := h.ReadBody(w, r, client, h.cfg.MaxBody)
	if !ok {
		return
	}
	n, err := payload.Parse(body)
	if err != nil {
		field := ""
		if e := (*payloads.FieldError)(nil); errors.As(err, &e) {
			field = e.Field
		}
		h.BadRequest(w, r, client, err, field)
		return
	}
	topic, err := h.topics.Event(n.Project, n.EventType, n.BugNumber)
	if err != nil {
		field := ""
		if le := (*topics.LevelError)(nil); errors.As(err, &le) {
			field = levelField[le.Level]
		}
		h.BadRequest(w, r, client, err, field)
		return
	}
	if !h.Publish(w, r, client, 1, bus.NewMessage(Source, n.ID, topic, n.Payload, h.Now())) {
		return
	}
	kind := "other"
	if n.Type == payload.TypeBug {
		kind = payload.TypeBug
	}
	h.published.WithLabelValues(kind).Inc()
	h.Log.Debug().Str("topic", topic).Msg("launchpad notification")
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"accepted": 1, "topic": topic})
}

// levelField names, for a topic level that could not be built, the mail
// header it came from.
var levelField = map[string]string{
	"project":    payload.HeaderBug,
	"event_type": payload.HeaderNotificationType,
	"bug_number": payload.HeaderSubject,
}

// acceptedType lets curl's and MTAs' usual types through: the mail's own
// type, plain text, raw bytes, or none.
func acceptedType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == ContentType || mt == "text/plain" || mt == "application/octet-stream")
}
