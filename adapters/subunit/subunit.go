// Package subunit is the bridge's intake for the OpenStack subunit workers'
// results, published on gearman-subunit/<worker>/<git namespace>/<repo>/<change>
// with the firehose schema's payload (status, build_uuid, source_url).
// POST /subunit/v1/events takes either the JSON a worker posts (with any
// Content-Type but a stream's, so that a plain `curl -d` works) or, with
// Content-Type: application/x-subunit, a subunit v2 stream that the bridge
// reads itself: the status is "success" only if no test failed.
//
// It must not publish anything from a request it refuses.
package subunit

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/metric"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/payloads"
	payload "github.com/opsfirehose/firehose/payloads/subunit"
	"github.com/opsfirehose/firehose/topics"
)

// Source is the adapter's name, in the Firehose-Source header and logs.
const Source = "subunit"

// Path is the endpoint.
const Path = "/subunit/v1/events"

// Token headers, besides "Authorization: Bearer <token>": the source's own,
// and the one the other adapters share.
const (
	TokenHeader       = "X-Subunit-Token"
	SharedTokenHeader = intake.SharedTokenHeader
)

// StreamType is the Content-Type of a subunit v2 stream, and GzipStreamType
// that of a gzipped one (as is StreamType with Content-Encoding: gzip).
// Any other Content-Type, or none, is a worker's JSON result.
const (
	StreamType     = "application/x-subunit"
	GzipStreamType = StreamType + "+gzip"
)

// Config is the `subunit:` section.
type Config struct {
	// Config holds enabled (default true), topic_prefix (default
	// "gearman-subunit"), tokens and max_body (default 128MiB, which bounds
	// a stream after gzip too).
	intake.Config `yaml:",inline"`
	// MaxRunningTests bounds the tests a stream may have in progress at
	// once (started, not finished); one more is a 413. Default 10000: a
	// runner has one test in progress per worker.
	MaxRunningTests int `yaml:"max_running_tests"`
}

// DefaultConfig is enabled, with the firehose's prefix.
func DefaultConfig() Config {
	return Config{
		Config:          intake.Config{Enabled: true, TopicPrefix: topics.DefaultSubunitPrefix, MaxBody: 128 * bytesize.MiB},
		MaxRunningTests: payload.DefaultMaxRunning,
	}
}

// Validate reports every problem of the section at once.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	p.Wrap("", c.Config.Validate())
	if c.MaxRunningTests <= 0 {
		p.Add("max_running_tests", "must be positive, for example %d", payload.DefaultMaxRunning)
	}
	return p.Err()
}

// Options are what the handler needs besides its config section.
type Options = intake.Options

// Handler serves POST /subunit/v1/events. It is safe for concurrent use.
type Handler struct {
	intake.Base
	cfg       Config
	topics    topics.Subunit
	published *prometheus.CounterVec
}

// New validates the config and prepares the handler; it does no I/O.
func New(cfg Config, opts Options) (*Handler, error) {
	h := &Handler{
		cfg: cfg, topics: topics.Subunit{Prefix: cfg.TopicPrefix},
		published: metric.CounterVec("firehose_subunit_results_published_total",
			"Subunit worker results published on the bus, by status and by input (json or stream).", "status", "input"),
	}
	if err := h.Init(Source, cfg.Validate(), intake.Endpoint{Path: Path, TokenHeaders: []string{TokenHeader, SharedTokenHeader}, Handler: h}, opts, h.published); err != nil {
		return nil, err
	}
	return h, nil
}

// ServeHTTP authenticates and takes a JSON result or a subunit v2 stream,
// by Content-Type.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	client, ok := h.Authenticate(w, r)
	if !ok {
		return
	}
	// Any other type is JSON, as the Gerrit and Chef intakes take it, so
	// that a plain `curl -d` (application/x-www-form-urlencoded) works.
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch strings.ToLower(mt) {
	case StreamType:
		h.serveStream(w, r, client, false)
	case GzipStreamType:
		h.serveStream(w, r, client, true)
	default:
		h.serveJSON(w, r, client)
	}
}

func (h *Handler) serveJSON(w http.ResponseWriter, r *http.Request, client string) {
	body, ok := h.ReadBody(w, r, client, h.cfg.MaxBody)
	if !ok {
		return
	}
	res, err := payload.ParseResult(body)
	if err != nil {
		h.badRequest(w, r, client, err)
		return
	}
	h.publish(w, r, client, res, "json", nil)
}

