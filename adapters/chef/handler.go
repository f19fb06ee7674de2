package chef

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/lifecycle"
	"github.com/opsfirehose/firehose/internal/metric"
	"github.com/opsfirehose/firehose/payloads"
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

// requestIDHeader is the X-Remote-Request-Id that chef-client sends (and
// Chef Automate logs), logged with a refused request.
const requestIDHeader = "X-Remote-Request-Id"

// Options are what the handler needs besides its config section.
type Options struct {
	intake.Options
	// DataDir is the bridge's data directory; the rollout store is
	// <DataDir>/chef/rollout. Empty turns the rollout off.
	DataDir string
}

// Handler is the Chef data collector endpoint, on the intake base every
// source shares. It is safe for concurrent use.
type Handler struct {
	intake.Base
	cfg     Config
	parser  *chefpayload.Parser
	build   *builder
	metrics *metrics
	// owners is nil when no team owns anything; rollout nil when off.
	owners  *owners
	rollout *rolloutStore
	// work is what Start begins (reloads, tallies); Close ends it before
	// publishing the last tallies.
	work lifecycle.Background
}

// New validates the config and prepares the handler. With teams owning
// policies it reads their lock files, and with the rollout on it opens the
// store in the data directory: a problem with either is an error naming the
// file, or both teams of a conflict. Close releases the store.
func New(cfg Config, opts Options) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("chef: %w", err)
	}
	if err := cfg.Redact.Validate(); err != nil {
		return nil, fmt.Errorf("chef.redact: %w", err)
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
	h := &Handler{cfg: cfg, parser: parser, build: b, metrics: m}
	ep := intake.Endpoint{
		// {$} matches the path exactly: a bare trailing slash would make a
		// subtree pattern, and the mux would then redirect the other spelling.
		Path: Path + "{$}", Also: []string{PathNoEnd},
		TokenHeaders: tokenHeaders, OwnHeadersOnly: true,
		Name: "data-collector", RequestIDHeader: requestIDHeader,
		Handler: http.HandlerFunc(h.collect),
	}
	if err := h.Init(Source, nil, ep, opts.Options, m.collectors()...); err != nil {
		return nil, err
	}
	for _, r := range chefpayload.Reasons() {
		h.Metrics.Warnings.WithLabelValues(r) // every reason shows, at 0
	}
	if len(cfg.Owners.Teams) > 0 {
		if h.owners, err = newOwners(cfg.Owners, opts.Logger, m.reloads); err != nil {
			return nil, fmt.Errorf("chef.owners: %w", err)
		}
		b.owners = h.owners
	}
	if cfg.Rollout.Enabled && opts.DataDir != "" {
		dir := filepath.Join(opts.DataDir, "chef", "rollout")
		if h.rollout, err = openRollout(dir, cfg.Rollout.MaxNodes, opts.Logger); err != nil {
			return nil, fmt.Errorf("chef.rollout: %w", err)
		}
		if opts.Registerer != nil {
			m.registerStore(opts.Registerer, h.rollout)
		}
	}
	return h, nil
}

// Start reloads the policy lock files when they change, and publishes the
// retained tally of each cookbook whose counts changed (at once every tally
// it has, so that a restarted broker has them again), in the background until
// Close. ctx bounds the start only. Calling it again does nothing.
func (h *Handler) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("chef: start: %w", err)
	}
	h.work.Start(ctx, h.run)
	return nil
}

