package broker

import (
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/listenaddr"
	"github.com/opsfirehose/firehose/internal/mqttlisteners"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
)

// Listener types.
const (
	ListenerTCP       = mqttlisteners.TCP
	ListenerWebSocket = mqttlisteners.WebSocket
)

// Broker modes.
const (
	ModeEmbedded = "embedded"
	ModeExternal = "external"
)

// Config is the `broker:` section, shared by the bridge and cmd/broker.
type Config struct {
	// Mode is embedded (the default: mochi in the bridge's process) or
	// external (the bridge publishes to, and routes from, another broker
	// such as mosquitto or EMQX; the settings below then do not apply).
	Mode string `yaml:"mode"`
	// External is the external broker, for mode external.
	External *External `yaml:"external"`
	// Listeners are the network listeners. Absent means the defaults (MQTT on
	// :1883, MQTT over WebSocket on :8083); an empty list means none, which
	// leaves only the bridge's own inline client.
	Listeners []ListenerConfig `yaml:"listeners"`
	// AllowAnonymous lets clients without credentials connect, read-only.
	AllowAnonymous bool `yaml:"allow_anonymous"`
	// Users may publish inside their ACLs.
	Users []credentials.User `yaml:"users"`
	// UsersFile is a YAML file with a `users:` list of the same shape, merged with Users.
	UsersFile string `yaml:"users_file"`
	// Persistence keeps retained messages (and optionally sessions) across restarts.
	Persistence Persistence `yaml:"persistence"`
	// MaxQueuedMessages bounds each subscriber's outbound queue. When a
	// subscriber is too slow and its queue is full, further messages to it are
	// dropped and counted (firehose_broker_messages_dropped_total).
	MaxQueuedMessages int `yaml:"max_queued_messages"`
	// MaxInflight bounds unacknowledged QoS 1/2 messages per client.
	MaxInflight int `yaml:"max_inflight"`
	// ClientBuffer sizes each client's read and write buffers. Larger
	// buffers mean fewer system calls for busy clients, at this much memory
	// per connection, twice.
	ClientBuffer bytesize.Size `yaml:"client_buffer"`
	// MaxPacketSize is the largest MQTT packet a client may send, announced
	// to MQTT 5 clients in CONNACK. A client that sends a bigger one is
	// disconnected (MQTT 5: DISCONNECT "packet too large"). 0 means no limit,
	// which is mosquitto's default; packets still cost only the bytes that
	// have arrived.
	MaxPacketSize bytesize.Size `yaml:"max_packet_size"`
	// MaxTopicAlias is the Topic Alias Maximum announced to MQTT 5 clients:
	// how many topic aliases each may set. 0 disables client topic aliases.
	MaxTopicAlias int `yaml:"max_topic_alias"`
	// ConnectTimeout bounds the time a new connection has to complete its
	// TLS or WebSocket handshake and send its CONNECT packet.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxConnectSize is the largest CONNECT packet accepted (client id,
	// credentials and will); a connection announcing a bigger one is closed
	// before anything is allocated for it.
	MaxConnectSize bytesize.Size `yaml:"max_connect_size"`
	// Login throttles password guessing.
	Login Login `yaml:"login"`
	// SysInterval is how often $SYS topics are refreshed.
	SysInterval time.Duration `yaml:"sys_interval"`
	// MaxMessageExpiry forcibly expires retained and queued messages older
	// than this; 0 keeps them until replaced, as mosquitto does. (mochi's own
	// default of 24h would silently delete every node's retained status a day
	// after its last run.) MQTT 5 publishers can still set their own expiry.
	MaxMessageExpiry time.Duration `yaml:"max_message_expiry"`
	// MaxSessionExpiry bounds how long the broker keeps the session (and
	// queued QoS 1 messages) of a disconnected client that asked to keep it.
	MaxSessionExpiry time.Duration `yaml:"max_session_expiry"`
}

// ListenerConfig is one network listener.
type ListenerConfig struct {
	// Name identifies the listener in logs and metrics; it defaults to the type and port.
	Name string `yaml:"name"`
	// Type is "tcp" (MQTT) or "websocket" (MQTT over WebSocket, any path).
	Type string `yaml:"type"`
	// Address is host:port; ":1883" listens on every interface.
	Address string `yaml:"address"`
	// TLS, when set, serves MQTT over TLS (mqtts://) or WebSocket over TLS (wss://).
	TLS *tlsconfig.Files `yaml:"tls"`
}

