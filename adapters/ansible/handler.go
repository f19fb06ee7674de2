package ansible

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/metric"
	"github.com/opsfirehose/firehose/payloads"
	payload "github.com/opsfirehose/firehose/payloads/ansible"
	"github.com/opsfirehose/firehose/topics"
)

// Path is the endpoint the callback plugin posts to.
const Path = "/ansible/v1/events"

// Source is the bus.HeaderSource of every message this adapter publishes.
const Source = "ansible"

// TokenHeader is accepted as well as "Authorization: Bearer <token>", for
// senders that cannot set Authorization.
const TokenHeader = "X-Firehose-Token"

// Options are what the handler needs besides its config section.
type Options = intake.Options

// Handler serves POST /ansible/v1/events: one event or a JSON array of events
// from the callback plugin. A request is all or nothing: every event is
// validated and routed before one Publish call carries them all. It is safe
// for concurrent use.
type Handler struct {
	intake.Base
	cfg    Config
	topics topics.Ansible
	// events counts published events by type, in the order of eventTypes.
	events [len(eventTypes)]prometheus.Counter
}

// eventTypes are the ansible_type values, in the order of Handler.events.
var eventTypes = [...]string{payload.TypeStart, payload.TypeTask, payload.TypeStats, payload.TypeFinish}

func typeIndex(t string) int {
	for i, et := range eventTypes {
		if et == t {
			return i
		}
	}
	return -1
}

// New validates cfg and prepares the handler. It does no I/O.
func New(cfg Config, opts Options) (*Handler, error) {
	h := &Handler{cfg: cfg, topics: topics.Ansible{Prefix: cfg.TopicPrefix}}
	events := metric.CounterVec("firehose_ansible_events_total",
		"Ansible events published, by ansible_type.", "ansible_type")
	for i, t := range eventTypes {
		h.events[i] = events.WithLabelValues(t)
	}
	if err := h.Init(Source, cfg.Validate(), intake.Endpoint{Path: Path, TokenHeaders: []string{TokenHeader}, Handler: h}, opts, events); err != nil {
		return nil, err
	}
	return h, nil
}

// accepted is the 200 answer.
type accepted struct {
	Accepted int `json:"accepted"`
}

// ServeHTTP authenticates, validates every event, builds its topic and
// publishes all of them in one call; it answers 200 {"accepted": n} only once
// Publish returned nil.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	client, body, ok := h.Receive(w, r, h.cfg.MaxBody)
	if !ok {
		return
	}
	msgs, counts, perr := h.messages(body)
	if perr != nil {
		h.Refused(r, client, "input", errors.New(perr.msg))
		httpserver.WriteError(w, perr.code, perr.msg, perr.field)
		return
	}
	if !h.Publish(w, r, client, len(msgs), msgs...) {
		return
	}
	for i, n := range counts {
		if n > 0 {
			h.events[i].Add(float64(n))
		}
	}
	for i := range msgs {
		h.Log.Debug().Str("topic", msgs[i].Topic).Int("bytes", len(msgs[i].Payload)).Msg("published")
	}
	httpserver.WriteJSON(w, http.StatusOK, accepted{Accepted: len(msgs)})
}

// problem is a refused request: the status code, and the message and field
// of its JSON body.
type problem struct {
	code       int
	msg, field string
}

// messages turns a body, one event or an array of them, into bus messages,
// and counts them by type. Each payload is the event's own bytes minus its
// event_id member.
func (h *Handler) messages(body []byte) (msgs []bus.Message, counts [len(eventTypes)]int, _ *problem) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, counts, &problem{http.StatusBadRequest, "empty body: send one event (a JSON object) or an array of events", ""}
	}
	now := h.Now()
	if body[0] != '[' {
		msg, t, err := h.message(body, now, payload.ParsePayload)
		if err != nil {
			return nil, counts, &problem{http.StatusBadRequest, err.Error(), err.Field}
		}
		counts[t]++
		return []bus.Message{msg}, counts, nil
	}
	events, err := payload.Split(body, h.cfg.MaxBatch)
	if errors.Is(err, payload.ErrTooMany) {
		return nil, counts, &problem{http.StatusRequestEntityTooLarge,
			"more than " + strconv.Itoa(h.cfg.MaxBatch) + " events in one request, over ansible.max_batch; send smaller batches", ""}
	}
	if err != nil {
		return nil, counts, &problem{http.StatusBadRequest, err.Error(), ""}
	}
	if len(events) == 0 {
		// A 200 for nothing would tell a sender that lost its events they are safe.
		return nil, counts, &problem{http.StatusBadRequest, "empty array: send one event (a JSON object) or an array of at least one", ""}
	}
	msgs = make([]bus.Message, 0, len(events))
	for i, raw := range events {
		msg, t, err := h.message(raw, now, payload.ParseValidPayload) // Split checked the whole body
		if err != nil {
			field := "[" + strconv.Itoa(i) + "]"
			if err.Field != "" {
				field += "." + err.Field
			}
			return nil, counts, &problem{http.StatusBadRequest, "event " + strconv.Itoa(i) + ": " + err.Error(), field}
		}
		counts[t]++
		msgs = append(msgs, msg)
	}
	return msgs, counts, nil
}

// message validates one event with parse and makes its message; typ
// indexes eventTypes. The payload is the event without event_id, which is
// the de-duplication id, not a schema field.
func (h *Handler) message(raw []byte, now time.Time, parse func([]byte) (payload.Event, []byte, error)) (_ bus.Message, typ int, _ *payloads.FieldError) {
	ev, body, err := parse(raw)
	if err != nil {
		var fe *payloads.FieldError
		if errors.As(err, &fe) {
			return bus.Message{}, 0, fe
		}
		return bus.Message{}, 0, &payloads.FieldError{Msg: err.Error()}
	}
	typ = typeIndex(ev.Type)
	topic, err := h.topic(ev) // an error for every type typeIndex does not know
	if err != nil {
		var le *topics.LevelError
		if errors.As(err, &le) {
			return bus.Message{}, 0, &payloads.FieldError{Field: fieldOf(le.Level), Msg: le.Err.Error()}
		}
		return bus.Message{}, 0, &payloads.FieldError{Msg: err.Error()}
	}
	return bus.NewMessage(Source, dedupID(ev, raw), topic, body, now), typ, nil
}

// topic builds the event's topic; the host level is the inventory host the
// task ran on (ansible_host), escaped.
func (h *Handler) topic(ev payload.Event) (string, error) {
	switch ev.Type {
	case payload.TypeStart:
		return h.topics.PlayStart(ev.PlaybookID)
	case payload.TypeTask:
		return h.topics.Task(ev.PlaybookID, ev.AnsibleHost, ev.Status)
	case payload.TypeStats:
		return h.topics.Stats(ev.PlaybookID, ev.AnsibleHost)
	case payload.TypeFinish:
		return h.topics.Finish(ev.PlaybookID, ev.Status)
	}
	return "", fmt.Errorf("ansible_type %q has no topic", ev.Type)
}

// fieldOf maps a topics builder parameter to the event's JSON field.
func fieldOf(level string) string {
	if level == "host" {
		return "ansible_host"
	}
	return level
}

// dedupID is the plugin's event_id, which its retries keep; an event without
// one (a hand-made curl) is identified by the SHA-256 of its bytes, which is
// just as stable across retries.
func dedupID(ev payload.Event, raw []byte) string {
	if ev.EventID != "" {
		return ev.EventID
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
