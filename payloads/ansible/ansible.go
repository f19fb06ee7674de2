// Package ansible is the OpenStack firehose's Ansible event schema (the
// "Ansible" section of specs/004): play start, task, per-host stats and run
// finish events. Start and task events carry ansible_type; as in the
// firehose schema, stats and finish events do not, and are told apart by
// the stats event's "stats" and "ansible_host". It decodes only what is needed to validate an event
// and to route it; the event's bytes are the payload and are never
// re-encoded, only cut: [WithoutEventID] removes the de-duplication id,
// which is not a schema field.
package ansible

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/opsfirehose/firehose/internal/jsonscan"
	"github.com/opsfirehose/firehose/payloads"
)

// Event types. The firehose schema sets ansible_type to "start" or "task";
// its stats and finish events have no ansible_type, so [Parse] infers them (an
// event with "stats" or "ansible_host" is a stats event, any other a finish
// event). An explicit
// "stats" or "finish" is accepted too, for hand-made events.
const (
	TypeStart  = "start"
	TypeTask   = "task"
	TypeStats  = "stats"
	TypeFinish = "finish"
)

// Statuses. A start is always OK; a finish is OK or FAILED; a task is OK,
// FAILED, UNREACHABLE or (when the plugin publishes skipped tasks) SKIPPED.
const (
	StatusOK          = "OK"
	StatusFailed      = "FAILED"
	StatusUnreachable = "UNREACHABLE"
	StatusSkipped     = "SKIPPED"
)

// MaxEventIDBytes bounds event_id, which becomes the de-duplication header.
const MaxEventIDBytes = 128

// Event is what the bridge reads from an event: enough to route it. Fields
// that the type does not have are empty.
type Event struct {
	// Type is ansible_type.
	Type string
	// EventID is the optional event_id the plugin sets, stable across its retries.
	EventID string
	// PlaybookID is the run's playbook_id.
	PlaybookID string
	// Status is the status of a start, task or finish.
	Status string
	// AnsibleHost is the inventory host of a task or stats event.
	AnsibleHost string
}

// fieldError is an invalid event: field is the JSON field at fault (empty
// when the event as a whole is), with a dotted path inside objects
// ("stats.ok").
func fieldError(field, msg string) *payloads.FieldError {
	return &payloads.FieldError{Field: field, Msg: msg}
}

// stats is the counters summarize() returns. The schema lists five; ansible
// 2.8 and later add rescued and ignored, which are checked when present.
type stats struct {
	OK          *int64 `json:"ok"`
	Failures    *int64 `json:"failures"`
	Unreachable *int64 `json:"unreachable"`
	Changed     *int64 `json:"changed"`
	Skipped     *int64 `json:"skipped"`
	Rescued     *int64 `json:"rescued"`
	Ignored     *int64 `json:"ignored"`
}

// wire is the decoded subset of an event. Pointers tell a missing field (or
// null) from an empty one.
type wire struct {
	AnsibleType   *string `json:"ansible_type"`
	EventID       *string `json:"event_id"`
	PlaybookID    *string `json:"playbook_id"`
	PlaybookName  *string `json:"playbook_name"`
	Status        *string `json:"status"`
	Host          *string `json:"host"`
	AnsibleHost   *string `json:"ansible_host"`
	Session       *string `json:"session"`
	AnsibleTask   *string `json:"ansible_task"`
	AnsibleResult kind    `json:"ansible_result"`
	Stats         *stats  `json:"stats"`

	// cutFrom and cutTo are what to remove for the payload: the event_id
	// member and a comma next to it. scan sets them; cutTo is 0 when the
	// event has no event_id.
	cutFrom, cutTo int
}

// kind records the JSON type of a value without keeping it, so that a large
// ansible_result is only scanned, never copied.
type kind byte

// UnmarshalJSON keeps the first byte: '{' object, '[' array, '"' string, 'n'
// null, 't'/'f' boolean, otherwise a number.
func (k *kind) UnmarshalJSON(data []byte) error {
	if len(data) > 0 {
		*k = kind(data[0])
	}
	return nil
}