// Login throttles failed logins. After MaxFailures failures in a row from
// one source address, or for one username, further attempts from it (or
// for it) are refused without a password check for Backoff, doubling with
// each further failure up to MaxBackoff; a successful login clears the
// count. BcryptConcurrency bounds the password checks that run at once.
type Login struct {
	MaxFailures       int           `yaml:"max_failures"`
	Backoff           time.Duration `yaml:"backoff"`
	MaxBackoff        time.Duration `yaml:"max_backoff"`
	BcryptConcurrency int           `yaml:"bcrypt_concurrency"`
}

// External is the connection to an external broker.
type External struct {
	// URL is tcp://, ssl://, ws:// or wss://host:port.
	URL string `yaml:"url"`
	// ClientID is this bridge's own, stable across restarts and unique among
	// bridges; "-pub" and "-router" are appended for its two connections.
	ClientID string            `yaml:"client_id"`
	Username string            `yaml:"username"`
	Password string            `yaml:"password" secret:"true"`
	TLS      *tlsconfig.Client `yaml:"tls"`
	// ShareGroup names the shared subscription ($share/<group>/<filter>)
	// through which N bridges route each message once.
	ShareGroup string `yaml:"share_group"`
	// MaxReconnectInterval bounds the back-off between reconnects.
	MaxReconnectInterval time.Duration `yaml:"max_reconnect_interval"`
	// ConfirmTimeout bounds the wait for the broker's PUBACK.
	ConfirmTimeout time.Duration `yaml:"confirm_timeout"`
}

// SetDefaults gives the external broker its defaults.
func (e *External) SetDefaults() {
	host, _ := os.Hostname()
	e.ClientID = "firehose-" + host
	e.ShareGroup = "firehose"
	e.MaxReconnectInterval = 30 * time.Second
	e.ConfirmTimeout = 5 * time.Second
}

// Validate checks the external broker settings.
func (e *External) Validate() error {
	var p strictyaml.Problems
	if e.URL == "" {
		p.Add("url", "required, e.g. tcp://mosquitto:1883")
	}
	if e.ClientID == "" {
		p.Add("client_id", "required")
	}
	if e.ShareGroup == "" || strings.ContainsAny(e.ShareGroup, "/+#") {
		p.Add("share_group", "%q: must be non-empty, without '/', '+' or '#'", e.ShareGroup)
	}
	if e.ConfirmTimeout <= 0 {
		p.Add("confirm_timeout", "must be positive")
	}
	return p.Err()
}

// Persistence configures on-disk state.
type Persistence struct {
	// Path is the directory of the broker's stores: retained messages in
	// <path>/retained, sessions in <path>/sessions. Empty keeps them in
	// memory only; the bridge fills it with its data_dir unless Memory is
	// set.
	Path string `yaml:"path"`
	// Memory keeps retained messages in memory only, lost at a restart: the
	// bridge then leaves Path empty instead of using its data_dir.
	Memory bool `yaml:"memory"`
	// Sessions also persists client sessions, subscriptions and in-flight QoS
	// messages, so persistent sessions survive a restart. It costs a write per
	// QoS 1 delivery, so it is off by default; retained messages are always kept.
	Sessions bool `yaml:"sessions"`
}

// DefaultConfig returns the broker's built-in defaults.
func DefaultConfig() Config {
	var listeners []ListenerConfig
	for _, l := range mqttlisteners.Defaults() {
		listeners = append(listeners, ListenerConfig{Name: l.Name, Type: l.Type, Address: l.Address})
	}
	return Config{
		Listeners:         listeners,
		Mode:              ModeEmbedded,
		AllowAnonymous:    true,
		MaxQueuedMessages: 8192,
		MaxInflight:       8192,
		ClientBuffer:      16 * bytesize.KiB,
		MaxPacketSize:     bytesize.MiB,
		MaxTopicAlias:     10,
		ConnectTimeout:    5 * time.Second,
		MaxConnectSize:    16 * bytesize.KiB,
		Login: Login{
			MaxFailures:       5,
			Backoff:           time.Second,
			MaxBackoff:        time.Minute,
			BcryptConcurrency: 1,
		},
		SysInterval:      10 * time.Second,
		MaxSessionExpiry: 24 * time.Hour,
	}
}

