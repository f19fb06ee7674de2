package router

import (
	"fmt"
	"strings"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
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

// ValidateSinks checks routes against the sinks they name. A route to a
// jetstream sink whose stream.subjects are given must publish only subjects
// the stream captures: JetStream answers any other subject with "no
// responders", so the route would keep its messages in the outbox for good.
// Each filter of such a route is mapped as messages are (rewrite, then
// subject_prefix and nats-server's MQTT mapping) and checked, with NATS
// subject matching, against the union of the stream's subjects. Keys in the
// errors are relative to the config root. streamOf tells a sink's stream
// and the subjects it captures, nil when any subject may be sent (the sink
// is not a jetstream one, or its stream.subjects are not given).
func ValidateSinks(routes []Config, streamOf func(sink string) (stream string, subjects []string)) error {
	var p strictyaml.Problems
	for i, r := range routes {
		streamName, subjects := streamOf(r.Sink)
		if len(subjects) == 0 {
			continue
		}
		stream := make([][]string, len(subjects))
		for k, subj := range subjects {
			stream[k] = strings.Split(subj, ".")
		}
		for j, f := range r.Filters {
			for _, subj := range r.subjectFilters(f) {
				if !subjectCovered(strings.Split(subj, "."), stream) {
					p.Add(fmt.Sprintf("routes[%d].filters[%d]", i, j),
						"route %q sends %q (subject_prefix %q, filter %q) to sink %s, but its stream %s captures only %s: "+
							"JetStream would refuse those messages and the outbox would keep them for good; change subject_prefix, rewrite or the sink's stream.subjects",
						r.Name, subj, r.SubjectPrefix, f, r.Sink, streamName, strings.Join(subjects, ", "))
					break
				}
			}
		}
	}
	return p.Err()
}

// subjectFilters returns NATS subject filters that together match every
// subject the route gives the topics filter f matches: with and without the
// rewrite, as it applies to some or all of those topics, and with the
// subject of the parent topic too for a trailing "/#", which in MQTT
// matches the parent ("a/#" matches "a"). Invalid filters give nothing;
// Validate reports them.
func (c *Config) subjectFilters(f string) []string {
	topicFilters := []string{f}
	if rw := c.Rewrite; rw != nil && topics.Overlap(f, rw.From+"/#") {
		if f == rw.From || strings.HasPrefix(f, rw.From+"/") {
			topicFilters = topicFilters[:0] // every topic f matches is rewritten
		}
		topicFilters = append(topicFilters, rewriteFilter(f, rw))
	}
	var out []string
	for _, tf := range topicFilters {
		for _, t := range []string{tf, strings.TrimSuffix(tf, "/#")} {
			if subj, err := topics.FilterToSubject(c.SubjectPrefix, t); err == nil && (len(out) == 0 || out[len(out)-1] != subj) {
				out = append(out, subj)
			}
		}
	}
	return out
}

// rewriteFilter is a filter of what the topics that f matches and that
// start with rw.From become once rewritten.
func rewriteFilter(f string, rw *Rewrite) string {
	fl := strings.Split(f, "/")
	k := strings.Count(rw.From, "/") + 1
	for i := 0; i < k && i < len(fl); i++ {
		if fl[i] == "#" {
			return rw.To + "/#"
		}
	}
	if len(fl) <= k {
		return rw.To
	}
	return rw.To + "/" + strings.Join(fl[k:], "/")
}

// subjectCovered reports whether every subject that the subject filter s
// matches is matched by at least one of the filters in by. Both are split
// into tokens; '*' matches one token and a final '>' one or more.
func subjectCovered(s []string, by [][]string) bool {
	if len(by) == 0 {
		return false
	}
	if len(s) == 0 {
		for _, b := range by {
			if len(b) == 0 {
				return true
			}
		}
		return false
	}
	for _, b := range by {
		if len(b) > 0 && b[0] == ">" {
			return true // s has a token or more left, which '>' takes
		}
	}
	if s[0] == ">" {
		// One token, or more: '>' is the union of "*" and "*.>".
		return subjectCovered([]string{"*"}, by) && subjectCovered([]string{"*", ">"}, by)
	}
	var rest [][]string
	for _, b := range by {
		if len(b) > 0 && (b[0] == "*" || s[0] != "*" && b[0] == s[0]) {
			rest = append(rest, b[1:])
		}
	}
	return subjectCovered(s[1:], rest)
}
