// Package gerrit reads Gerrit's stream-events JSON, as `gerrit stream-events`
// prints it and Gerrit's webhooks plugin posts it: one JSON object per event,
// or NDJSON, one event per line. It extracts only what a topic needs, the
// event type and the project, and keeps every event's bytes as they came.
//
// The project is the first of project, change.project and refUpdate.project
// that is a non-empty string or an object with a non-empty string "name"
// (some Gerrit versions send {"name":"openstack/nova"}); a field that is
// neither is skipped, and named in the error when no field gives a project.
//
// It does no I/O and never changes an event.
package gerrit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opsfirehose/firehose/internal/jsonscan"
	"github.com/opsfirehose/firehose/payloads"
)

// TypeDroppedOutput is the event Gerrit sends down a stream-events session
// whose queue overflowed: events were lost for that session. It carries no
// project, so it is never published.
const TypeDroppedOutput = "dropped-output"

// Fields where the project is looked for, in order.
const (
	FieldProject          = "project"
	FieldChangeProject    = "change.project"
	FieldRefUpdateProject = "refUpdate.project"
	FieldType             = "type"
)

// jsonSpace is JSON's whitespace; bytes.TrimSpace would also drop Unicode
// spaces that are not valid around JSON.
const jsonSpace = " \t\r\n"

// ErrInvalid is wrapped by every *payloads.FieldError of this package, whose
// Line is the 1-based line of the event at fault and whose Field is the JSON
// field at fault ("type", "project", ...), or "" when the line is not a JSON
// object at all.
var ErrInvalid = errors.New("invalid gerrit event")

// Event is one Gerrit event.
type Event struct {
	// Type is the event's "type", such as "comment-added". Unknown types are
	// kept: Gerrit and its plugins add new ones.
	Type string
	// Project is the project's full path ("openstack/nova").
	Project string
	// ProjectField is where Project was found: FieldProject,
	// FieldChangeProject or FieldRefUpdateProject, with ".name" appended
	// when that field was an object such as {"name":"openstack/nova"}.
	ProjectField string
	// Raw is the event's JSON exactly as received, without the whitespace
	// around it. It aliases the input.
	Raw []byte
	// Line is the 1-based line of the input where the event starts.
	Line int
}

// head is the part of an event that decides its topic. Raw messages let a
// wrong type be reported by field instead of failing the whole decode.
type head struct {
	Type      json.RawMessage `json:"type"`
	Project   json.RawMessage `json:"project"`
	Change    json.RawMessage `json:"change"`
	RefUpdate json.RawMessage `json:"refUpdate"`
}

// ErrTooMany is Parse's error for a body of more events than it may return.
var ErrTooMany = errors.New("too many events")

