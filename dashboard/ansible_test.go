package dashboard

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// A task's message is cut to maxMessageSize bytes at a character boundary, so
// a long non-ASCII message (Ansible relays whatever the module printed) still
// reaches the page as valid UTF-8 instead of ending in half a character.
func TestResultSummaryCutsLongMessagesAtCharacterBoundaries(t *testing.T) {
	long := "a" + strings.Repeat("é", maxMessageSize) // 2 bytes each after one: a cut at an even offset lands inside one
	raw, err := json.Marshal(map[string]any{"changed": true, "msg": long})
	if err != nil {
		t.Fatal(err)
	}
	changed, msg := resultSummary(raw, "FAILED")
	if !changed {
		t.Error("changed = false, want true")
	}
	if len(msg) > maxMessageSize || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "…") {
		t.Errorf("message of %d bytes, valid UTF-8 %v, ends %q: want at most %d bytes of valid UTF-8 ending in …",
			len(msg), utf8.ValidString(msg), msg[max(0, len(msg)-6):], maxMessageSize)
	}
	if _, short := resultSummary(json.RawMessage(`{"msg":"ok"}`), "OK"); short != "ok" {
		t.Errorf("short message = %q, want it whole", short)
	}
}
