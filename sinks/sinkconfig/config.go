package sinkconfig

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
	"github.com/opsfirehose/firehose/sinks"
)

// Sink types.
const (
	TypeNATS      = "nats"
	TypeJetStream = "jetstream"
	TypeMQTT      = "mqtt"
)

// Config is one entry of the `sinks:` map; the map key is the sink's name.
type Config struct {
	// Type is nats, jetstream or mqtt.
	Type string `yaml:"type"`

	// URLs of NATS servers (nats, jetstream): nats://host:4222, tls://host:4222.
	URLs []string `yaml:"urls"`
	// URL of the external MQTT broker (mqtt): tcp://, ssl://, ws:// or wss://.
	URL string `yaml:"url"`

	// ConnectionName identifies the bridge to NATS (nats, jetstream).
	ConnectionName string `yaml:"connection_name"`
	// Token, or Username and Password, or CredsFile (NATS) authenticate.
	Token     string `yaml:"token" secret:"true"`
	Username  string `yaml:"username"`
	Password  string `yaml:"password" secret:"true"`
	CredsFile string `yaml:"creds_file"`
	// TLS for the connection out.
	TLS *tlsconfig.Client `yaml:"tls"`

	// Stream (jetstream) is the stream messages are stored in.
	Stream *StreamConfig `yaml:"stream"`
	// MaxPending (jetstream) bounds asynchronous publishes awaiting their ack.
	MaxPending int `yaml:"max_pending"`

	// ClientID (mqtt) is fixed, so the broker keeps the session across reconnects.
	ClientID string `yaml:"client_id"`
	// StoreDir (mqtt) keeps in-flight QoS 1 messages on disk across
	// restarts; empty means <data_dir>/mqtt/<name>.
	StoreDir string `yaml:"store_dir"`
	// MaxReconnectInterval (mqtt) bounds the back-off between reconnects.
	MaxReconnectInterval time.Duration `yaml:"max_reconnect_interval"`

	// ConfirmTimeout bounds the wait for a confirmation; a message not
	// confirmed in time goes to its route's outbox.
	ConfirmTimeout time.Duration `yaml:"confirm_timeout"`

	// MaxPayload (nats, jetstream) is the server's max_payload as the
	// bridge assumes it until it has connected, and as `bridge check`
	// sees it; once connected, the server's own (from its INFO) applies.
	// A message with its headers over it is refused before its sender's
	// 2xx. Default 1MiB, nats-server's default.
	MaxPayload bytesize.Size `yaml:"max_payload"`
	// MaxPacketSize (mqtt) is the largest MQTT packet the broker takes:
	// MQTT 3.1.1 has no way to ask, and a broker disconnects a client that
	// sends a larger one, which would resend it forever. A message whose
	// PUBLISH packet is larger is refused before its sender's 2xx. Default
	// 1MiB (EMQX's default; mosquitto's is 256MiB, the protocol's maximum).
	MaxPacketSize bytesize.Size `yaml:"max_packet_size"`
}

// Protocol defaults of the limits.
const (
	// DefaultNATSMaxPayload is nats-server's default max_payload.
	DefaultNATSMaxPayload = bytesize.MiB
	// DefaultMQTTMaxPacketSize is the default max_packet_size of an mqtt sink.
	DefaultMQTTMaxPacketSize = bytesize.MiB
	// MaxMQTTPacket is the largest packet MQTT can describe: a remaining
	// length of 268,435,455 and 5 bytes of fixed header.
	MaxMQTTPacket = 268_435_455 + 5
)

// StreamConfig describes a JetStream stream.
type StreamConfig struct {
	Name string `yaml:"name"`
	// Create creates or updates the stream with these settings on connect.
	Create bool `yaml:"create"`
	// Subjects the stream captures, e.g. ["firehose.>"].
	Subjects []string `yaml:"subjects"`
	// Storage is file or memory.
	Storage  string `yaml:"storage"`
	Replicas int    `yaml:"replicas"`
	// MaxAge drops messages older than this; 0 keeps them.
	MaxAge time.Duration `yaml:"max_age"`
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id for
	// de-duplication. It must cover the longest outage the outbox rides out.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
}

// SetDefaults gives a sink in the config its defaults.
func (c *Config) SetDefaults() {
	c.ConnectionName = "firehose-bridge"
	c.MaxPending = 4096
	c.MaxReconnectInterval = 30 * time.Second
	c.ConfirmTimeout = 5 * time.Second
}

// AssumedMaxPayload is max_payload, or its default (nats, jetstream).
func (c *Config) AssumedMaxPayload() bytesize.Size {
	if c.MaxPayload > 0 {
		return c.MaxPayload
	}
	return DefaultNATSMaxPayload
}

// EffectiveMaxPacketSize is max_packet_size, or its default (mqtt).
func (c *Config) EffectiveMaxPacketSize() bytesize.Size {
	if c.MaxPacketSize > 0 {
		return c.MaxPacketSize
	}
	return DefaultMQTTMaxPacketSize
}