// serveStream reads a subunit v2 stream; gzipped says the Content-Type
// itself says it is gzip, as Content-Encoding: gzip also can.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, client string, gzipped bool) {
	// The query is checked first, so that a bad one is refused before a
	// large stream is read.
	res, err := payload.ResultFromQuery(r.URL.Query())
	if err != nil {
		h.badRequest(w, r, client, err)
		return
	}
	if r.ContentLength > int64(h.cfg.MaxBody) {
		h.streamError(w, r, client, &httpserver.BodyTooLargeError{Limit: h.cfg.MaxBody, Claimed: r.ContentLength, What: "stream"})
		return
	}
	// The stream is read as it arrives, never held whole.
	stream := httpserver.LimitBody(r, h.cfg.MaxBody)
	if enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc == "gzip" || gzipped && (enc == "" || enc == "identity") {
		gz, err := gzip.NewReader(stream)
		if err != nil {
			h.streamError(w, r, client, fmt.Errorf("reading the gzip body: %w", err))
			return
		}
		defer gz.Close()
		// A gzip bomb inflates to at most max_body before it is refused.
		stream = &httpserver.LimitedReader{R: gz, Left: int64(h.cfg.MaxBody),
			Err: &httpserver.BodyTooLargeError{Limit: h.cfg.MaxBody, What: "decompressed stream"}}
	} else if enc != "" && enc != "identity" {
		h.Refused(r, client, "content encoding", nil)
		httpserver.WriteError(w, http.StatusUnsupportedMediaType, "Content-Encoding "+enc+": only gzip is understood", "Content-Encoding")
		return
	}
	sum, err := payload.Summarize(stream, h.cfg.MaxRunningTests)
	if err != nil {
		h.streamError(w, r, client, err)
		return
	}
	if sum.Packets == 0 {
		h.badRequest(w, r, client, &payloads.FieldError{Err: payload.ErrInvalid, Field: "body", Msg: "empty subunit stream: nothing says whether the tests passed"})
		return
	}
	res.Status = payload.ResultFailure
	if sum.Successful() {
		res.Status = payload.ResultSuccess
	}
	h.publish(w, r, client, res, "stream", &sum)
}

func (h *Handler) publish(w http.ResponseWriter, r *http.Request, client string, res payload.Result, input string, sum *payload.Summary) {
	topic, err := h.topics.Result(res.Worker, res.Namespace, res.Repo, res.Change)
	if err != nil {
		field := ""
		var le *topics.LevelError
		if errors.As(err, &le) {
			field = levelField[le.Level]
		}
		h.badRequest(w, r, client, &payloads.FieldError{Err: payload.ErrInvalid, Field: field, Msg: err.Error()})
		return
	}
	body := res.Payload()
	if !h.Publish(w, r, client, 1, bus.NewMessage(Source, dedupID(topic, body), topic, body, h.Now())) {
		return
	}
	h.published.WithLabelValues(res.Status, input).Inc()
	h.Log.Debug().Str("topic", topic).Str("status", res.Status).Str("input", input).Msg("subunit result")
	answer := map[string]any{"accepted": 1, "topic": topic, "status": res.Status}
	if sum != nil {
		answer["summary"] = sum
	}
	httpserver.WriteJSON(w, http.StatusOK, answer)
}

// levelField names the input field of a topic level that could not be built.
var levelField = map[string]string{
	"worker_host":   payload.FieldWorker,
	"git_namespace": payload.FieldProject,
	"repo":          payload.FieldProject,
	"change":        payload.FieldChange,
}

// streamError answers for a stream that could not be read: 413 over
// max_body or max_running_tests, 400 for a stream that is not subunit v2 (or not gzip), or that the
// client cut short.
func (h *Handler) streamError(w http.ResponseWriter, r *http.Request, client string, err error) {
	if errors.Is(err, httpserver.ErrBodyTooLarge) || errors.Is(err, payload.ErrTooManyRunning) {
		h.Refused(r, client, "body", err)
		httpserver.WriteError(w, http.StatusRequestEntityTooLarge, err.Error(), "")
		return
	}
	h.badRequest(w, r, client, &payloads.FieldError{Err: payload.ErrInvalid, Field: "body", Msg: err.Error()})
}

func (h *Handler) badRequest(w http.ResponseWriter, r *http.Request, client string, err error) {
	field := ""
	if fe := (*payloads.FieldError)(nil); errors.As(err, &fe) {
		field = fe.Field
	}
	h.BadRequest(w, r, client, err, field)
}

// dedupID is the same when a worker posts the same result again.
func dedupID(topic string, body []byte) string {
	s := sha256.New()
	s.Write([]byte(topic))
	s.Write([]byte{0})
	s.Write(body)
	return hex.EncodeToString(s.Sum(nil)[:16])
}
