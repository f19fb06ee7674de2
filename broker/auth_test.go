package broker

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/internal/credentials"
)

func hash(t testing.TB, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func newTestAuthHook(t *testing.T, allowAnonymous bool, users []credentials.User) (*authHook, *mqtt.Server) {
	t.Helper()
	server := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := newAuthHook(zerolog.Nop(), newMetrics(), newAccessPolicy(allowAnonymous, users), DefaultConfig())
	h.server = server
	return h, server
}

func TestAuthenticate(t *testing.T) {
	users := []credentials.User{
		{Username: "ansible", PasswordHash: hash(t, "s3cret"), Publish: []string{"ansible/#"}},
		{Username: "ops", PasswordHash: hash(t, "pw"), Publish: []string{"ops/+/alerts"}, Subscribe: []string{"chef/#"}},
	}
	tests := []struct {
		name           string
		allowAnonymous bool
		username       string
		password       string
		want           bool
	}{
		{"anonymous allowed", true, "", "", true},
		{"anonymous refused when disabled", false, "", "", false},
		{"user with right password", true, "ansible", "s3cret", true},
		{"user with right password, anonymous disabled", false, "ansible", "s3cret", true},
		{"user with wrong password", true, "ansible", "nope", false},
		{"user with empty password", true, "ansible", "", false},
		{"unknown user", true, "mallory", "s3cret", false},
		{"password without username", true, "", "s3cret", false},
		{"username is case-sensitive", true, "Ansible", "s3cret", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, server := newTestAuthHook(t, tt.allowAnonymous, users)
			cl := server.NewClient(nil, "t", "client-1", false)
			pk := packets.Packet{Connect: packets.ConnectParams{
				Username: []byte(tt.username), UsernameFlag: tt.username != "",
				Password: []byte(tt.password), PasswordFlag: tt.password != "",
			}}
			// A second attempt takes the cached path and must agree.
			for range 2 {
				err := h.OnConnect(cl, pk)
				if got := err == nil && h.OnConnectAuthenticate(cl, pk); got != tt.want {
					t.Fatalf("admitted = %v (%v), want %v", got, err, tt.want)
				}
			}
		})
	}
}

func TestACL(t *testing.T) {
	users := []credentials.User{
		{Username: "ansible", PasswordHash: hash(t, "x"), Publish: []string{"ansible/#"}},
		{Username: "ops", PasswordHash: hash(t, "x"), Publish: []string{"ops/+/alerts"}, Subscribe: []string{"chef/#", "$SYS/#"}},
		{Username: "reader", PasswordHash: hash(t, "x")},
		{Username: "admin", PasswordHash: hash(t, "x"), Publish: []string{"#"}},
	}
	tests := []struct {
		username string
		topic    string
		write    bool
		want     bool
	}{
		// Anonymous: read anything, write nothing.
		{"", "chef/acme/web1/run/start", false, true},
		{"", "#", false, true},
		{"", "$SYS/#", false, true},
		{"", "$SYS/broker/uptime", false, true},
		{"", "chef/acme/web1/run/start", true, false},
		{"", "test", true, false},
		// Publish ACL.
		{"ansible", "ansible/playbook/1/action/start", true, true},
		{"ansible", "ansible", true, true},
		{"ansible", "chef/acme/web1/status", true, false},
		{"ansible", "ansiblex/y", true, false},
		{"ops", "ops/web/alerts", true, true},
		{"ops", "ops/web/db/alerts", true, false},
		{"ops", "ops/web/alerts/x", true, false},
		{"reader", "anything", true, false},
		// Subscribe ACL: absent means everything.
		{"ansible", "#", false, true},
		{"reader", "$SYS/broker/uptime", false, true},
		// Subscribe ACL as filters: allowed when they overlap, and each delivery is then checked.
		{"ops", "chef/+/+/run/failure", false, true},
		{"ops", "#", false, true},
		{"ops", "+/acme/#", false, true},
		{"ops", "ansible/#", false, false},
		{"ops", "$SYS/broker/uptime", false, true},
		{"ops", "chef/acme/web1/status", false, true},
		{"ops", "ansible/playbook/1/action/start", false, false},
		{"ops", "$share/g/chef/#", false, true},
		{"ops", "$share/g/ansible/#", false, false},
		// Unknown username (a user removed after connecting): nothing is written.
		{"gone", "ansible/x", true, false},
		// $-topics: $SYS is the broker's; wildcards never match other $-topics.
		{"admin", "$SYS/x", true, false},
		{"admin", "$other/x", true, false},
		{"admin", "other/x", true, true},
	}
	h, server := newTestAuthHook(t, true, users)
	for _, tt := range tests {
		cl := server.NewClient(nil, "t", "c", false)
		cl.Properties.Username = []byte(tt.username)
		cl.Properties.ProtocolVersion = 5 // 3.1.1's publishes pass OnACLCheck: OnPacketRead decides them
		if got := h.OnACLCheck(cl, tt.topic, tt.write); got != tt.want {
			t.Errorf("user %q topic %q write=%v: got %v, want %v", tt.username, tt.topic, tt.write, got, tt.want)
		}
	}
}