// Parse reads a request body: one event (which may span several lines, as
// pretty-printed JSON does) or NDJSON (one event per line; blank lines are
// skipped). It returns every event or, if any line is bad, only the first
// error: a body is taken whole or not at all. A body of more than max
// events (max <= 0: no bound) is ErrTooMany, found before more than max
// are parsed.
func Parse(body []byte, max int) ([]Event, error) {
	trimmed := bytes.Trim(body, jsonSpace)
	if len(trimmed) == 0 {
		return nil, &payloads.FieldError{Err: ErrInvalid, Line: 1, Msg: "empty body: send one Gerrit event as JSON, or NDJSON with one event per line"}
	}
	// A body holding one JSON value is one event, even when it spans lines.
	// json.Valid stops at the second value of an NDJSON body, so this costs
	// one line's scan.
	if bytes.IndexByte(trimmed, '\n') < 0 || json.Valid(trimmed) {
		line := 1 + bytes.Count(body[:len(body)-len(bytes.TrimLeft(body, jsonSpace))], []byte{'\n'})
		ev, err := parseAt(trimmed, line)
		if err != nil {
			return nil, err
		}
		return []Event{ev}, nil
	}
	// The events slice grows with the events found: a body of newlines
	// costs its bytes, not an Event per newline.
	var events []Event
	for line, rest := 1, body; len(rest) > 0; line++ {
		var l []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			l, rest = rest[:i], rest[i+1:]
		} else {
			l, rest = rest, nil
		}
		l = bytes.Trim(l, jsonSpace)
		if len(l) == 0 {
			continue
		}
		if max > 0 && len(events) == max {
			return nil, ErrTooMany
		}
		ev, err := parseAt(l, line)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// ParseEvent reads one event, such as one line of `gerrit stream-events`.
// Whitespace around it is dropped; the error's Line is 1.
func ParseEvent(raw []byte) (Event, error) {
	return parseAt(bytes.Trim(raw, jsonSpace), 1)
}

func parseAt(raw []byte, line int) (Event, error) {
	fail := func(field, format string, args ...any) (Event, error) {
		return Event{}, &payloads.FieldError{Err: ErrInvalid, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	var h head
	if err := json.Unmarshal(raw, &h); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return fail("", "a Gerrit event must be a JSON object, not %s", typeErr.Value)
		}
		return fail("", "invalid JSON: %v", err)
	}
	typ, ok, err := stringField(h.Type)
	if err != nil {
		return fail(FieldType, "%v", err)
	}
	if !ok || typ == "" {
		return fail(FieldType, "missing: every Gerrit event has a type, such as \"patchset-created\"")
	}
	ev := Event{Type: typ, Raw: raw, Line: line}
	// The first field that names a project wins. A field that is present but
	// names none is skipped; the first such field is the one an error names.
	badField, problem := "", ""
	skip := func(field, why string) {
		if badField == "" {
			badField, problem = field, why
		}
	}
	if name, field, why := projectName(h.Project, FieldProject); name != "" {
		ev.Project, ev.ProjectField = name, field
		return ev, nil
	} else if why != "" {
		skip(FieldProject, why)
	}
	for _, nested := range []struct {
		field, object string
		raw           json.RawMessage
	}{{FieldChangeProject, "change", h.Change}, {FieldRefUpdateProject, "refUpdate", h.RefUpdate}} {
		if isAbsent(nested.raw) {
			continue
		}
		var inner struct {
			Project json.RawMessage `json:"project"`
		}
		if nested.raw[0] != '{' || json.Unmarshal(nested.raw, &inner) != nil {
			skip(nested.object, "must be a JSON object, not "+kind(nested.raw))
			continue
		}
		if name, field, why := projectName(inner.Project, nested.field); name != "" {
			ev.Project, ev.ProjectField = name, field
			return ev, nil
		} else if why != "" {
			skip(nested.field, why)
		}
	}
	if badField != "" {
		return fail(badField, "%s, and the %q event names no project elsewhere (looked for project, change.project and refUpdate.project)", problem, typ)
	}
	return fail(FieldProject, "the %q event names no project (looked for project, change.project and refUpdate.project)", typ)
}

// projectName reads a project field at the given path: a non-empty string,
// or an object whose "name" is one, as in {"name":"openstack/nova"}. field
// is where the name was found (path, or path + ".name"). When there is no
// name, problem says why, or is "" when the field is absent or null.
func projectName(raw json.RawMessage, path string) (name, field, problem string) {
	const want = "must be a non-empty string or an object with a non-empty string \"name\""
	if isAbsent(raw) {
		return "", "", ""
	}
	if raw[0] == '{' {
		var obj struct {
			Name json.RawMessage `json:"name"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return "", "", want + ": " + err.Error()
		}
		if s, _, err := stringField(obj.Name); err == nil && s != "" {
			return s, path + ".name", ""
		}
		if isAbsent(obj.Name) {
			return "", "", want + ", not an object without a name"
		}
		return "", "", want + ", not an object whose name is " + kind(obj.Name)
	}
	if s, _, err := stringField(raw); err == nil && s != "" {
		return s, path, ""
	}
	return "", "", want + ", not " + kind(raw)
}

// kind names the JSON type of a present value, for error messages.
func kind(raw json.RawMessage) string {
	if string(raw) == `""` {
		return "an empty string"
	}
	return jsonscan.KindName(jsonscan.Kind(raw))
}

func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// stringField decodes a JSON string; ok is false when the field is absent
// or null.
func stringField(raw json.RawMessage) (s string, ok bool, err error) {
	if isAbsent(raw) {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", false, errors.New("must be a string")
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, err
	}
	return s, true, nil
}
