// Package intake holds what every HTTP intake adapter shares: the common keys
// of its config section, what the bridge hands it besides that section, the
// Base its handler embeds (answering, logging and counting a request alike
// for every source), and the intake metrics family, labelled by source.
// Each adapter keeps its own defaults (topic prefix, body limit) and rules.
package intake

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/metric"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/topics"
)

// Config is the keys every adapter section has. An adapter with more keys
// embeds it with `yaml:",inline"` and calls its Validate from its own.
type Config struct {
	// Enabled serves the adapter's endpoints.
	Enabled bool `yaml:"enabled"`
	// TopicPrefix replaces the source's name as the first level(s) of its topics.
	TopicPrefix string `yaml:"topic_prefix"`
	// Tokens, when set, replace http.tokens for this adapter's endpoints.
	Tokens []httpserver.Token `yaml:"tokens"`
	// MaxBody bounds one request; a larger one gets 413.
	MaxBody bytesize.Size `yaml:"max_body"`
}

// Validate reports every problem of the common keys at once.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if err := topics.ValidPrefix(c.TopicPrefix); err != nil {
		p.Add("topic_prefix", "%v", err)
	}
	if c.MaxBody <= 0 {
		p.Add("max_body", "must be positive, for example 8MiB")
	}
	for i, t := range c.Tokens {
		if t.Token == "" {
			p.Add(fmt.Sprintf("tokens[%d].token", i), "required (or token_file)")
		}
	}
	return p.Err()
}

// Batched is the section of an adapter that takes many events in one
// request (an array, NDJSON): the common keys and max_batch.
type Batched struct {
	Config `yaml:",inline"`
	// MaxBatch is the most events one request may carry; more get a 413,
	// found before the events are listed, so that a body of a million tiny
	// events costs no more than its bytes.
	MaxBatch int `yaml:"max_batch"`
}

// Validate reports every problem of the section at once.
func (c *Batched) Validate() error {
	var p strictyaml.Problems
	p.Wrap("", c.Config.Validate())
	if c.MaxBatch <= 0 {
		p.Add("max_batch", "must be positive, for example 1000")
	}
	return p.Err()
}

// Options are what the bridge hands an adapter besides its config section.
type Options struct {
	// Publisher receives every message; required.
	Publisher bus.Publisher
	// Logger is the adapter's child logger: log.With().Str("adapter", name).
	Logger zerolog.Logger
	// Tokens are the effective tokens: the section's own when set, else
	// http.tokens. Nil or empty means no token is required.
	Tokens *httpserver.Tokens
	// Registerer receives the adapter's metrics; nil means none.
	Registerer prometheus.Registerer
	// Now stamps Firehose-Received-At; nil means time.Now.
	Now func() time.Time
}

// Clock is Now, or time.Now when it is nil.
func (o Options) Clock() func() time.Time {
	if o.Now == nil {
		return time.Now
	}
	return o.Now
}

// Outcomes of the intake family firehose_intake_messages_total{source,
// outcome}, a closed set.
const (
	// OutcomeAccepted counts the source's messages published on the bus
	// (answered 2xx). A source message may become several bus messages.
	OutcomeAccepted = "accepted"
	// OutcomeRejected counts requests refused for good (4xx: token, body,
	// content type, invalid input, a message too large for a required
	// route). A refused request counts once, however many messages it
	// carried, since they were not all read.
	OutcomeRejected = "rejected"
	// OutcomeFailed counts requests that could not be published now (503 or
	// 429): the sender retries.
	OutcomeFailed = "failed"
)

// Metrics is the intake family every source shares, each source's series
// told apart by the constant label source:
//
//	firehose_intake_messages_total{source, outcome}
//	firehose_intake_warnings_total{source, reason}
//
// Each adapter makes its own with NewMetrics and registers it (Collectors);
// the registry accepts one collector per source for the same names because
// their source labels differ.
type Metrics struct {
	accepted, rejected, failed prometheus.Counter
	messages                   *prometheus.CounterVec
	// Warnings counts problems in messages published all the same, by
	// reason (a closed set per source, fit for a label).
	Warnings *prometheus.CounterVec
}

