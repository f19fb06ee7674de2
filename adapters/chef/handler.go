package chef

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
	"github.com/opsfirehose/firehose/topics"
)

// Paths of the data collector. Both spellings are served, never redirected:
// chef-client posts to data_collector.server_url exactly as configured and
// raises on a redirected POST, and Chef Infra Server always adds the slash.
const (
	Path      = "/data-collector/v0/"
	PathNoEnd = "/data-collector/v0"
)

// Token headers: chef-client and Chef Infra Server send
// x-data-collector-token; api-token is Chef Automate's other header.
// x-data-collector-auth ("version=1.0") carries no secret and is ignored.
var tokenHeaders = []string{"X-Data-Collector-Token", "Api-Token"}

// Options are what the handler needs besides its config section.
type Options = intake.Options

// Handler is the Chef data collector endpoint. It is safe for concurrent use.
type Handler struct {
	cfg     Config
	pub     bus.Publisher
	log     zerolog.Logger
	tokens  *httpserver.Tokens
	now     func() time.Time
	parser  *chefpayload.Parser
	build   *builder
	metrics *metrics
}

// New validates the config and prepares the handler; it does no I/O.
func New(cfg Config, opts Options) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("chef: %w", err)
	}
	if err := cfg.Redact.Validate(); err != nil {
		return nil, fmt.Errorf("chef.redact: %w", err)
	}
	if opts.Publisher == nil {
		return nil, errors.New("chef: a publisher is required")
	}
	parser, err := chefpayload.NewParser(cfg.Validation)
	if err != nil {
		return nil, fmt.Errorf("chef: schemas: %w", err)
	}
	rules, _ := cfg.Attributes.rules() // problems were reported by Validate
	b := &builder{topics: topics.Chef{Prefix: cfg.TopicPrefix}, statuses: map[string]bool{}, levels: rules}
	for _, s := range cfg.ResourceStatuses {
		b.statuses[s] = true
	}
	if cfg.Redact.Enabled || cfg.Redact.DropDelta {
		b.redact = &redactor{dropDelta: cfg.Redact.DropDelta}
		if cfg.Redact.Enabled {
			if b.redact.keys, err = cfg.Redact.compile(); err != nil {
				return nil, fmt.Errorf("chef.redact: %w", err)
			}
		}
	}
	m := newMetrics()
	if opts.Registerer != nil {
		if err := m.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("chef metrics: %w", err)
		}
	}
	return &Handler{cfg: cfg, pub: opts.Publisher, log: opts.Logger, tokens: opts.Tokens, now: opts.Clock(),
		parser: parser, build: b, metrics: m}, nil
}

// Register adds POST and GET on both spellings of the path.
func (h *Handler) Register(mux interface {
	Handle(pattern string, h http.Handler)
}) {
	collect := http.HandlerFunc(h.collect)
	health := http.HandlerFunc(h.health)
	// {$} matches the path exactly: a bare trailing slash would make a
	// subtree pattern, and the mux would then redirect the other spelling.
	mux.Handle("POST "+Path+"{$}", collect)
	mux.Handle("POST "+PathNoEnd, collect)
	mux.Handle("GET "+Path+"{$}", health)
	mux.Handle("GET "+PathNoEnd, health)
}

