package nats

import (
	"fmt"
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
	"github.com/opsfirehose/firehose/sinks"
)

// The sink types this package serves.
const (
	TypeNATS      = "nats"
	TypeJetStream = "jetstream"
)

// DefaultMaxPayload is nats-server's default max_payload.
const DefaultMaxPayload = bytesize.MiB

// Config is a `sinks:` entry of type nats or jetstream. Its keys are
// relative to the entry (sinks.<name>.urls).
type Config struct {
	// Type is TypeNATS or TypeJetStream, as the entry's `type` says.
	Type string `yaml:"-"`

	// URLs of NATS servers: nats://host:4222, tls://host:4222.
	URLs []string `yaml:"urls"`
	// ConnectionName identifies the bridge to NATS.
	ConnectionName string `yaml:"connection_name"`
	// Token, or Username and Password, or CredsFile authenticate.
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

	// ConfirmTimeout bounds the wait for a confirmation; a message not
	// confirmed in time goes to its route's outbox.
	ConfirmTimeout time.Duration `yaml:"confirm_timeout"`

	// MaxPayload is the server's max_payload as the bridge assumes it until
	// it has connected, and as `bridge check` sees it; once connected, the
	// server's own (from its INFO) applies. A message with its headers over
	// it is refused before its sender's 2xx. Default 1MiB, nats-server's
	// default.
	MaxPayload bytesize.Size `yaml:"max_payload"`
}

// NewConfig is a config of type typ (TypeNATS or TypeJetStream) with its
// defaults.
func NewConfig(typ string) *Config {
	c := &Config{Type: typ}
	c.SetDefaults()
	return c
}

// SetDefaults gives a sink its defaults.
func (c *Config) SetDefaults() {
	c.ConnectionName = "firehose-bridge"
	c.MaxPending = 4096
	c.ConfirmTimeout = 5 * time.Second
}

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

// SetDefaults gives a stream its defaults.
func (s *StreamConfig) SetDefaults() {
	s.Storage = "file"
	s.Replicas = 1
	s.DuplicateWindow = 2 * time.Hour
}

// Validate checks the sink; keys in its problems are relative to the entry.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if c.Type != TypeNATS && c.Type != TypeJetStream {
		p.Add("type", "%q is not a NATS sink type; use nats or jetstream", c.Type)
	}
	if len(c.URLs) == 0 {
		p.Add("urls", "required for a %s sink, e.g. [nats://127.0.0.1:4222]", c.Type)
	}
	for i, u := range c.URLs {
		if err := sinks.CheckURL(u, "nats", "tls", "ws", "wss"); err != nil {
			p.Add(fmt.Sprintf("urls[%d]", i), "%v", err)
		}
	}
	if c.MaxPayload < 0 {
		p.Add("max_payload", "must be positive: the NATS server's max_payload, 1MiB unless its config says otherwise")
	}
	if c.Token != "" && (c.Username != "" || c.CredsFile != "") || c.Username != "" && c.CredsFile != "" {
		p.Add("token", "use one of token, username/password or creds_file")
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
	} else if c.Stream != nil {
		p.Add("stream", "does not apply to a %s sink", c.Type)
	}
	if c.Username == "" && c.Password != "" {
		p.Add("password", "set username too")
	}
	if c.ConfirmTimeout <= 0 {
		p.Add("confirm_timeout", "must be positive")
	}
	return p.Err()
}

// AssumedMaxPayload is max_payload, or its default.
func (c *Config) AssumedMaxPayload() bytesize.Size {
	if c.MaxPayload > 0 {
		return c.MaxPayload
	}
	return DefaultMaxPayload
}

// ConfiguredLimit is the limit the config gives the sink named name, for
// `bridge check`: max_payload, or nats-server's default when not set (a
// running sink learns the server's own).
func (c *Config) ConfiguredLimit(name string) sinks.Limit {
	from := "sinks." + name + ".max_payload"
	if c.MaxPayload == 0 {
		from = "nats-server's default max_payload; set sinks." + name + ".max_payload if the server's differs"
	}
	return sinks.Limit{Bytes: int(c.AssumedMaxPayload()), From: from}
}

// StreamSubjects are the subjects the sink's JetStream stream captures, as
// the config gives them: nil for a NATS core sink or a stream whose
// subjects are not given, when any subject may be sent.
func (c *Config) StreamSubjects() (stream string, subjects []string) {
	if c.Type != TypeJetStream || c.Stream == nil || len(c.Stream.Subjects) == 0 {
		return "", nil
	}
	return c.Stream.Name, c.Stream.Subjects
}
