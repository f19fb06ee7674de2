package ansible

import (
	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bytesize"
	"github.com/opsfirehose/firehose/strictyaml"
	"github.com/opsfirehose/firehose/topics"
)

// Config is the `ansible:` section of the bridge config.
type Config struct {
	// Config holds enabled (default true), topic_prefix (default "ansible",
	// the OpenStack firehose's), tokens and max_body (default 8MiB: a plugin
	// batch of 100 events stays under 1MiB unless single results are large).
	intake.Config `yaml:",inline"`
	// MaxBatch is the most events one request may carry. Default 1000.
	MaxBatch int `yaml:"max_batch"`
}

// DefaultConfig is the section as it runs with no config file.
func DefaultConfig() Config {
	return Config{
		Config:   intake.Config{Enabled: true, TopicPrefix: topics.DefaultAnsiblePrefix, MaxBody: 8 * bytesize.MiB},
		MaxBatch: 1000,
	}
}

// Validate reports every problem of the section at once.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	p.Wrap("", c.Config.Validate())
	if c.MaxBatch <= 0 {
		p.Add("max_batch", "must be positive, for example 1000")
	}
	return p.Err()
}
