package ansible

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/payloads"
)

const (
	startOK = `{"event_id":"e1","status":"OK","host":"ctl","session":"s","playbook_name":"all","playbook_id":"p1","ansible_type":"start"}`
	taskOK  = `{"status":"OK","host":"ctl","ansible_host":"web/01","session":"s","ansible_type":"task","playbook_name":"all","playbook_id":"p1","ansible_task":"TASK: ping","ansible_result":{"ping":"pong"}}`
	// Stats and finish events as the firehose schema has them: no ansible_type.
	statsOK  = `{"host":"ctl","ansible_host":"web01","playbook_id":"p1","playbook_name":"all","stats":{"ok":1,"failures":0,"unreachable":0,"changed":0,"skipped":0,"rescued":0,"ignored":0}}`
	finishOK = `{"playbook_id":"p1","playbook_name":"all","status":"FAILED"}`
)

// The stats and finish events with an explicit ansible_type.
var (
	statsTyped  = `{"ansible_type":"stats",` + statsOK[1:]
	finishTyped = `{"ansible_type":"finish",` + finishOK[1:]
)

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Event
	}{
		{"start", startOK, Event{Type: TypeStart, EventID: "e1", PlaybookID: "p1", Status: "OK"}},
		{"task", taskOK, Event{Type: TypeTask, PlaybookID: "p1", Status: "OK", AnsibleHost: "web/01"}},
		{"task skipped", strings.Replace(taskOK, `"OK"`, `"SKIPPED"`, 1), Event{Type: TypeTask, PlaybookID: "p1", Status: "SKIPPED", AnsibleHost: "web/01"}},
		{"stats", statsOK, Event{Type: TypeStats, PlaybookID: "p1", AnsibleHost: "web01"}},
		{"stats with the schema's five keys", strings.Replace(statsOK, `,"rescued":0,"ignored":0`, "", 1), Event{Type: TypeStats, PlaybookID: "p1", AnsibleHost: "web01"}},
		{"finish", finishOK, Event{Type: TypeFinish, PlaybookID: "p1", Status: "FAILED"}},
		{"stats typed", statsTyped, Event{Type: TypeStats, PlaybookID: "p1", AnsibleHost: "web01"}},
		{"finish typed", finishTyped, Event{Type: TypeFinish, PlaybookID: "p1", Status: "FAILED"}},
		{"null type is no type", `{"ansible_type":null,` + finishOK[1:], Event{Type: TypeFinish, PlaybookID: "p1", Status: "FAILED"}},
		{"unknown fields kept", `{"x":[1,{"y":null}],` + finishOK[1:], Event{Type: TypeFinish, PlaybookID: "p1", Status: "FAILED"}},
		{"empty playbook name", strings.Replace(finishOK, `"all"`, `""`, 1), Event{Type: TypeFinish, PlaybookID: "p1", Status: "FAILED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, in, field, msg string
	}{
		{"not JSON", `{"a":`, "", "malformed JSON"},
		{"trailing data", finishOK + `x`, "", "malformed JSON"},
		{"array", `[1]`, "", "must be a JSON object, got array"},
		{"string", `"x"`, "", "must be a JSON object, got string"},
		{"no type is a finish", `{"playbook_id":"p"}`, "playbook_name", `required (a string) (an event without ansible_type is read as a finish event: "stats" if it has stats or ansible_host, else "finish")`},
		{"no type with stats is stats", strings.Replace(statsOK, `"ansible_host":"web01",`, "", 1), "ansible_host", "read as a stats event"},
		{"no type with ansible_host is stats", strings.Replace(statsOK, `"stats":{`, `"x":{`, 1), "stats", "read as a stats event"},
		{"task without its type", strings.Replace(taskOK, `"ansible_type":"task",`, "", 1), "ansible_type", `required ("start" or "task") for an event with session`},
		{"start without its type", strings.Replace(startOK, `,"ansible_type":"start"`, "", 1), "ansible_type", `required ("start" or "task")`},
		{"empty object", `{}`, "playbook_id", "required"},
		{"unknown type", strings.Replace(finishTyped, `"finish"`, `"end"`, 1), "ansible_type", `"end" is not`},
		{"typed finish without status", strings.Replace(finishTyped, `,"status":"FAILED"`, "", 1), "status", `required: "OK" or "FAILED"`},
		{"type not a string", `{"ansible_type":1}`, "ansible_type", "must be a string, got number"},
		{"no playbook id", strings.Replace(finishOK, `"playbook_id":"p1",`, "", 1), "playbook_id", "required"},
		{"empty playbook id", strings.Replace(finishOK, `"p1"`, `""`, 1), "playbook_id", "non-empty"},
		{"no playbook name", strings.Replace(finishOK, `"playbook_name":"all",`, "", 1), "playbook_name", "required"},
		{"empty event id", strings.Replace(startOK, `"e1"`, `""`, 1), "event_id", "1 to 128 bytes"},
		{"long event id", strings.Replace(startOK, `"e1"`, `"`+strings.Repeat("e", 129)+`"`, 1), "event_id", "1 to 128 bytes"},
		{"start not OK", strings.Replace(startOK, `"OK"`, `"FAILED"`, 1), "status", `must be "OK", got "FAILED"`},
		{"start no session", strings.Replace(startOK, `"session":"s",`, "", 1), "session", "required"},
		{"start no host", strings.Replace(startOK, `"host":"ctl",`, "", 1), "host", "required"},
		{"task bad status", strings.Replace(taskOK, `"OK"`, `"ok"`, 1), "status", `must be "OK", "FAILED", "UNREACHABLE" or "SKIPPED", got "ok"`},
		{"task no status", strings.Replace(taskOK, `"status":"OK",`, "", 1), "status", `required: "OK", "FAILED"`},
		{"task no ansible_host", strings.Replace(taskOK, `"ansible_host":"web/01",`, "", 1), "ansible_host", "required"},
		{"task empty ansible_host", strings.Replace(taskOK, `"web/01"`, `""`, 1), "ansible_host", "non-empty"},
		{"task no task", strings.Replace(taskOK, `"ansible_task":"TASK: ping",`, "", 1), "ansible_task", "required"},
		{"task result a string", strings.Replace(taskOK, `{"ping":"pong"}`, `"{\"ping\":\"pong\"}"`, 1), "ansible_result", "must be a JSON object, got a string"},
		{"task result null", strings.Replace(taskOK, `{"ping":"pong"}`, `null`, 1), "ansible_result", "got null"},
		{"task no result", strings.Replace(taskOK, `,"ansible_result":{"ping":"pong"}`, ``, 1), "ansible_result", "got nothing"},
		{"task result array", strings.Replace(taskOK, `{"ping":"pong"}`, `[]`, 1), "ansible_result", "got an array"},
		{"stats missing", strings.Replace(statsTyped, `"stats":{`, `"x":{`, 1), "stats", "required"},
		{"stats not an object", strings.Replace(statsOK, `"stats":{`, `"stats":[],"x":{`, 1), "stats", "must be an object, got array"},
		{"stats counter missing", strings.Replace(statsOK, `"ok":1,`, "", 1), "stats.ok", "required"},
		{"stats counter a string", strings.Replace(statsOK, `"ok":1`, `"ok":"1"`, 1), "stats.ok", "must be an integer, got string"},
		{"stats counter a float", strings.Replace(statsOK, `"ok":1`, `"ok":1.5`, 1), "stats.ok", "must be an integer, got number 1.5"},
		{"stats counter negative", strings.Replace(statsOK, `"ignored":0`, `"ignored":-1`, 1), "stats.ignored", "negative"},
		{"stats no ansible_host", strings.Replace(statsOK, `"ansible_host":"web01",`, "", 1), "ansible_host", "required"},
		{"finish bad status", strings.Replace(finishOK, `"FAILED"`, `"UNREACHABLE"`, 1), "status", `must be "OK" or "FAILED"`},
		{"long bad value is cut", strings.Replace(finishOK, `"FAILED"`, `"`+strings.Repeat("x", 1000)+`"`, 1), "status", `got "` + strings.Repeat("x", 64) + `"...`},
		{"long bad number is cut", strings.Replace(statsOK, `"ok":1`, `"ok":1`+strings.Repeat("0", 1000), 1), "stats.ok", "got number 1" + strings.Repeat("0", 56) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			var fe *payloads.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FieldError", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("got field %q msg %q, want field %q msg containing %q", fe.Field, fe.Msg, tc.field, tc.msg)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, that a valid event always has
// what its topic needs, that an error always says what is wrong, and that
// WithoutEventID removes exactly the members encoding/json reads as
// event_id.
func FuzzParse(f *testing.F) {
	for _, s := range []string{startOK, taskOK, statsOK, finishOK, statsTyped, finishTyped, `{}`, `[]`, `null`, `{"ansible_type":"task","ansible_result":"x"}`,
		`{"Status":"OK","status":"FAILED","playbook_id":"p","playbook_name":""}`,
		`{"status":"OK","STATUS":"FAILED","playbook_id":"p","playbook_name":""}`,
		`{"st\u0061tus":"FAILED","playbook_id":"p\u002Fq","playbook_name":"\ud800"}`,
		"{\"ſtatus\":\"FAILED\",\"playbook_id\":\"\xff\",\"playbook_name\":null,\"playbook_name\":\"x\"}",
		`{"ansible_type":1}`, ` {"playbook_id":"p","playbook_name":"n","status":"OK","a":[{"}":"]"}]} `,
		`{"playbook_id":"p","EVENT_ID":"x","playbook_name":"n","status":"OK","event\u005fid":"y"}`,
		` { "event_id" : "e" , "playbook_id":"p","playbook_name":"n","status":"OK" , "Event_ID":"f" } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := Parse(data)
		// The fast path must agree with encoding/json exactly.
		slowEv, slowErr := parseSlow(data)
		if ev != slowEv || fmt.Sprint(err) != fmt.Sprint(slowErr) {
			t.Fatalf("Parse: %+v, %v\nencoding/json: %+v, %v", ev, err, slowEv, slowErr)
		}
		checkWithoutEventID(t, data, ev, err)
		// The payload found while parsing is WithoutEventID's.
		ev3, body, err3 := ParsePayload(data)
		if ev3 != ev || fmt.Sprint(err3) != fmt.Sprint(err) || (err == nil) != (body != nil) ||
			(err == nil && string(body) != string(WithoutEventID(data))) {
			t.Fatalf("ParsePayload: %+v, %q, %v; Parse: %+v, %v; WithoutEventID: %q", ev3, body, err3, ev, err, WithoutEventID(data))
		}
		// And Split with ParseValid must see an array as encoding/json does.
		if !json.Valid(data) {
			return
		}
		elems, serr := Split(append(append([]byte("[ "), data...), " ,{}]"...), 0)
		if serr != nil || len(elems) != 2 || string(elems[1]) != "{}" {
			t.Fatalf("Split of [data, {}]: %q, %v", elems, serr)
		}
		if ev2, err2 := ParseValid(elems[0]); ev2 != ev || fmt.Sprint(err2) != fmt.Sprint(err) {
			t.Fatalf("ParseValid of the element: %+v, %v; Parse: %+v, %v", ev2, err2, ev, err)
		}
		if ev2, body2, err2 := ParseValidPayload(elems[0]); ev2 != ev || fmt.Sprint(err2) != fmt.Sprint(err) ||
			(err == nil && string(body2) != string(WithoutEventID(elems[0]))) {
			t.Fatalf("ParseValidPayload of the element: %+v, %q, %v; ParsePayload: %+v, %v", ev2, body2, err2, ev, err)
		}
		if err != nil {
			var fe *payloads.FieldError
			if !errors.As(err, &fe) || fe.Msg == "" {
				t.Fatalf("error %v is not a FieldError with a message", err)
			}
			if len(fe.Error()) > 300 {
				t.Fatalf("error of %d bytes repeats too much of the input: %.100s", len(fe.Error()), fe.Error())
			}
			return
		}
		if ev.PlaybookID == "" {
			t.Fatal("valid event without playbook_id")
		}
		switch ev.Type {
		case TypeStart:
			if ev.Status != StatusOK {
				t.Fatalf("start with status %q", ev.Status)
			}
		case TypeTask, TypeStats:
			if ev.AnsibleHost == "" {
				t.Fatal("task or stats without ansible_host")
			}
		case TypeFinish:
			if ev.Status != StatusOK && ev.Status != StatusFailed {
				t.Fatalf("finish with status %q", ev.Status)
			}
		default:
			t.Fatalf("valid event of type %q", ev.Type)
		}
	})
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{`[]`, nil, ""},
		{" [ 1 , \"a,b\\\"]\" ,\n{\"x\":\"]}\",\"y\":[[],{}]}, null ] ", []string{`1`, `"a,b\"]"`, `{"x":"]}","y":[[],{}]}`, `null`}, ""},
		{`[1,]`, nil, "malformed JSON array of events"},
		{`{}`, nil, "not a JSON array"},
		{`[1,2,3]`, []string{"1", "2", "3"}, ""},
	} {
		got, err := Split([]byte(tc.in), 0)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s: got %q %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestSplitStopsAtMax(t *testing.T) {
	if got, err := Split([]byte(`[1, 2, 3]`), 3); err != nil || len(got) != 3 {
		t.Fatalf("3 of at most 3: %q %v", got, err)
	}
	if got, err := Split([]byte(`[1, 2, 3, 4]`), 3); !errors.Is(err, ErrTooMany) || got != nil {
		t.Fatalf("4 of at most 3: %q %v", got, err)
	}
}

func TestWithoutEventID(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"first", startOK, `{"status":"OK","host":"ctl","session":"s","playbook_name":"all","playbook_id":"p1","ansible_type":"start"}`},
		{"middle, with spaces", `{ "a" : 1 ,  "event_id" : "e" , "b":[2] }`, `{ "a" : 1 ,  "b":[2] }`},
		{"last", `{"a":1, "event_id":"e"}`, `{"a":1}`},
		{"only", ` { "event_id":"e" } `, ` {  } `},
		{"none", finishOK, finishOK},
		{"nested ones stay", `{"event_id":"e","r":{"event_id":"x"},"l":["event_id"]}`, `{"r":{"event_id":"x"},"l":["event_id"]}`},
		{"every variant encoding/json reads", `{"EVENT_ID":1,"a":"event_id","event\u005Fid":2,"b":{},"Event_Id":null}`, `{"a":"event_id","b":{}}`},
		{"several in a row", `{"a":1,"event_id":1,"event_id":2,"event_id":3}`, `{"a":1}`},
		{"several, nothing else", `{"event_id":1,"event_id":2}`, `{}`},
		{"similar keys stay", `{"event_ids":1,"event-id":2,"xevent_id":3,"event_\u0131d":4}`, `{"event_ids":1,"event-id":2,"xevent_id":3,"event_\u0131d":4}`},
		{"not an object", `["event_id"]`, `["event_id"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			got := WithoutEventID(in)
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			// As an event, the same payload comes from parsing.
			ev := []byte(strings.Replace(tc.in, "{", `{"playbook_id":"p","playbook_name":"n","status":"OK",`, 1))
			if _, body, err := ParsePayload(ev); err == nil && string(body) != string(WithoutEventID(ev)) {
				t.Fatalf("ParsePayload: %s, want %s", body, WithoutEventID(ev))
			}
			if string(in) != tc.in {
				t.Fatalf("the input was modified: %s", in)
			}
		})
	}
}

// checkWithoutEventID checks WithoutEventID against encoding/json: the
// members left are exactly the others, and the event parses as before,
// without its event_id.
func checkWithoutEventID(t *testing.T, data []byte, ev Event, err error) {
	t.Helper()
	orig := string(data)
	out := WithoutEventID(data)
	if string(data) != orig {
		t.Fatalf("WithoutEventID modified its input")
	}
	if !json.Valid(data) {
		return // only checked not to panic
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil || members == nil {
		if string(out) != orig {
			t.Fatalf("WithoutEventID changed a non-object: %q -> %q", data, out)
		}
		return
	}
	var w struct {
		EventID json.RawMessage `json:"event_id"`
	}
	for k := range members {
		if strings.EqualFold(k, "event_id") {
			delete(members, k)
		}
	}
	var got map[string]json.RawMessage
	if e := json.Unmarshal(out, &got); e != nil || json.Unmarshal(out, &w) != nil || w.EventID != nil {
		t.Fatalf("WithoutEventID(%q) = %q: %v, event_id %s", data, out, e, w.EventID)
	}
	if fmt.Sprint(got) != fmt.Sprint(members) {
		t.Fatalf("WithoutEventID(%q) = %q: members %v, want %v", data, out, got, members)
	}
	if err == nil {
		ev.EventID = ""
		if ev2, err2 := Parse(out); ev2 != ev || err2 != nil {
			t.Fatalf("Parse(WithoutEventID(%q)) = %+v, %v; want %+v", data, ev2, err2, ev)
		}
	}
}