func (k kind) String() string {
	if k == 0 {
		return "nothing"
	}
	return jsonscan.KindName(jsonscan.Kind([]byte{byte(k)}))
}

// Parse validates one event, a JSON object, against the schema of its
// ansible_type and returns its routing fields. Unknown fields are allowed and
// kept (the payload is passed on as it is). The error is a *payloads.FieldError.
func Parse(data []byte) (Event, error) {
	if !jsonscan.Valid(data) {
		return parseSlow(data)
	}
	return ParseValid(data)
}

// ParseValid is Parse for data already known to be valid JSON, such as an
// element returned by [Split]: it skips the validity scan. Results and errors
// are exactly Parse's.
func ParseValid(data []byte) (Event, error) {
	var w wire
	if !scan(data, &w) {
		return parseSlow(data)
	}
	return check(&w)
}

// ParsePayload is [Parse] that also returns the payload to publish: data
// without its event_id, exactly as [WithoutEventID] returns it, found in the
// same pass over data in the common case. The payload is nil on error.
func ParsePayload(data []byte) (Event, []byte, error) {
	if !jsonscan.Valid(data) {
		ev, err := parseSlow(data)
		return ev, nil, err
	}
	return ParseValidPayload(data)
}

// ParseValidPayload is [ParsePayload] for data already known to be valid
// JSON, such as an element returned by [Split].
func ParseValidPayload(data []byte) (Event, []byte, error) {
	var w wire
	if !scan(data, &w) {
		ev, err := parseSlow(data)
		if err != nil {
			return ev, nil, err
		}
		return ev, WithoutEventID(data), nil
	}
	ev, err := check(&w)
	if err != nil {
		return ev, nil, err
	}
	return ev, cut(data, w.cutFrom, w.cutTo), nil
}

// parseSlow decodes with encoding/json, whose errors name the field and the
// type at fault. It is the reference that scan must agree with.
func parseSlow(data []byte) (Event, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return Event{}, decodeError(err)
	}
	return check(&w)
}

// check validates a decoded event against the schema of its type.
func check(w *wire) (Event, error) {
	var typ string
	inferred := w.AnsibleType == nil
	switch {
	case inferred && (w.Session != nil || w.AnsibleTask != nil || w.AnsibleResult != 0):
		// Only start and task events have these; without ansible_type such
		// an event would pass for a finish and be misrouted.
		return Event{}, fieldError("ansible_type", `required ("start" or "task") for an event with session, ansible_task or ansible_result`)
	case !inferred:
		typ = *w.AnsibleType
	case w.Stats != nil || w.AnsibleHost != nil:
		typ = TypeStats
	default:
		typ = TypeFinish
	}
	ev, err := parse(typ, w)
	var fe *payloads.FieldError
	if inferred && errors.As(err, &fe) {
		// Say how the type was chosen, so that a start or task event that
		// lost its ansible_type is not a puzzle.
		return Event{}, fieldError(fe.Field, fe.Msg+" (an event without ansible_type is read as a "+typ+
			` event: "stats" if it has stats or ansible_host, else "finish")`)
	}
	return ev, err
}

