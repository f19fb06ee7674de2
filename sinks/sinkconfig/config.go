package sinkconfig

import (
	"fmt"

	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/sinks"
	mqttsink "github.com/opsfirehose/firehose/sinks/mqtt"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
)

// Sink types, as `type` names them.
const (
	TypeNATS      = natssink.TypeNATS
	TypeJetStream = natssink.TypeJetStream
	TypeMQTT      = mqttsink.Type
)

// Config is one entry of the `sinks:` map (the map key is the sink's name):
// its `type` chooses the package whose Config the rest of its keys are.
// Exactly one of NATS and MQTT is set once it is decoded (strictyaml.Union).
type Config struct {
	// Type is nats, jetstream or mqtt.
	Type string `yaml:"-"`
	// NATS is the entry of a nats or jetstream sink.
	NATS *natssink.Config `yaml:"-"`
	// MQTT is the entry of an mqtt sink.
	MQTT *mqttsink.Config `yaml:"-"`
}

var _ strictyaml.Union = (*Config)(nil)

// NATSConfig is the entry of a nats or jetstream sink.
func NATSConfig(c *natssink.Config) Config {
	return Config{Type: c.Type, NATS: c}
}

// MQTTConfig is the entry of an mqtt sink.
func MQTTConfig(c *mqttsink.Config) Config {
	return Config{Type: TypeMQTT, MQTT: c}
}

// UnionKey is `type`, which chooses the sink's package.
func (c *Config) UnionKey() string { return "type" }

// Choose gives the entry the config of the package that serves typ, with
// its defaults.
func (c *Config) Choose(typ string) (any, error) {
	*c = Config{Type: typ}
	switch typ {
	case TypeNATS, TypeJetStream:
		c.NATS = natssink.NewConfig(typ)
		return c.NATS, nil
	case TypeMQTT:
		c.MQTT = mqttsink.NewConfig()
		return c.MQTT, nil
	}
	return nil, errNotAType(typ)
}

// Chosen is the package's config Choose made.
func (c *Config) Chosen() any {
	switch {
	case c.NATS != nil:
		return c.NATS
	case c.MQTT != nil:
		return c.MQTT
	}
	return nil
}

func errNotAType(typ string) error {
	if typ == "" {
		return fmt.Errorf("required: nats, jetstream or mqtt")
	}
	return fmt.Errorf("%q is not a sink type; use nats, jetstream or mqtt", typ)
}

// Validate checks that the entry has a type; strictyaml validates the
// chosen package's config in the entry's place.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if c.Chosen() == nil {
		p.Add("type", "%v", errNotAType(c.Type))
	}
	return p.Err()
}

// ConfiguredLimit is the limit the config gives the sink named name, for
// `bridge check`: max_payload for NATS (nats-server's default when not set;
// a running sink learns the server's own), max_packet_size for MQTT.
func (c *Config) ConfiguredLimit(name string) sinks.Limit {
	switch {
	case c.NATS != nil:
		return c.NATS.ConfiguredLimit(name)
	case c.MQTT != nil:
		return c.MQTT.ConfiguredLimit(name)
	}
	return sinks.Limit{}
}

// StreamSubjects tells, for the sink named name among entries, its
// JetStream stream and the subjects it captures (nil when any subject may
// be sent), as router.ValidateSinks asks.
func StreamSubjects(entries map[string]Config) func(name string) (stream string, subjects []string) {
	return func(name string) (string, []string) {
		if c, ok := entries[name]; ok && c.NATS != nil {
			return c.NATS.StreamSubjects()
		}
		return "", nil
	}
}
