package app

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// TestAdaptersAreWiredWithTheirTokens: every adapter answers on its path,
// publishes on the bridge's broker, and a section's own tokens replace
// http.tokens for its endpoint only.
func TestAdaptersAreWiredWithTheirTokens(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTP.Tokens = []httpserver.Token{{Name: "shared", Token: "shared-secret"}}
	cfg.Gerrit.Tokens = []httpserver.Token{{Name: "relay", Token: "gerrit-secret"}}
	cfg.Launchpad.Enabled = false
	b := startBridge(t, cfg)
	sub := testkit.Connect(t, "tcp://"+b.Broker().Addr("mqtt"), testkit.ClientOptions{})
	msgs := sub.Subscribe("#", 1)

	gerritEvent, err := os.ReadFile("../adapters/gerrit/testdata/patchset_created/input.json")
	if err != nil {
		t.Fatal(err)
	}
	chefRunStart, err := os.ReadFile("../adapters/chef/testdata/01_run_start_chef12_ubuntu/input.json")
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, token, contentType string, body []byte) int {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+b.HTTPAddr()+path, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", contentType)
		if token != "" && strings.HasPrefix(path, "/data-collector/") {
			req.Header.Set("X-Data-Collector-Token", token) // chef-client's header; Chef takes no other
		} else if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		name, path, token string
		body              []byte
		want              int
		topic             string
	}{
		{"gerrit refuses http.tokens once it has its own", "/gerrit/v1/events", "shared-secret", gerritEvent, 403, ""},
		{"gerrit takes its own token", "/gerrit/v1/events", "gerrit-secret", gerritEvent, 200, "gerrit/openstack/nova/patchset-created"},
		{"chef takes http.tokens", "/data-collector/v0/", "shared-secret", chefRunStart, 200, "chef/chef/chefdk-ubuntu-16.04-tester-91bc78/run/start"},
		{"chef refuses gerrit's token", "/data-collector/v0", "gerrit-secret", chefRunStart, 403, ""},
		{"chef needs a token", "/data-collector/v0", "", chefRunStart, 401, ""},
		{"a disabled adapter is not served", "/launchpad/v1/events", "shared-secret", []byte("From: x\n\nbody"), 404, ""},
	} {
		if got := post(tt.path, tt.token, "application/json", tt.body); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
		if tt.topic != "" {
			if m := testkit.Next(t, msgs); m.Topic != tt.topic {
				t.Errorf("%s: published on %q, want %q", tt.name, m.Topic, tt.topic)
			}
		}
	}
	// Nothing else was published: the next message is this one.
	if err := b.Publisher().Publish(t.Context(), busMessage("end/marker")); err != nil {
		t.Fatal(err)
	}
	if m := testkit.Next(t, msgs); m.Topic != "end/marker" {
		t.Errorf("an extra message was published: %q", m.Topic)
	}
}