// NewMetrics returns source's intake metrics, every outcome at 0.
func NewMetrics(source string) *Metrics {
	labels := prometheus.Labels{"source": source}
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "firehose_intake_messages_total",
			Help:        "Messages of each source by outcome: accepted (published on the bus), rejected (request refused for good, counted once), failed (not published now; the sender retries).",
			ConstLabels: labels,
		}, []string{"outcome"}),
		Warnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "firehose_intake_warnings_total",
			Help:        "Problems found in messages that were published all the same, by source and reason.",
			ConstLabels: labels,
		}, []string{"reason"}),
	}
	m.accepted = m.messages.WithLabelValues(OutcomeAccepted)
	m.rejected = m.messages.WithLabelValues(OutcomeRejected)
	m.failed = m.messages.WithLabelValues(OutcomeFailed)
	return m
}

// Accepted counts n messages published.
func (m *Metrics) Accepted(n int) { m.accepted.Add(float64(n)) }

// Rejected counts a request refused for good.
func (m *Metrics) Rejected() { m.rejected.Inc() }

// PublishFailed counts a request whose Publish returned err: rejected when
// the answer is a 400 or 413 (httpserver.WritePublishError), which retrying
// cannot change, else failed.
func (m *Metrics) PublishFailed(err error) {
	if errors.Is(err, bus.ErrInvalid) || errors.Is(err, bus.ErrTooLarge) {
		m.rejected.Inc()
		return
	}
	m.failed.Inc()
}

// Collectors are the family's collectors, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.messages, m.Warnings}
}

// Base is what an intake handler has besides its own rules: its source's
// name, the bus, its child logger, the effective tokens, the clock and the
// intake metrics, and the one endpoint it serves. An adapter embeds it and
// makes it with Init; its methods answer and count a request the same way
// for every source. Base is safe for concurrent use.
type Base struct {
	Source  string
	Pub     bus.Publisher
	Log     zerolog.Logger
	Now     func() time.Time
	Metrics *Metrics

	tokens       *httpserver.Tokens
	tokenHeaders []string
	patterns     []string
	handler      http.Handler
	// name and requestID are Endpoint's Name and RequestIDHeader.
	name, requestID string
}

// SharedTokenHeader is the token header the classic firehose sources
// (gerrit, launchpad, subunit) take besides their own.
const SharedTokenHeader = "X-Firehose-Token"

// Endpoint is what Init needs to know of the adapter's endpoint.
type Endpoint struct {
	// Path is served for POST, by Handler. A pattern ending in {$} matches
	// the path exactly.
	Path string
	// Also are more paths served the same way: other spellings of Path,
	// served rather than redirected.
	Also []string
	// TokenHeaders are where a token may come, besides
	// "Authorization: Bearer <token>".
	TokenHeaders []string
	// OwnHeadersOnly takes a token from TokenHeaders alone, not from
	// Authorization: for a source whose senders have headers of their own.
	OwnHeadersOnly bool
	// Name names the endpoint's requests in logs ("<Name> request
	// refused"); empty means the source.
	Name string
	// RequestIDHeader is where a sender may name the request as its own
	// logs do; a refusal is logged with it (request_id) when it is there.
	RequestIDHeader string
	// Handler serves Path: the adapter's own handler, which embeds the Base.
	Handler http.Handler
}

// Init makes b, the Base embedded in an adapter's handler: it refuses the
// adapter's config if it did not validate (cfgErr, named after source),
// checks opts, and registers the intake metrics of source and the adapter's
// own collectors (extra) on opts.Registerer. It does no I/O.
func (b *Base) Init(source string, cfgErr error, ep Endpoint, opts Options, extra ...prometheus.Collector) error {
	if cfgErr != nil {
		return fmt.Errorf("%s: %w", source, cfgErr)
	}
	if opts.Publisher == nil {
		return errors.New(source + ": no publisher")
	}
	*b = Base{
		Source: source, Pub: opts.Publisher, Log: opts.Logger, Now: opts.Clock(), Metrics: NewMetrics(source),
		tokens: opts.Tokens, tokenHeaders: append([]string{"Authorization"}, ep.TokenHeaders...),
		handler: ep.Handler, name: ep.Name, requestID: ep.RequestIDHeader,
	}
	if ep.OwnHeadersOnly {
		b.tokenHeaders = b.tokenHeaders[1:]
	}
	if b.name == "" {
		b.name = source
	}
	for _, p := range append([]string{ep.Path}, ep.Also...) {
		b.patterns = append(b.patterns, http.MethodPost+" "+p)
	}
	if err := metric.Register(opts.Registerer, append(b.Metrics.Collectors(), extra...)...); err != nil {
		return fmt.Errorf("%s metrics: %w", source, err)
	}
	return nil
}

