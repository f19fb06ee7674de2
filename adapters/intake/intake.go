// Package intake holds what every HTTP intake adapter shares: the common keys
// of its config section and what the bridge hands it besides that section.
// Each adapter keeps its own defaults (topic prefix, body limit) and rules.
package intake

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/bytesize"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/strictyaml"
	"github.com/opsfirehose/firehose/topics"
)

// Config is the keys every adapter section has. An adapter with more keys
// embeds it with `yaml:",inline"` and calls its Validate from its own.
type Config struct {
	// Enabled serves the adapter's endpoints.
	Enabled bool `yaml:"enabled"`
	// TopicPrefix replaces the source's name as the first level(s) of its topics.
	TopicPrefix string `yaml:"topic_prefix"`
	// Tokens, when set, replace http.tokens for this adapter's endpoints.
	Tokens []httpserver.Token `yaml:"tokens"`
	// MaxBody bounds one request; a larger one gets 413.
	MaxBody bytesize.Size `yaml:"max_body"`
}

// Validate reports every problem of the common keys at once.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if err := topics.ValidPrefix(c.TopicPrefix); err != nil {
		p.Add("topic_prefix", "%v", err)
	}
	if c.MaxBody <= 0 {
		p.Add("max_body", "must be positive, for example 8MiB")
	}
	for i, t := range c.Tokens {
		if t.Token == "" {
			p.Add(fmt.Sprintf("tokens[%d].token", i), "required (or token_file)")
		}
	}
	return p.Err()
}

// Batched is the section of an adapter that takes many events in one
// request (an array, NDJSON): the common keys and max_batch.
type Batched struct {
	Config `yaml:",inline"`
	// MaxBatch is the most events one request may carry; more get a 413,
	// found before the events are listed, so that a body of a million tiny
	// events costs no more than its bytes.
	MaxBatch int `yaml:"max_batch"`
}

// Validate reports every problem of the section at once.
func (c *Batched) Validate() error {
	var p strictyaml.Problems
	p.Wrap("", c.Config.Validate())
	if c.MaxBatch <= 0 {
		p.Add("max_batch", "must be positive, for example 1000")
	}
	return p.Err()
}

// Options are what the bridge hands an adapter besides its config section.
type Options struct {
	// Publisher receives every message; required.
	Publisher bus.Publisher
	// Logger is the adapter's child logger: log.With().Str("adapter", name).
	Logger zerolog.Logger
	// Tokens are the effective tokens: the section's own when set, else
	// http.tokens. Nil or empty means no token is required.
	Tokens *httpserver.Tokens
	// Registerer receives the adapter's metrics; nil means none.
	Registerer prometheus.Registerer
	// Now stamps Firehose-Received-At; nil means time.Now.
	Now func() time.Time
}

// Clock is Now, or time.Now when it is nil.
func (o Options) Clock() func() time.Time {
	if o.Now == nil {
		return time.Now
	}
	return o.Now
}
