package chef

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/jsonscan"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
	"github.com/opsfirehose/firehose/topics"
)

// FuzzMessages builds topics from arbitrary payloads, with validation off so
// that as much as possible gets through: every accepted body must give valid
// topic names under the prefix, with the node and org each in one level, and
// valid JSON for every payload the adapter writes itself.
func FuzzMessages(f *testing.F) {
	for _, c := range goldenCases(f) {
		// The big fixtures have golden tests; as seeds they would slow the
		// fuzzer to a crawl.
		if len(c.input) <= 16<<10 {
			f.Add(c.input)
		}
	}
	f.Add([]byte(`{"message_type":"run_converge","node_name":"n","organization_name":"a/b+#","run_id":"r","status":"failure",` +
		`"resources":[{"status":"updated","cookbook_name":"x/y"},{"status":"failed"},7,{"status":"updated","cookbook_name":"\u0000"}]}`))
	f.Add([]byte(`{"message_type":"run_converge","node_name":"n","organization_name":"o","run_id":"r","status":"success",` +
		`"node":{"normal":{"password":"p"}},"resources":[{"before":{"token":"t"}}],"node":{},"resources":7}`))
	f.Add([]byte(`{"message_type":"action","organization_name":null,"entity_type":"$SYS","task":"+","entity_name":"#"}`))
	f.Add([]byte(`{"profiles":[{"controls":[{"results":[{"status":"skipped"}]}]}],"node_name":"n","organization_name":"/"}`))

	plain := withValidationOff(DefaultConfig())
	plain.ResourceStatuses = resourceStatuses
	filtered := plain
	filtered.Attributes.AllowedAutomatic = []any{"fqdn", []any{"a", "b/c"}}
	filtered.Attributes.BlockedNormal = []any{"x"}
	filtered.Redact.Enabled, filtered.Redact.DropDelta = true, true
	handlers := []*Handler{newTestHandler(f, plain, nil), newTestHandler(f, filtered, nil)}

	f.Fuzz(func(t *testing.T, body []byte) {
		for hi, h := range handlers {
			msg, msgs, err := h.messages(body)
			if err != nil {
				continue
			}
			if len(msgs) == 0 {
				t.Fatal("accepted without a message")
			}
			for _, m := range msgs {
				checkMessage(t, m)
			}
			switch msg.Kind().String() {
			case "run_converge":
				last := msgs[len(msgs)-1]
				if !last.Retain || !strings.HasSuffix(last.Topic, "/status") {
					t.Fatalf("the status message is not last or not retained: %+v", last.Topic)
				}
				if hi == 0 && !strings.HasSuffix(msgs[0].Topic, "/failure") && !bytes.Equal(msgs[0].Payload, body) {
					t.Fatal("the run's body changed with no filter configured")
				}
				if hi == 0 && strings.HasSuffix(msgs[0].Topic, "/failure") {
					// A failed run gains the blame members, and nothing else changes.
					sameBut(t, body, msgs[0].Payload, chefpayload.FailedCookbookKey, chefpayload.OwnerKey)
				}
				if !json.Valid(msgs[0].Payload) {
					t.Fatalf("filtered body is not valid JSON: %q", msgs[0].Payload)
				}
				if hi == 1 {
					// Only the copy a decoder takes, the filtered one, is left.
					seen := map[string]bool{}
					for it := jsonscan.Members(msgs[0].Payload); it.Next(); {
						k := jsonscan.Key(it.Key())
						if (k == "node" || k == "resources") && seen[k] {
							t.Fatalf("the filtered body still has two %q members: %q", k, msgs[0].Payload)
						}
						seen[k] = true
					}
				}
				for _, m := range msgs[1:] {
					if !json.Valid(m.Payload) {
						t.Fatalf("%s: invalid JSON %q", m.Topic, m.Payload)
					}
				}
			case "inspec_report":
				// The report, with the summary appended.
				if len(msgs) != 1 {
					t.Fatalf("%d messages", len(msgs))
				}
				sameBut(t, body, msgs[0].Payload, chefpayload.SummaryKey)
			default:
				if len(msgs) != 1 || !bytes.Equal(msgs[0].Payload, body) {
					t.Fatalf("%d messages, payload changed", len(msgs))
				}
			}
		}
	})
}

func checkMessage(t *testing.T, m bus.Message) {
	t.Helper()
	if err := topics.ValidName(m.Topic); err != nil {
		t.Fatalf("invalid topic %q: %v", m.Topic, err)
	}
	levels := strings.Split(m.Topic, "/")
	if levels[0] != "chef" {
		t.Fatalf("topic %q outside the prefix", m.Topic)
	}
	// Fixed shapes: chef/org/node/run/x, chef/org/node/status,
	// chef/org/node/resource/cb/status, chef/org/action/t/task/name,
	// chef/org/node/liveness, chef/org/node/compliance/x.
	want := map[string]int{"run": 5, "status": 4, "resource": 6, "action": 6, "liveness": 4, "compliance": 5}
	word := levels[3]
	if levels[2] == "action" && len(levels) == 6 {
		word = "action"
	}
	if n, ok := want[word]; !ok || n != len(levels) {
		t.Fatalf("topic %q does not have the shape of a %s topic", m.Topic, word)
	}
	for _, l := range levels {
		if l == "" {
			t.Fatalf("empty level in %q", m.Topic)
		}
		if u, err := topics.Unescape(l); err != nil || (l != "_" && topics.Escape(u) != l) {
			t.Fatalf("level %q of %q does not round-trip: %v", l, m.Topic, err)
		}
	}
	if m.Headers[bus.HeaderMsgID] == "" || m.QoS != 1 {
		t.Fatalf("%s: headers %v", m.Topic, m.Headers)
	}
}

// sameBut checks that got is the object sent with the members named keys
// set (whatever sent had under those names), and nothing else changed.
func sameBut(t *testing.T, sent, got []byte, keys ...string) {
	t.Helper()
	var g, s map[string]json.RawMessage
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("published %q: %v", got, err)
	}
	for _, k := range keys {
		if g[k] == nil {
			t.Fatalf("published %q has no %s", got, k)
		}
		delete(g, k)
	}
	if json.Unmarshal(sent, &s) != nil {
		return // invalid UTF-8 or the like: decoders differ
	}
	for _, k := range keys {
		delete(s, k)
	}
	for k, v := range s {
		if !bytes.Equal(g[k], v) {
			t.Fatalf("member %q changed: %q, sent %q", k, g[k], v)
		}
	}
	if len(g) != len(s) {
		t.Fatalf("members added: %q", got)
	}
}