// health answers Chef Infra Server's GET health pings.
func (h *Handler) health(w http.ResponseWriter, _ *http.Request) {
	httpserver.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// accepted is the answer to a message that is on the bus.
type accepted struct {
	Status   string `json:"status"`
	Type     string `json:"type"`
	Messages int    `json:"messages"`
	// Warnings are the message's problems that did not stop it (the first
	// maxWarnings; WarningsOmitted counts the rest).
	Warnings        []chefpayload.Warning `json:"warnings,omitempty"`
	WarningsOmitted int                   `json:"warnings_omitted,omitempty"`
}

// maxWarnings bounds the warnings an answer lists: a converge of thousands
// of resources can have a problem in each.
const maxWarnings = 20

func (h *Handler) collect(w http.ResponseWriter, r *http.Request) {
	tokenName, ok := httpserver.Authenticate(w, r, h.tokens, tokenHeaders...)
	if !ok {
		h.refused(r, "auth", "", "missing or invalid token", "")
		return
	}
	body, ok := httpserver.ReadBody(w, r, h.cfg.MaxBody)
	if !ok {
		h.refused(r, "body", tokenName, "body over max_body or unreadable", "")
		return
	}
	msg, msgs, err := h.messages(body)
	if err != nil {
		var perr *chefpayload.Error
		if !errors.As(err, &perr) {
			perr = &chefpayload.Error{Msg: err.Error()}
		}
		reason := "invalid"
		if perr == chefpayload.ErrUnknownType {
			reason = "unknown_type"
		}
		h.refused(r, reason, tokenName, perr.Msg, perr.Field)
		httpserver.WriteError(w, http.StatusBadRequest, perr.Msg, perr.Field)
		return
	}
	if err := h.pub.Publish(r.Context(), msgs...); err != nil {
		h.metrics.rejected.WithLabelValues("publish").Inc()
		h.log.Warn().Err(err).Str("type", msg.Kind().String()).Str("remote", r.RemoteAddr).
			Msg("data-collector message not published; the sender will retry")
		httpserver.WritePublishError(w, err)
		return
	}
	h.metrics.reports.WithLabelValues(msg.Kind().String()).Inc()
	h.metrics.messages.Add(float64(len(msgs)))
	for _, m := range msgs {
		h.log.Debug().Str("topic", m.Topic).Int("bytes", len(m.Payload)).Bool("retained", m.Retain).
			Str("id", m.Headers[bus.HeaderMsgID]).Str("token", tokenName).Msg("published")
	}
	ans := accepted{Status: "ok", Type: msg.Kind().String(), Messages: len(msgs)}
	if warns := msg.Warnings(); len(warns) > 0 {
		h.warned(r, msg, warns, tokenName)
		ans.Warnings = warns[:min(len(warns), maxWarnings)]
		ans.WarningsOmitted = len(warns) - len(ans.Warnings)
	}
	httpserver.WriteJSON(w, http.StatusOK, ans)
}

// warned counts a published message's warnings by reason and logs them at
// debug: they are the sender's to fix, and a fleet can send thousands.
func (h *Handler) warned(r *http.Request, msg chefpayload.Message, warns []chefpayload.Warning, token string) {
	for _, w := range warns {
		h.metrics.warnings.WithLabelValues(Source, w.Reason).Inc()
	}
	if e := h.log.Debug(); e.Enabled() {
		arr := zerolog.Arr()
		for _, w := range warns[:min(len(warns), maxWarnings)] {
			arr.Str(w.Msg)
		}
		e.Str("type", msg.Kind().String()).Int("count", len(warns)).Array("warnings", arr).Str("token", token).
			Str("remote", r.RemoteAddr).Str("request_id", r.Header.Get("X-Remote-Request-Id")).
			Msg("data-collector message published with warnings")
	}
}

// messages parses body and builds everything it publishes.
func (h *Handler) messages(body []byte) (chefpayload.Message, []bus.Message, error) {
	msg, err := h.parser.Parse(body)
	if err != nil {
		return nil, nil, err
	}
	msgs, err := h.build.build(msg, h.now())
	if err != nil {
		return nil, nil, err
	}
	return msg, msgs, nil
}

// refused logs a refused request at info, without its body.
func (h *Handler) refused(r *http.Request, reason, token, msg, field string) {
	h.metrics.rejected.WithLabelValues(reason).Inc()
	h.log.Info().Str("reason", reason).Str("error", msg).Str("field", field).Str("token", token).
		Str("remote", r.RemoteAddr).Str("request_id", r.Header.Get("X-Remote-Request-Id")).
		Msg("data-collector request refused")
}

type metrics struct {
	reports  *prometheus.CounterVec
	messages prometheus.Counter
	rejected *prometheus.CounterVec
	// warnings is the intake family shared by every source:
	// firehose_intake_warnings_total{source, reason}.
	warnings *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "firehose_chef_reports_total",
			Help: "Data-collector messages accepted, by type (run_start, run_converge, action, node_ping, inspec_report).",
		}, []string{"type"}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "firehose_chef_messages_published_total",
			Help: "Bus messages published by the Chef adapter (run, status and resource messages).",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "firehose_chef_requests_rejected_total",
			Help: "Data-collector requests refused, by reason (auth, body, invalid, unknown_type, publish).",
		}, []string{"reason"}),
		warnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "firehose_intake_warnings_total",
			Help: "Problems found in messages that were published all the same, by source and reason.",
		}, []string{"source", "reason"}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.reports, m.messages, m.rejected} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	// Another source may have registered the family first: share it.
	if err := reg.Register(m.warnings); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
		shared, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return err
		}
		m.warnings = shared
	}
	for _, r := range chefpayload.Reasons {
		m.warnings.WithLabelValues(Source, r) // every reason shows, at 0
	}
	return nil
}