// Register adds the endpoint to mux (*http.ServeMux and *httpserver.Server
// both fit).
func (b *Base) Register(mux interface{ Handle(string, http.Handler) }) {
	for _, p := range b.patterns {
		mux.Handle(p, b.handler)
	}
}

// Authenticate checks the request's token (httpserver.Authenticate: 401 or
// 403 already answered when ok is false, and the refusal logged and counted)
// and returns the token's name.
func (b *Base) Authenticate(w http.ResponseWriter, r *http.Request) (client string, ok bool) {
	client, ok = httpserver.Authenticate(w, r, b.tokens, b.tokenHeaders...)
	if !ok {
		b.Refused(r, client, "authentication", nil)
	}
	return client, ok
}

// Receive is Authenticate, then ReadBody.
func (b *Base) Receive(w http.ResponseWriter, r *http.Request, max bytesize.Size) (client string, body []byte, ok bool) {
	if client, ok = b.Authenticate(w, r); !ok {
		return client, nil, false
	}
	body, ok = b.ReadBody(w, r, client, max)
	return client, body, ok
}

// ReadBody reads the body up to max (httpserver.ReadBody: the refusal
// already answered when ok is false, and logged and counted).
func (b *Base) ReadBody(w http.ResponseWriter, r *http.Request, client string, max bytesize.Size) ([]byte, bool) {
	body, ok := httpserver.ReadBody(w, r, max)
	if !ok {
		b.Refused(r, client, "body", nil)
	}
	return body, ok
}

// Refused logs (at info: a sender's mistake is not the bridge's fault) and
// counts a request refused for good at stage; the caller answers it.
func (b *Base) Refused(r *http.Request, client, stage string, err error) {
	b.Metrics.Rejected()
	b.WithRequestID(b.Log.Info().Str("remote", r.RemoteAddr).Str("client", client).Str("stage", stage).AnErr("error", err), r).
		Msg(b.name + " request refused")
}

// WithRequestID adds the request's id, as its sender names it
// (Endpoint.RequestIDHeader), to a log line when the request has one.
func (b *Base) WithRequestID(e *zerolog.Event, r *http.Request) *zerolog.Event {
	if b.requestID == "" {
		return e
	}
	if id := r.Header.Get(b.requestID); id != "" {
		e = e.Str("request_id", id)
	}
	return e
}

// BadRequest answers 400 {"error", "field"} for input that can never be
// published, and logs and counts it.
func (b *Base) BadRequest(w http.ResponseWriter, r *http.Request, client string, err error, field string) {
	b.Refused(r, client, "input", err)
	httpserver.WriteError(w, http.StatusBadRequest, err.Error(), field)
}

// Publish publishes msgs, the bus messages of n source messages, in one
// call. When that fails it answers as httpserver.WritePublishError does,
// logs and counts it, and returns false; on success it counts n accepted
// messages and the caller answers 2xx.
func (b *Base) Publish(w http.ResponseWriter, r *http.Request, client string, n int, msgs ...bus.Message) bool {
	if err := b.Pub.Publish(r.Context(), msgs...); err != nil {
		b.Metrics.PublishFailed(err)
		b.WithRequestID(b.Log.Warn().Err(err).Int("messages", len(msgs)).Str("client", client), r).
			Msg(b.name + " messages not published")
		httpserver.WritePublishError(w, err)
		return false
	}
	b.Metrics.Accepted(n)
	return true
}
