package mqtt

import (
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
	"github.com/opsfirehose/firehose/sinks"
)

// Type is the sink type this package serves.
const Type = "mqtt"

// Limits of a PUBLISH packet.
const (
	// DefaultMaxPacketSize is the default max_packet_size.
	DefaultMaxPacketSize = bytesize.MiB
	// MaxPacket is the largest packet MQTT can describe: a remaining
	// length of 268,435,455 and 5 bytes of fixed header.
	MaxPacket = 268_435_455 + 5
)

// Config is a `sinks:` entry of type mqtt. Its keys are relative to the
// entry (sinks.<name>.url).
type Config struct {
	// URL of the external MQTT broker: tcp://, ssl://, ws:// or wss://.
	URL string `yaml:"url"`
	// ClientID is fixed, so the broker keeps the session across reconnects.
	ClientID string `yaml:"client_id"`
	// Username and Password authenticate.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true"`
	// TLS for the connection out.
	TLS *tlsconfig.Client `yaml:"tls"`
	// StoreDir keeps in-flight QoS 1 messages on disk across restarts;
	// empty means <data_dir>/mqtt/<name>.
	StoreDir string `yaml:"store_dir"`
	// MaxReconnectInterval bounds the back-off between reconnects.
	MaxReconnectInterval time.Duration `yaml:"max_reconnect_interval"`
	// ConfirmTimeout bounds the wait for a confirmation; a message not
	// confirmed in time goes to its route's outbox.
	ConfirmTimeout time.Duration `yaml:"confirm_timeout"`
	// MaxPacketSize is the largest MQTT packet the broker takes: MQTT 3.1.1
	// has no way to ask, and a broker disconnects a client that sends a
	// larger one, which would resend it forever. A message whose PUBLISH
	// packet is larger is refused before its sender's 2xx. Default 1MiB
	// (EMQX's default; mosquitto's is 256MiB, the protocol's maximum).
	MaxPacketSize bytesize.Size `yaml:"max_packet_size"`
}

// NewConfig is a config with its defaults.
func NewConfig() *Config {
	c := &Config{}
	c.SetDefaults()
	return c
}

// SetDefaults gives a sink its defaults.
func (c *Config) SetDefaults() {
	c.MaxReconnectInterval = 30 * time.Second
	c.ConfirmTimeout = 5 * time.Second
}

// Validate checks the sink; keys in its problems are relative to the entry.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if err := sinks.CheckURL(c.URL, "tcp", "ssl", "tls", "mqtt", "mqtts", "ws", "wss"); err != nil {
		p.Add("url", "%v", err)
	}
	if c.ClientID == "" {
		p.Add("client_id", "required: a fixed client id lets the broker keep the session (and unacknowledged messages) across reconnects")
	}
	if c.MaxReconnectInterval <= 0 {
		p.Add("max_reconnect_interval", "must be positive, for example 30s")
	}
	if c.MaxPacketSize < 0 || c.MaxPacketSize > MaxPacket {
		p.Add("max_packet_size", "must be positive and at most %d (MQTT's largest packet): the broker's limit on a whole packet", MaxPacket)
	}
	if c.Username == "" && c.Password != "" {
		p.Add("password", "set username too")
	}
	if c.ConfirmTimeout <= 0 {
		p.Add("confirm_timeout", "must be positive")
	}
	return p.Err()
}

// EffectiveMaxPacketSize is max_packet_size, or its default.
func (c *Config) EffectiveMaxPacketSize() bytesize.Size {
	if c.MaxPacketSize > 0 {
		return c.MaxPacketSize
	}
	return DefaultMaxPacketSize
}

// ConfiguredLimit is the limit the config gives the sink named name:
// max_packet_size.
func (c *Config) ConfiguredLimit(name string) sinks.Limit {
	return sinks.Limit{Bytes: int(c.EffectiveMaxPacketSize()), From: "sinks." + name + ".max_packet_size"}
}