// TestPublishDecisions: a denied MQTT 5 publish is refused (QoS 0 by
// ending the connection, QoS 1 and 2 by mochi's reason code after
// OnACLCheck); a denied MQTT 3.1.1 publish is marked Ignore by OnPacketRead
// and passes OnACLCheck, so that mochi acks and drops it, as mosquitto does.
func TestPublishDecisions(t *testing.T) {
	users := []credentials.User{{Username: "ansible", PasswordHash: hash(t, "x"), Publish: []string{"ansible/#"}}}
	h, server := newTestAuthHook(t, true, users)
	tests := []struct {
		username string
		version  byte
		qos      byte
		topic    string
		// what each hook says
		readRejected, aclAllows, dropped bool
	}{
		{"ansible", 5, 0, "ansible/x", false, true, false},
		{"ansible", 4, 1, "ansible/x", false, true, false},
		{"", 5, 0, "test", true, false, false},
		{"ansible", 5, 0, "chef/x", true, false, false},
		{"", 5, 1, "test", false, false, false},
		{"", 4, 0, "test", false, true, true},
		{"", 4, 1, "test", false, true, true},
		{"ansible", 4, 2, "chef/x", false, true, true},
	}
	for _, tt := range tests {
		cl := server.NewClient(nil, "t", "c", false)
		cl.Properties.Username = []byte(tt.username)
		cl.Properties.ProtocolVersion = tt.version
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: tt.qos}, TopicName: tt.topic}
		name := fmt.Sprintf("user %q v%d qos %d topic %q", tt.username, tt.version, tt.qos, tt.topic)
		read, err := h.OnPacketRead(cl, pk)
		if (err != nil) != tt.readRejected {
			t.Errorf("%s: OnPacketRead rejected=%v, want %v", name, err != nil, tt.readRejected)
		}
		if tt.readRejected {
			continue
		}
		if read.Ignore != tt.dropped {
			t.Errorf("%s: OnPacketRead marked Ignore=%v, want %v", name, read.Ignore, tt.dropped)
		}
		if got := h.OnACLCheck(cl, tt.topic, true); got != tt.aclAllows {
			t.Errorf("%s: OnACLCheck = %v, want %v", name, got, tt.aclAllows)
		}
	}
}

func TestReservedClientIDRefused(t *testing.T) {
	h, server := newTestAuthHook(t, true, nil)
	if err := h.OnConnect(server.NewClient(nil, "t", "my-client", false), packets.Packet{}); err != nil {
		t.Fatalf("ordinary client id refused: %v", err)
	}
	if err := h.OnConnect(server.NewClient(nil, "t", mqtt.InlineClientId, false), packets.Packet{}); err == nil {
		t.Fatal("client id \"inline\" accepted; it would take over the bridge's own publisher")
	}
}
