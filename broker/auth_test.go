package broker

import (
	"io"
	"log/slog"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
)

func hash(t testing.TB, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func newTestAuthHook(t *testing.T, allowAnonymous bool, users []User) (*authHook, *mqtt.Server) {
	t.Helper()
	server := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := newAuthHook(zerolog.Nop(), newMetrics(), newAccessPolicy(allowAnonymous, users))
	h.server = server
	return h, server
}

func TestAuthenticate(t *testing.T) {
	users := []User{
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
			if got := h.OnConnectAuthenticate(cl, pk); got != tt.want {
				t.Fatalf("OnConnectAuthenticate = %v, want %v", got, tt.want)
			}
			// A second attempt takes the cached path and must agree.
			if got := h.OnConnectAuthenticate(cl, pk); got != tt.want {
				t.Fatalf("second OnConnectAuthenticate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestACL(t *testing.T) {
	users := []User{
		{Username: "ansible", PasswordHash: hash(t, "x"), Publish: []string{"ansible/#"}},
		{Username: "ops", PasswordHash: hash(t, "x"), Publish: []string{"ops/+/alerts"}, Subscribe: []string{"chef/#", "$SYS/#"}},
		{Username: "reader", PasswordHash: hash(t, "x")},
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
	}
	h, server := newTestAuthHook(t, true, users)
	for _, tt := range tests {
		cl := server.NewClient(nil, "t", "c", false)
		cl.Properties.Username = []byte(tt.username)
		if got := h.OnACLCheck(cl, tt.topic, tt.write); got != tt.want {
			t.Errorf("user %q topic %q write=%v: got %v, want %v", tt.username, tt.topic, tt.write, got, tt.want)
		}
	}
}

func TestQoS0PublishOutsideACLIsRefused(t *testing.T) {
	users := []User{{Username: "ansible", PasswordHash: hash(t, "x"), Publish: []string{"ansible/#"}}}
	h, server := newTestAuthHook(t, true, users)
	tests := []struct {
		username string
		qos      byte
		topic    string
		rejected bool
	}{
		{"", 0, "test", true},
		{"ansible", 0, "ansible/x", false},
		{"ansible", 0, "chef/x", true},
		// QoS 1 is left to mochi, which answers with a reason code or a disconnect.
		{"", 1, "test", false},
	}
	for _, tt := range tests {
		cl := server.NewClient(nil, "t", "c", false)
		cl.Properties.Username = []byte(tt.username)
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: tt.qos}, TopicName: tt.topic}
		_, err := h.OnPacketRead(cl, pk)
		if got := err != nil; got != tt.rejected {
			t.Errorf("user %q qos %d topic %q: rejected=%v, want %v", tt.username, tt.qos, tt.topic, got, tt.rejected)
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