// SetDefaults gives a stream its defaults.
func (s *StreamConfig) SetDefaults() {
	s.Storage = "file"
	s.Replicas = 1
	s.DuplicateWindow = 2 * time.Hour
}

// Validate checks one sink, refusing settings that do not apply to its type.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	isNATS := c.Type == TypeNATS || c.Type == TypeJetStream
	switch {
	case isNATS:
		if len(c.URLs) == 0 {
			p.Add("urls", "required for a %s sink, e.g. [nats://127.0.0.1:4222]", c.Type)
		}
		for i, u := range c.URLs {
			if err := checkURL(u, "nats", "tls", "ws", "wss"); err != nil {
				p.Add(fmt.Sprintf("urls[%d]", i), "%v", err)
			}
		}
		notFor(&p, c.Type, "url", c.URL != "")
		notFor(&p, c.Type, "client_id", c.ClientID != "")
		notFor(&p, c.Type, "store_dir", c.StoreDir != "")
		notFor(&p, c.Type, "max_packet_size", c.MaxPacketSize != 0)
		if c.MaxPayload < 0 {
			p.Add("max_payload", "must be positive: the NATS server's max_payload, 1MiB unless its config says otherwise")
		}
		if c.Token != "" && (c.Username != "" || c.CredsFile != "") || c.Username != "" && c.CredsFile != "" {
			p.Add("token", "use one of token, username/password or creds_file")
		}
	case c.Type == TypeMQTT:
		if err := checkURL(c.URL, "tcp", "ssl", "tls", "mqtt", "mqtts", "ws", "wss"); err != nil {
			p.Add("url", "%v", err)
		}
		if c.ClientID == "" {
			p.Add("client_id", "required: a fixed client id lets the broker keep the session (and unacknowledged messages) across reconnects")
		}
		notFor(&p, c.Type, "urls", len(c.URLs) > 0)
		notFor(&p, c.Type, "token", c.Token != "")
		notFor(&p, c.Type, "creds_file", c.CredsFile != "")
		notFor(&p, c.Type, "stream", c.Stream != nil)
		if c.MaxReconnectInterval <= 0 {
			p.Add("max_reconnect_interval", "must be positive, for example 30s")
		}
		notFor(&p, c.Type, "max_payload", c.MaxPayload != 0)
		if c.MaxPacketSize < 0 || c.MaxPacketSize > MaxMQTTPacket {
			p.Add("max_packet_size", "must be positive and at most %d (MQTT's largest packet): the broker's limit on a whole packet", MaxMQTTPacket)
		}
	default:
		p.Add("type", "%q is not a sink type; use nats, jetstream or mqtt", c.Type)
	}
	if c.Type == TypeJetStream {
		if c.Stream == nil || c.Stream.Name == "" {
			p.Add("stream.name", "required for a jetstream sink")
		} else if c.Stream.Create && len(c.Stream.Subjects) == 0 {
			p.Add("stream.subjects", "required when stream.create is true, e.g. [\"firehose.>\"]")
		}
		if c.Stream != nil && c.Stream.Storage != "file" && c.Stream.Storage != "memory" {
			p.Add("stream.storage", "%q: use file or memory", c.Stream.Storage)
		}
		if c.MaxPending < 1 {
			p.Add("max_pending", "must be at least 1")
		}
	} else if c.Type == TypeNATS {
		notFor(&p, c.Type, "stream", c.Stream != nil)
	}
	if c.Username == "" && c.Password != "" {
		p.Add("password", "set username too")
	}
	if c.ConfirmTimeout <= 0 {
		p.Add("confirm_timeout", "must be positive")
	}
	return p.Err()
}

func notFor(p *strictyaml.Problems, typ, key string, set bool) {
	if set {
		p.Add(key, "does not apply to a %s sink", typ)
	}
}

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL like %s://host:port", raw, schemes[0])
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return nil
		}
	}
	return fmt.Errorf("%q: scheme must be one of %s", raw, strings.Join(schemes, ", "))
}

// ConfiguredLimit is the limit the config gives the sink named name, for
// `bridge check`: max_payload for NATS (nats-server's default when not set;
// a running sink learns the server's own), max_packet_size for MQTT.
func (c *Config) ConfiguredLimit(name string) sinks.Limit {
	if c.Type == TypeMQTT {
		return sinks.Limit{Bytes: int(c.EffectiveMaxPacketSize()), From: "sinks." + name + ".max_packet_size"}
	}
	from := "sinks." + name + ".max_payload"
	if c.MaxPayload == 0 {
		from = "nats-server's default max_payload; set sinks." + name + ".max_payload if the server's differs"
	}
	return sinks.Limit{Bytes: int(c.AssumedMaxPayload()), From: from}
}
