package router

import (
	"fmt"
	"strings"

	"github.com/opsfirehose/firehose/bytesize"
	"github.com/opsfirehose/firehose/strictyaml"
	"github.com/opsfirehose/firehose/topics"
)

// Config is one entry of `routes:`.
type Config struct {
	// Name identifies the route in logs, metrics and its outbox directory.
	Name string `yaml:"name"`
	// Filters are MQTT topic filters; a message matching any of them is routed.
	Filters []string `yaml:"filters"`
	// Where narrows the route to messages whose JSON payload has these
	// top-level fields: a scalar means equality, a list means "in".
	Where map[string]any `yaml:"where"`
	// Sink names an entry of `sinks:`.
	Sink string `yaml:"sink"`
	// SubjectPrefix is the NATS subject prefix: a topic t becomes
	// <subject_prefix>.<t mapped> (NATS sinks only).
	SubjectPrefix string `yaml:"subject_prefix"`
	// Rewrite swaps a leading topic prefix before mapping, e.g. from "chef"
	// to "dc1/chef".
	Rewrite *Rewrite `yaml:"rewrite"`
	// Required routes keep messages in the outbox while the sink is down,
	// and the sender gets its 2xx or PUBACK only once the message is safe.
	// Optional routes drop messages the sink cannot take, and count them.
	Required bool `yaml:"required"`
	// OutboxMaxBytes bounds the route's outbox (required routes). When it is
	// full, senders get 503 with Retry-After.
	OutboxMaxBytes bytesize.Size `yaml:"outbox_max_bytes"`
	// QueueSize bounds the in-memory queue of an optional route.
	QueueSize int `yaml:"queue_size"`
}

// Rewrite swaps one topic prefix for another.
type Rewrite struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// SetDefaults gives a route in the config its defaults: required, with a 1 GiB outbox.
func (c *Config) SetDefaults() {
	c.SubjectPrefix = topics.DefaultSubjectPrefix
	c.Required = true
	c.OutboxMaxBytes = bytesize.GiB
	c.QueueSize = 10000
}

// Validate checks one route on its own; names and sinks are checked across
// routes by ValidateAll.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if c.Name == "" {
		p.Add("name", "required")
	} else if strings.ContainsAny(c.Name, "/\\ \x00") || c.Name == "." || c.Name == ".." {
		p.Add("name", "%q: use letters, digits, '-', '_' or '.' (it names a directory)", c.Name)
	}
	if len(c.Filters) == 0 {
		p.Add("filters", "at least one MQTT filter is required, e.g. [\"chef/+/+/run/failure\"]")
	}
	for i, f := range c.Filters {
		if err := topics.ValidFilter(f); err != nil {
			p.Add(fmt.Sprintf("filters[%d]", i), "%v", err)
		} else if _, _, shared := topics.SplitShared(f); shared {
			p.Add(fmt.Sprintf("filters[%d]", i), "a route filter cannot be a shared subscription")
		}
	}
	for field, v := range c.Where {
		if !whereValueOK(v) {
			p.Add("where."+field, "must be a scalar (equality) or a list of scalars (in)")
		}
	}
	if c.Sink == "" {
		p.Add("sink", "required: the name of an entry of sinks")
	}
	if err := topics.ValidSubjectPrefix(c.SubjectPrefix); err != nil {
		p.Add("subject_prefix", "%v", err)
	}
	if c.Rewrite != nil {
		if err := topics.ValidPrefix(c.Rewrite.From); err != nil {
			p.Add("rewrite.from", "%v", err)
		}
		if err := topics.ValidPrefix(c.Rewrite.To); err != nil {
			p.Add("rewrite.to", "%v", err)
		}
	}
	if c.Required && c.OutboxMaxBytes < bytesize.MiB {
		p.Add("outbox_max_bytes", "must be at least 1MiB")
	}
	if !c.Required && c.QueueSize < 1 {
		p.Add("queue_size", "must be at least 1")
	}
	return p.Err()
}

func whereValueOK(v any) bool {
	switch v := v.(type) {
	case nil, string, bool, int, int64, uint64, float64:
		return true
	case []any:
		for _, e := range v {
			if _, nested := e.([]any); nested || !whereValueOK(e) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// ValidateAll checks what spans routes: unique names, and sinks that exist.
// Keys in the errors are relative to the config root.
func ValidateAll(routes []Config, sinkNames map[string]bool) error {
	var p strictyaml.Problems
	seen := map[string]int{}
	for i, r := range routes {
		if j, dup := seen[r.Name]; dup && r.Name != "" {
			p.Add(fmt.Sprintf("routes[%d].name", i), "%q is already the name of routes[%d]", r.Name, j)
		}
		seen[r.Name] = i
		if r.Sink != "" && !sinkNames[r.Sink] {
			p.Add(fmt.Sprintf("routes[%d].sink", i), "%q is not defined under sinks", r.Sink)
		}
	}
	return p.Err()
}
