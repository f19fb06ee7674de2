package dashboard

import (
	"time"

	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Config is the `dashboard:` section.
type Config struct {
	// Enabled serves the page at / and its API under /api/v1/.
	Enabled bool `yaml:"enabled"`
	// MaxStreams bounds the Server-Sent Event streams open at once, the
	// page's and curl's together; one more is answered 503 with Retry-After.
	MaxStreams int `yaml:"max_streams"`
	// StreamBuffer is how many messages wait for one slow stream before
	// further ones are dropped for it (and counted in its stats).
	StreamBuffer int `yaml:"stream_buffer"`
	// History is how far back the Ansible and Changes views fill from the
	// bus's history when the bridge starts (with history enabled); 0 starts
	// them empty.
	History time.Duration `yaml:"history"`
}

// DefaultConfig serves the dashboard.
func DefaultConfig() Config {
	return Config{Enabled: true, MaxStreams: 64, StreamBuffer: 4096, History: 24 * time.Hour}
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if c.MaxStreams < 1 {
		p.Add("max_streams", "must be at least 1")
	}
	if c.StreamBuffer < 16 {
		p.Add("stream_buffer", "must be at least 16")
	}
	if c.History < 0 {
		p.Add("history", "must not be negative (0 starts the views empty)")
	}
	return p.Err()
}
