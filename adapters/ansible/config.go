package ansible

import (
	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/topics"
)

// Config is the `ansible:` section of the bridge config: enabled (default
// true), topic_prefix (default "ansible", the OpenStack firehose's), tokens,
// max_body (default 8MiB: a plugin batch of 100 events stays under 1MiB
// unless single results are large) and max_batch (default 1000).
type Config = intake.Batched

// DefaultConfig is the section as it runs with no config file.
func DefaultConfig() Config {
	return Config{
		Config:   intake.Config{Enabled: true, TopicPrefix: topics.DefaultAnsiblePrefix, MaxBody: 8 * bytesize.MiB},
		MaxBatch: 1000,
	}
}