func (h *Handler) run(ctx context.Context) {
	var wg sync.WaitGroup
	if h.owners != nil {
		wg.Go(func() { h.owners.run(ctx) })
	}
	if h.rollout != nil {
		wg.Go(func() {
			interval := h.cfg.Rollout.TallyInterval
			if interval <= 0 {
				interval = time.Second
			}
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				h.publishTallies(ctx)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
}

// publishTallies publishes, retained, every tally changed since the last
// time; one that fails is published at the next.
func (h *Handler) publishTallies(ctx context.Context) {
	snaps := h.rollout.takeDirty()
	if len(snaps) == 0 {
		return
	}
	now := h.Now()
	msgs := make([]bus.Message, 0, len(snaps))
	for _, snap := range snaps {
		m, err := h.build.tally(snap, now)
		if err != nil {
			h.Log.Warn().Err(err).Str("cookbook", snap.key.cookbook).Msg("cookbook tally has no topic; not published")
			continue
		}
		msgs = append(msgs, m)
	}
	if err := h.Pub.Publish(ctx, msgs...); err != nil {
		h.rollout.markDirty(snaps)
		if ctx.Err() == nil {
			h.Log.Warn().Err(err).Int("tallies", len(msgs)).Msg("cookbook tallies not published; retrying")
		}
		return
	}
	h.metrics.messages.Add(float64(len(msgs)))
}

// Close stops what Start began, publishes the tallies still to publish,
// within ctx, and closes the rollout store. Call it after the HTTP server
// stopped, and before the publisher closes.
func (h *Handler) Close(ctx context.Context) error {
	started, err := h.work.Stop(ctx)
	if err != nil {
		return fmt.Errorf("chef: close: %w", err)
	}
	if h.rollout == nil {
		return nil
	}
	if started {
		h.publishTallies(ctx)
	}
	return h.rollout.close()
}

// Register adds POST (the base's) and GET on both spellings of the path.
func (h *Handler) Register(mux interface {
	Handle(pattern string, h http.Handler)
}) {
	h.Base.Register(mux)
	health := http.HandlerFunc(h.health)
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
	client, ok := h.Authenticate(w, r)
	if !ok {
		h.metrics.rejected.WithLabelValues("auth").Inc()
		return
	}
	body, ok := h.ReadBody(w, r, client, h.cfg.MaxBody)
	if !ok {
		h.metrics.rejected.WithLabelValues("body").Inc()
		return
	}
	p, err := h.prepare(body)
	if err != nil {
		var perr *payloads.FieldError
		if !errors.As(err, &perr) {
			perr = &payloads.FieldError{Msg: err.Error()}
		}
		reason := "invalid"
		if perr == chefpayload.ErrUnknownType {
			reason = "unknown_type"
		}
		h.metrics.rejected.WithLabelValues(reason).Inc()
		h.Refused(r, client, reason, perr)
		httpserver.WriteError(w, http.StatusBadRequest, perr.Msg, perr.Field)
		return
	}
	msg, msgs := p.msg, p.msgs
	if !h.Publish(w, r, client, 1, msgs...) {
		p.settle(false)
		h.metrics.rejected.WithLabelValues("publish").Inc()
		return
	}
	p.settle(true)
	h.metrics.reports.WithLabelValues(msg.Kind().String()).Inc()
	h.metrics.messages.Add(float64(len(msgs)))
	for _, m := range msgs {
		h.Log.Debug().Str("topic", m.Topic).Int("bytes", len(m.Payload)).Bool("retained", m.Retain).
			Str("id", m.Headers[bus.HeaderMsgID]).Str("client", client).Msg("published")
	}
	ans := accepted{Status: "ok", Type: msg.Kind().String(), Messages: len(msgs)}
	if warns := msg.Warnings(); len(warns) > 0 {
		h.warned(r, msg, warns, client)
		ans.Warnings = warns[:min(len(warns), maxWarnings)]
		ans.WarningsOmitted = len(warns) - len(ans.Warnings)
	}
	httpserver.WriteJSON(w, http.StatusOK, ans)
}

// warned counts a published message's warnings by reason and logs them at
// debug: they are the sender's to fix, and a fleet can send thousands.
func (h *Handler) warned(r *http.Request, msg chefpayload.Message, warns []chefpayload.Warning, client string) {
	for _, w := range warns {
		h.Metrics.Warnings.WithLabelValues(w.Reason).Inc()
	}
	if e := h.Log.Debug(); e.Enabled() {
		arr := zerolog.Arr()
		for _, w := range warns[:min(len(warns), maxWarnings)] {
			arr.Str(w.Msg)
		}
		h.WithRequestID(e.Str("type", msg.Kind().String()).Int("count", len(warns)).Array("warnings", arr).Str("client", client).
			Str("remote", r.RemoteAddr), r).
			Msg("data-collector message published with warnings")
	}
}

// prepared is a parsed message, what it publishes, and what publishing it
// changes in the rollout store.
type prepared struct {
	h      *Handler
	msg    chefpayload.Message
	msgs   []bus.Message
	change *change
	// forget is a deleted node to forget once its action is published.
	forget *[2]string
}

// settle commits the rollout change once the messages are published, or
// drops it when they were not, so that the sender's retry finds it again.
func (p *prepared) settle(published bool) {
	if !published {
		if p.change != nil {
			p.change.abort()
		}
		return
	}
	if p.change != nil {
		if err := p.change.commit(); err != nil {
			p.h.metrics.storeErrors.Inc()
			p.h.Log.Error().Err(err).Msg("rollout state not stored; the node's next run repeats its rollout events")
		}
	}
	if p.forget != nil {
		if err := p.h.rollout.forget(p.forget[0], p.forget[1]); err != nil {
			p.h.metrics.storeErrors.Inc()
			p.h.Log.Error().Err(err).Msg("deleted node not forgotten by the rollout store")
		}
	}
}

// prepare parses body and builds everything it publishes. For a converge
// that changes its node's cookbook versions (or run status), the change
// holds the node until settle.
func (h *Handler) prepare(body []byte) (*prepared, error) {
	msg, err := h.parser.Parse(body)
	if err != nil {
		return nil, err
	}
	p := &prepared{h: h, msg: msg}
	var events []rolloutEvent
	switch m := msg.(type) {
	case *chefpayload.RunConverge:
		if h.rollout == nil {
			break
		}
		p.change, err = h.rollout.observeRun(m)
		switch {
		case errors.Is(err, errUntracked):
			h.metrics.untracked.Inc()
		case err != nil:
			h.metrics.storeErrors.Inc()
			h.Log.Error().Err(err).Msg("rollout state not read; the run is published without rollout events")
		case p.change != nil:
			events = p.change.events
		}
	case *chefpayload.Action:
		if h.rollout != nil && m.EntityType == "node" && m.Task == "delete" {
			org := ""
			if m.OrganizationName != nil {
				org = *m.OrganizationName
			}
			p.forget = &[2]string{org, m.EntityName}
		}
	}
	if p.msgs, err = h.build.build(msg, h.Now(), events); err != nil {
		p.settle(false)
		return nil, err
	}
	return p, nil
}

// messages parses body and builds everything it publishes, committing any
// rollout change at once: for tests, which publish nothing.
func (h *Handler) messages(body []byte) (chefpayload.Message, []bus.Message, error) {
	p, err := h.prepare(body)
	if err != nil {
		return nil, nil, err
	}
	p.settle(true)
	return p.msg, p.msgs, nil
}

type metrics struct {
	reports  *prometheus.CounterVec
	messages prometheus.Counter
	rejected *prometheus.CounterVec
	// The teams' and rollout's.
	reloads     *prometheus.CounterVec
	untracked   prometheus.Counter
	storeErrors prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		reports: metric.CounterVec("firehose_chef_reports_total",
			"Data-collector messages accepted, by type (run_start, run_converge, action, node_ping, inspec_report).", "type"),
		messages: metric.Counter("firehose_chef_messages_published_total",
			"Bus messages published by the Chef adapter (run, status and resource messages)."),
		rejected: metric.CounterVec("firehose_chef_requests_rejected_total",
			"Data-collector requests refused, by reason (auth, body, invalid, unknown_type, publish).", "reason"),
		reloads: metric.CounterVec("firehose_chef_policy_lock_reloads_total",
			"Reloads of the policy lock files after they changed, by result (ok, error: the previous ownership stays).", "result"),
		untracked: metric.Counter("firehose_chef_rollout_untracked_runs_total",
			"Runs of nodes the rollout does not track, because it tracks chef.rollout.max_nodes nodes already."),
		storeErrors: metric.Counter("firehose_chef_rollout_store_errors_total",
			"Failed reads and writes of the rollout store in the data directory."),
	}
}

// registerStore adds the rollout store's sizes as gauges.
func (m *metrics) registerStore(reg prometheus.Registerer, s *rolloutStore) {
	gauge := func(name, help string, f func() float64) {
		_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("firehose_chef_rollout_nodes", "Nodes whose cookbook versions the rollout store remembers.", func() float64 {
		n, _, _, _ := s.stats()
		return float64(n)
	})
	gauge("firehose_chef_rollout_tally_versions", "Cookbook versions the retained tallies count, across orgs and cookbooks.", func() float64 {
		_, _, _, lines := s.stats()
		return float64(lines)
	})
}

// collectors are the adapter's own metrics, registered by the base beside
// the intake family every source shares.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.reports, m.messages, m.rejected, m.reloads, m.untracked, m.storeErrors}
}
