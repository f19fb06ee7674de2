package ansible

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/testbus"
	payload "github.com/opsfirehose/firehose/payloads/ansible"
	"github.com/opsfirehose/firehose/topics"
)

// FuzzIntake posts arbitrary bodies through the whole handler, publishing to
// a real broker, and checks the intake's promises: never a 5xx for input,
// every answer JSON with an error for a refusal, and for an accepted body
// one message per event whose payload is the event's own bytes without
// event_id and whose
// topic is valid, under the prefix, and carries the event's ids unescaped
// back exactly.
func FuzzIntake(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*/input.json")
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `[]`, `[{}]`, `{}`, `null`, `[null]`, `"x"`, `[1,2`,
		`{"ansible_type":"task","status":"OK","host":"h","ansible_host":"a/b+c#d\u0000","session":"s","playbook_name":"","playbook_id":"+/#","ansible_task":"t","ansible_result":{}}`,
		`{"ansible_type":"stats","host":"h","ansible_host":"_","playbook_id":"$SYS","playbook_name":"n","stats":{"ok":0,"failures":0,"unreachable":0,"changed":0,"skipped":0}}`,
		`{"ansible_type":"finish","status":"OK","playbook_name":"n","playbook_id":"%2F","Status":"FAILED"}`,
	} {
		f.Add([]byte(s))
	}
	b := testbus.Start(f)
	h, err := New(DefaultConfig(), Options{Publisher: b, Logger: zerolog.Nop()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		var answer struct {
			Accepted *int   `json:"accepted"`
			Error    string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body.String())
		}
		if rec.Code != http.StatusOK {
			if rec.Code < 400 || rec.Code >= 500 || answer.Error == "" {
				t.Fatalf("refused with %d %q", rec.Code, rec.Body.String())
			}
			return
		}
		msgs, _, perr := h.messages(body)
		if perr != nil {
			t.Fatalf("ServeHTTP accepted what messages refuses: %s", perr.msg)
		}
		if answer.Accepted == nil || *answer.Accepted != len(msgs) {
			t.Fatalf("accepted %v, %d messages", answer.Accepted, len(msgs))
		}
		events := [][]byte{bytes.TrimSpace(body)}
		if events[0][0] == '[' {
			var err error
			if events, err = payload.Split(events[0], 0); err != nil {
				t.Fatal(err)
			}
		}
		for i, m := range msgs {
			if !json.Valid(m.Payload) || !bytes.Equal(m.Payload, payload.WithoutEventID(events[i])) {
				t.Fatalf("payload %q is not event %d of the body without its event_id", m.Payload, i)
			}
			var id struct {
				EventID json.RawMessage `json:"event_id"`
			}
			if err := json.Unmarshal(m.Payload, &id); err != nil || id.EventID != nil {
				t.Fatalf("payload %q has an event_id (%v)", m.Payload, err)
			}
			if err := topics.ValidName(m.Topic); err != nil {
				t.Fatalf("topic %q: %v", m.Topic, err)
			}
			ev, err := payload.Parse(m.Payload)
			if err != nil {
				t.Fatal(err)
			}
			levels := strings.Split(m.Topic, "/")
			if len(levels) < 4 || levels[0] != "ansible" || levels[1] != "playbook" {
				t.Fatalf("topic %q", m.Topic)
			}
			if id, err := topics.Unescape(levels[2]); err != nil || id != ev.PlaybookID {
				t.Fatalf("topic %q does not carry playbook_id %q", m.Topic, ev.PlaybookID)
			}
			want := map[string]int{payload.TypeStart: 5, payload.TypeFinish: 6, payload.TypeStats: 5, payload.TypeTask: 6}[ev.Type]
			if len(levels) != want {
				t.Fatalf("%s topic %q has %d levels", ev.Type, m.Topic, len(levels))
			}
			if ev.Type == payload.TypeTask || ev.Type == payload.TypeStats {
				if host, err := topics.Unescape(levels[4]); err != nil || host != ev.AnsibleHost {
					t.Fatalf("topic %q does not carry ansible_host %q", m.Topic, ev.AnsibleHost)
				}
			}
		}
	})
}