// SetDefaults gives a listener listed in the config its default type.
func (l *ListenerConfig) SetDefaults() {
	l.Type = ListenerTCP
}

// Validate checks one listener.
func (l *ListenerConfig) Validate() error {
	var p strictyaml.Problems
	if l.Type != ListenerTCP && l.Type != ListenerWebSocket {
		p.Add("type", "%q is not a listener type; use tcp or websocket (TLS is a tls: section on either)", l.Type)
	}
	if err := listenaddr.Check(l.Address, ":1883 or 127.0.0.1:1883"); err != nil {
		p.Add("address", "%v", err)
	}
	return p.Err()
}

// Validate checks the whole section. Listener names get their defaults here,
// because they derive from the address.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	switch c.Mode {
	case ModeEmbedded:
	case ModeExternal:
		if c.External == nil {
			p.Add("external", "required when mode is external")
		}
	default:
		p.Add("mode", "%q: use embedded or external", c.Mode)
	}
	names := map[string]int{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Name == "" {
			l.Name = defaultListenerName(*l)
		}
		if j, dup := names[l.Name]; dup {
			p.Add(fmt.Sprintf("listeners[%d].name", i), "%q is already used by listeners[%d]; give each listener its own name", l.Name, j)
		}
		names[l.Name] = i
	}
	seen := map[string]int{}
	for i, u := range c.Users {
		if j, dup := seen[u.Username]; dup && u.Username != "" {
			p.Add(fmt.Sprintf("users[%d].username", i), "%q is already defined by users[%d]", u.Username, j)
		}
		seen[u.Username] = i
	}
	if c.MaxQueuedMessages < 1 {
		p.Add("max_queued_messages", "must be at least 1")
	}
	if c.MaxInflight < 1 || c.MaxInflight > 65535 {
		p.Add("max_inflight", "must be between 1 and 65535")
	}
	if c.ClientBuffer < 512 || c.ClientBuffer > 16*bytesize.MiB {
		p.Add("client_buffer", "must be between 512B and 16MiB")
	}
	if c.MaxPacketSize != 0 && (c.MaxPacketSize < 64 || c.MaxPacketSize > maxMQTTPacket) {
		p.Add("max_packet_size", "must be 0 (no limit) or between 64B and 256MiB")
	}
	if c.MaxTopicAlias < 0 || c.MaxTopicAlias > 65535 {
		p.Add("max_topic_alias", "must be between 0 and 65535")
	}
	if c.ConnectTimeout < 100*time.Millisecond || c.ConnectTimeout > 5*time.Minute {
		p.Add("connect_timeout", "must be between 100ms and 5m")
	}
	if c.MaxConnectSize < 64 || c.MaxConnectSize > maxMQTTPacket {
		p.Add("max_connect_size", "must be between 64B and 256MiB")
	}
	if c.Login.MaxFailures < 1 {
		p.Add("login.max_failures", "must be at least 1")
	}
	if c.Login.Backoff <= 0 {
		p.Add("login.backoff", "must be positive")
	}
	if c.Login.MaxBackoff < c.Login.Backoff {
		p.Add("login.max_backoff", "must be at least login.backoff (%s)", c.Login.Backoff)
	}
	if c.Login.BcryptConcurrency < 1 {
		p.Add("login.bcrypt_concurrency", "must be at least 1")
	}
	if c.SysInterval < time.Second {
		p.Add("sys_interval", "must be at least 1s")
	}
	if c.MaxMessageExpiry < 0 {
		p.Add("max_message_expiry", "must not be negative; use 0 for no expiry")
	}
	if c.MaxSessionExpiry < 0 || c.MaxSessionExpiry.Seconds() > math.MaxUint32 {
		p.Add("max_session_expiry", "must be between 0 and 136 years")
	}
	return p.Err()
}

// maxMQTTPacket is the largest packet MQTT's length encoding allows: 256MiB,
// less one byte, plus the fixed header.
const maxMQTTPacket = 256 * bytesize.MiB

func defaultListenerName(l ListenerConfig) string {
	_, port, _ := net.SplitHostPort(l.Address)
	name := l.Type
	if l.Type == ListenerWebSocket {
		name = "ws"
	}
	if l.TLS != nil {
		name += "s"
	}
	return name + "-" + strings.TrimPrefix(port, ":")
}