// parse checks w against the schema of typ and returns its routing fields.
// The error is a *payloads.FieldError.
func parse(typ string, w *wire) (Event, error) {
	ev := Event{Type: typ}
	if w.EventID != nil {
		if *w.EventID == "" || len(*w.EventID) > MaxEventIDBytes {
			return Event{}, fieldError("event_id", "must be 1 to "+strconv.Itoa(MaxEventIDBytes)+" bytes when given")
		}
		ev.EventID = *w.EventID
	}
	if err := nonEmpty("playbook_id", w.PlaybookID); err != nil {
		return Event{}, err
	}
	ev.PlaybookID = *w.PlaybookID
	if err := present("playbook_name", w.PlaybookName); err != nil {
		return Event{}, err
	}
	var err error
	switch ev.Type {
	case TypeStart:
		err = errors.Join(
			oneOf("status", w.Status, StatusOK),
			present("host", w.Host),
			present("session", w.Session))
	case TypeTask:
		err = errors.Join(
			oneOf("status", w.Status, StatusOK, StatusFailed, StatusUnreachable, StatusSkipped),
			present("host", w.Host),
			nonEmpty("ansible_host", w.AnsibleHost),
			present("session", w.Session),
			present("ansible_task", w.AnsibleTask))
		if err == nil && w.AnsibleResult != '{' {
			err = fieldError("ansible_result", "must be a JSON object, got "+w.AnsibleResult.String())
		}
	case TypeStats:
		err = errors.Join(
			present("host", w.Host),
			nonEmpty("ansible_host", w.AnsibleHost),
			checkStats(w.Stats))
	case TypeFinish:
		err = oneOf("status", w.Status, StatusOK, StatusFailed)
	default:
		return Event{}, fieldError("ansible_type", quote(ev.Type)+` is not "start", "task", "stats" or "finish"`)
	}
	if err != nil {
		return Event{}, first(err)
	}
	if w.Status != nil {
		ev.Status = *w.Status
	}
	if w.AnsibleHost != nil {
		ev.AnsibleHost = *w.AnsibleHost
	}
	return ev, nil
}

// first returns the first *payloads.FieldError of a join, so that the answer names one
// field, the first in schema order.
func first(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()[0]
	}
	return err
}

func present(field string, v *string) error {
	if v == nil {
		return fieldError(field, "required (a string)")
	}
	return nil
}

func nonEmpty(field string, v *string) error {
	if v == nil || *v == "" {
		return fieldError(field, "required (a non-empty string)")
	}
	return nil
}

func oneOf(field string, v *string, allowed ...string) error {
	if v != nil {
		for _, a := range allowed {
			if *v == a {
				return nil
			}
		}
	}
	msg := "must be "
	for i, a := range allowed {
		switch {
		case i == 0:
		case i == len(allowed)-1:
			msg += " or "
		default:
			msg += ", "
		}
		msg += strconv.Quote(a)
	}
	if v == nil {
		return fieldError(field, "required: "+msg[len("must be "):])
	}
	return fieldError(field, msg+", got "+quote(*v))
}

// maxQuoted bounds how much of a bad value an error message repeats.
const maxQuoted = 64

// quote quotes a value for an error message, cut to maxQuoted bytes, so that
// answers and logs never carry much of an event.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + "..."
}

func checkStats(s *stats) error {
	if s == nil {
		return fieldError("stats", "required: an object of counters (ok, failures, unreachable, changed, skipped)")
	}
	for _, c := range []struct {
		name     string
		v        *int64
		required bool
	}{
		{"ok", s.OK, true}, {"failures", s.Failures, true}, {"unreachable", s.Unreachable, true},
		{"changed", s.Changed, true}, {"skipped", s.Skipped, true},
		{"rescued", s.Rescued, false}, {"ignored", s.Ignored, false},
	} {
		switch {
		case c.v == nil && c.required:
			return fieldError("stats."+c.name, "required (an integer)")
		case c.v != nil && *c.v < 0:
			return fieldError("stats."+c.name, "must not be negative")
		}
	}
	return nil
}

// decodeError turns encoding/json's errors into a *payloads.FieldError.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fieldError("", fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fieldError("", "an event must be a JSON object, got "+typ.Value)
		}
		got := typ.Value // "string", "number 1.5": a number's literal is repeated
		if len(got) > maxQuoted {
			got = got[:maxQuoted] + "..."
		}
		return fieldError(typ.Field, "must be "+goType(typ.Type)+", got "+got)
	}
	return fieldError("", "malformed JSON: "+err.Error())
}

// goType names a Go type of wire the way a JSON sender thinks of it.
func goType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int64:
		return "an integer"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}
