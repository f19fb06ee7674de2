package gerrit

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/payloads"
)

const (
	patchsetCreated = `{"uploader":{"name":"Jane Dev","email":"jane@example.org","username":"jane"},"patchSet":{"number":3,"revision":"4b1c7f0a9d8e","ref":"refs/changes/45/12345/3","createdOn":1491562800,"kind":"REWORK"},"change":{"project":"openstack/nova","branch":"master","id":"I0f3c9a1e","number":12345,"subject":"Fix the scheduler","url":"https://review.example.org/12345","status":"NEW"},"project":"openstack/nova","refName":"refs/heads/master","type":"patchset-created","eventCreatedOn":1491562801}`
	// Gerrit 2.x comment-added events have no top-level project.
	commentAdded = `{"type":"comment-added","change":{"project":"openstack/octavia","branch":"master","number":"456"},"author":{"username":"zuul"},"approvals":[{"type":"Verified","value":"1"}],"comment":"Build succeeded."}`
	refUpdated   = `{"submitter":{"username":"jane"},"refUpdate":{"oldRev":"0000","newRev":"4b1c","refName":"refs/tags/1.0.0","project":"openstack/nova"},"type":"ref-updated","eventCreatedOn":1491562900}`
)

func TestParseEvent(t *testing.T) {
	tests := []struct {
		in                  string
		typ, project, field string
		errField, errSubstr string
	}{
		{in: patchsetCreated, typ: "patchset-created", project: "openstack/nova", field: FieldProject},
		{in: commentAdded, typ: "comment-added", project: "openstack/octavia", field: FieldChangeProject},
		{in: refUpdated, typ: "ref-updated", project: "openstack/nova", field: FieldRefUpdateProject},
		{in: `{"type":"x","project":"","change":{"project":"a/b"}}`, typ: "x", project: "a/b", field: FieldChangeProject},
		{in: `{"type":"x","project":null,"change":null,"refUpdate":{"project":"c"}}`, typ: "x", project: "c", field: FieldRefUpdateProject},
		{in: `{"type":"some-plugin-event","project":"p"}`, typ: "some-plugin-event", project: "p", field: FieldProject},
		{in: "  \t" + patchsetCreated + "\r\n", typ: "patchset-created", project: "openstack/nova", field: FieldProject},
		// A project that is not a string gives way to change.project.
		{in: `{"type":"x","project":{"id":"a"},"change":{"project":"a/b"}}`, typ: "x", project: "a/b", field: FieldChangeProject},
		{in: `{"type":"x","project":["p"],"change":{"project":"a/b"}}`, typ: "x", project: "a/b", field: FieldChangeProject},
		{in: `{"type":"x","project":7,"change":"p","refUpdate":{"project":"c"}}`, typ: "x", project: "c", field: FieldRefUpdateProject},
		{in: `{"type":"x","project":{"name":""},"change":{"project":{"name":"a/b"}}}`, typ: "x", project: "a/b", field: "change.project.name"},
		// ... and an object with a name is read as the project.
		{in: `{"type":"x","project":{"name":"openstack/nova"},"change":{"project":"a/b"}}`, typ: "x", project: "openstack/nova", field: "project.name"},
		{in: `{"type":"ref-updated","project":{"name":"openstack/nova","id":"x"}}`, typ: "ref-updated", project: "openstack/nova", field: "project.name"},

		{in: `{"type":"dropped-output"}`, errField: "project", errSubstr: `"dropped-output" event names no project`},
		{in: `{"type":"project-created","projectName":"x"}`, errField: "project"},
		{in: `{"project":"p"}`, errField: "type", errSubstr: "missing"},
		{in: `{"type":"","project":"p"}`, errField: "type"},
		{in: `{"type":7,"project":"p"}`, errField: "type", errSubstr: "must be a string"},
		{in: `{"type":"x","project":["p"]}`, errField: "project", errSubstr: "must be a non-empty string or an object with a non-empty string \"name\", not an array"},
		{in: `{"type":"x","project":{"name":1},"change":{}}`, errField: "project", errSubstr: "not an object whose name is a number, and the \"x\" event names no project elsewhere"},
		{in: `{"type":"x","project":{}}`, errField: "project", errSubstr: "not an object without a name"},
		{in: `{"type":"x","project":"","change":"p"}`, errField: "project", errSubstr: "not an empty string"},
		{in: `{"type":"x","change":"p"}`, errField: "change", errSubstr: "must be a JSON object, not a string"},
		{in: `{"type":"x","change":{"project":1}}`, errField: "change.project", errSubstr: "not a number"},
		{in: `{"type":"x","change":{"project":false},"refUpdate":{"project":[]}}`, errField: "change.project", errSubstr: "not a boolean"},
		{in: `{"type":"x","change":{},"refUpdate":{}}`, errField: "project"},
		{in: `[1,2]`, errSubstr: "must be a JSON object, not array"},
		{in: `"text"`, errSubstr: "must be a JSON object, not string"},
		{in: `{"type":"x",`, errSubstr: "invalid JSON"},
		{in: `Permission denied (publickey).`, errSubstr: "invalid JSON"},
		{in: ``, errSubstr: "invalid JSON"},
	}
	for _, tt := range tests {
		ev, err := ParseEvent([]byte(tt.in))
		if tt.errSubstr != "" || tt.errField != "" {
			var e *payloads.FieldError
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: got %+v, %v; want a *payloads.FieldError", tt.in, ev, err)
				continue
			}
			if e.Field != tt.errField || !strings.Contains(e.Msg, tt.errSubstr) || e.Line != 1 {
				t.Errorf("%s: error %q (field %q, line %d); want field %q containing %q", tt.in, e.Msg, e.Field, e.Line, tt.errField, tt.errSubstr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if ev.Type != tt.typ || ev.Project != tt.project || ev.ProjectField != tt.field {
			t.Errorf("%s: got %q %q %q", tt.in, ev.Type, ev.Project, ev.ProjectField)
		}
		if string(ev.Raw) != strings.Trim(tt.in, " \t\r\n") {
			t.Errorf("%s: Raw changed: %s", tt.in, ev.Raw)
		}
	}
}

func TestParseBody(t *testing.T) {
	pretty, _ := json.MarshalIndent(json.RawMessage(patchsetCreated), "", "  ")
	tests := []struct {
		name  string
		body  string
		types []string
		lines []int
		// errLine is the line an error must name, 0 for success.
		errLine  int
		errField string
	}{
		{name: "one event", body: patchsetCreated, types: []string{"patchset-created"}, lines: []int{1}},
		{name: "one event, newline", body: patchsetCreated + "\n", types: []string{"patchset-created"}, lines: []int{1}},
		{name: "pretty-printed", body: "\n" + string(pretty), types: []string{"patchset-created"}, lines: []int{2}},
		{name: "ndjson", body: patchsetCreated + "\n" + commentAdded + "\r\n\n  \n" + refUpdated,
			types: []string{"patchset-created", "comment-added", "ref-updated"}, lines: []int{1, 2, 5}},
		{name: "bad line names it", body: patchsetCreated + "\n\n" + `{"type":"dropped-output"}` + "\n" + refUpdated, errLine: 3, errField: "project"},
		{name: "garbage line", body: patchsetCreated + "\nnot json\n", errLine: 2},
		{name: "empty", body: " \n\t", errLine: 1},
		{name: "two values on one line", body: patchsetCreated + " " + refUpdated, errLine: 1},
	}
	for _, tt := range tests {
		events, err := Parse([]byte(tt.body), 0)
		if tt.errLine != 0 {
			var e *payloads.FieldError
			if !errors.As(err, &e) || e.Line != tt.errLine || e.Field != tt.errField || events != nil {
				t.Errorf("%s: got %d events, %v; want an error at line %d field %q", tt.name, len(events), err, tt.errLine, tt.errField)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var types []string
		var lines []int
		for _, ev := range events {
			types = append(types, ev.Type)
			lines = append(lines, ev.Line)
			if !json.Valid(ev.Raw) || !bytes.Contains([]byte(tt.body), ev.Raw) {
				t.Errorf("%s: Raw is not the event as received: %s", tt.name, ev.Raw)
			}
		}
		if strings.Join(types, ",") != strings.Join(tt.types, ",") || !equalInts(lines, tt.lines) {
			t.Errorf("%s: types %v lines %v; want %v %v", tt.name, types, lines, tt.types, tt.lines)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzParse checks that Parse never panics, that what it accepts is what a
// topic needs, that every event is a verbatim piece of the body, and that an
// NDJSON body is accepted exactly when each of its lines is.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		patchsetCreated, commentAdded, refUpdated,
		patchsetCreated + "\n" + commentAdded + "\n",
		`{"type":"dropped-output"}`, `{"type":"x","change":{"project":"a"}}`,
		"{\"type\":\"x\",\n\"project\":\"p\"}", "\n\n", "[]", `{"type":"x","project":"a/b/+/#"}`,
		`{"type":"x","project":{"name":"a/b"},"change":7}`, `{"type":"x","project":[1],"refUpdate":{"project":"r"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := Parse(body, 0)
		if err != nil {
			var e *payloads.FieldError
			if !errors.As(err, &e) || e.Line < 1 || events != nil {
				t.Fatalf("bad error %v (%d events)", err, len(events))
			}
			return
		}
		if len(events) == 0 {
			t.Fatal("accepted a body with no event")
		}
		prev := -1
		for _, ev := range events {
			if ev.Type == "" || ev.Project == "" || ev.Line <= prev {
				t.Fatalf("accepted %+v", ev)
			}
			prev = ev.Line
			if !json.Valid(ev.Raw) || !bytes.Contains(body, ev.Raw) {
				t.Fatalf("Raw %q is not valid JSON taken from the body", ev.Raw)
			}
			again, err := ParseEvent(ev.Raw)
			if err != nil || again.Type != ev.Type || again.Project != ev.Project {
				t.Fatalf("event %q does not parse alone: %v", ev.Raw, err)
			}
		}
	})
}

// TestParseCostsWhatTheEventsAre: a body of newlines around two events
// costs two events, not one per newline (before: an Event of 80 bytes was
// reserved for every newline, 640 MB for an 8 MiB body).
func TestParseCostsWhatTheEventsAre(t *testing.T) {
	event := `{"type":"x","project":"p"}`
	body := []byte(event + strings.Repeat("\n", 1<<20) + event)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	events, err := Parse(body, 0)
	runtime.ReadMemStats(&after)
	if err != nil || len(events) != 2 {
		t.Fatalf("%d events, %v", len(events), err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Fatalf("parsing two events among 1 MiB of newlines allocated %d KiB", grew>>10)
	}
	if _, err := Parse([]byte(event+"\n"+event+"\n"+event), 2); !errors.Is(err, ErrTooMany) {
		t.Fatalf("3 events, at most 2: %v", err)
	}
}
