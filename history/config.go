package history

import (
	"fmt"
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/topics"
)

// Config is the `history:` section.
type Config struct {
	// Enabled keeps a history of the bus. On by default.
	Enabled bool `yaml:"enabled"`
	// MaxBytes bounds the history's size; the oldest messages go first.
	MaxBytes bytesize.Size `yaml:"max_bytes"`
	// MaxAge drops messages older than this.
	MaxAge time.Duration `yaml:"max_age"`
	// Filters are the MQTT topic filters whose messages are kept; default
	// every message ("#", which as on the bus leaves out $ topics).
	Filters []string `yaml:"filters"`
	// Sink names a jetstream (or nats) entry of `sinks:`, whose JetStream
	// servers (a NATS cluster) hold the history instead of the embedded
	// server: its connection settings are used, and the history's own
	// stream (Stream, not the sink's) is made there.
	Sink string `yaml:"sink"`
	// Stream is the JetStream stream's name.
	Stream string `yaml:"stream"`
	// SubjectPrefix is the first token of the stream's subjects: the packs
	// of messages are on <subject_prefix>.pack.<first topic level>.
	SubjectPrefix string `yaml:"subject_prefix"`
	// Replicas is the stream's replica count on a sink's cluster (the
	// embedded server is one node: 1).
	Replicas int `yaml:"replicas"`
	// QueueSize bounds the messages waiting to be written. Beyond it a
	// message is left out of the history (counted and logged), never
	// waited for: the history never slows the bus.
	QueueSize int `yaml:"queue_size"`
	// QueueBytes bounds the bytes of the messages waiting to be written,
	// as queue_size bounds their number: a slow store and large messages
	// (a Chef run with its node is some 170 KB) cost at most this much
	// memory.
	QueueBytes bytesize.Size `yaml:"queue_bytes"`
}

// DefaultConfig keeps every message for 7 days within 1 GiB, on the
// embedded server.
func DefaultConfig() Config {
	return Config{
		Enabled:       true,
		MaxBytes:      bytesize.GiB,
		MaxAge:        7 * 24 * time.Hour,
		Filters:       []string{"#"},
		Stream:        "FIREHOSE_HISTORY",
		SubjectPrefix: "firehose_history",
		Replicas:      1,
		QueueSize:     65536,
		QueueBytes:    256 * bytesize.MiB,
	}
}

// Validate reports every problem at once. Whether Sink names a NATS
// sink is checked with the sinks, by config.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if c.MaxBytes < bytesize.MiB {
		p.Add("max_bytes", "must be at least 1MiB")
	}
	if c.MaxAge < time.Second {
		p.Add("max_age", "must be at least 1s")
	}
	if len(c.Filters) == 0 {
		p.Add("filters", `at least one MQTT filter is required, e.g. ["#"]`)
	}
	for i, f := range c.Filters {
		if err := topics.ValidFilter(f); err != nil {
			p.Add(fmt.Sprintf("filters[%d]", i), "%v", err)
		} else if _, _, shared := topics.SplitShared(f); shared {
			p.Add(fmt.Sprintf("filters[%d]", i), "a history filter cannot be a shared subscription")
		}
	}
	if c.Stream == "" || !validStreamName(c.Stream) {
		p.Add("stream", "%q: a JetStream stream name is letters, digits, '-' and '_'", c.Stream)
	}
	if err := topics.ValidSubjectPrefix(c.SubjectPrefix); err != nil {
		p.Add("subject_prefix", "%v", err)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		p.Add("replicas", "must be 1 to 5")
	}
	if c.Sink == "" && c.Replicas != 1 {
		p.Add("replicas", "the embedded server keeps one replica; set history.sink to keep more on a cluster")
	}
	if c.QueueSize < 1 {
		p.Add("queue_size", "must be at least 1")
	}
	if c.QueueBytes < bytesize.MiB {
		p.Add("queue_bytes", "must be at least 1MiB")
	}
	return p.Err()
}

func validStreamName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return len(s) <= 255
}
