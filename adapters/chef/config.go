package chef

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
	"github.com/opsfirehose/firehose/topics"
)

// Config is the `chef:` section of the bridge config.
type Config struct {
	// Config holds enabled (default true), topic_prefix (default "chef"),
	// tokens and max_body (default 32MiB: converge messages with big Ohai
	// data exceed 3 MB). chef-client sends its data_collector.token in
	// x-data-collector-token; Chef Infra Server injects its own the same way.
	intake.Config `yaml:",inline"`
	// Validation is compatible (default), strict or off.
	Validation chefpayload.Validation `yaml:"validation"`
	// ResourceStatuses are the resource statuses that get a message of their
	// own on chef/<org>/<node>/resource/<cookbook>/<status>. Default updated
	// and failed; [] publishes none.
	ResourceStatuses []string `yaml:"resource_statuses"`
	// Attributes are Chef's allow and block lists for node attributes, with
	// client.rb's names.
	Attributes Attributes `yaml:",inline"`
	// Redact replaces secrets in node attributes and resource states.
	Redact Redact `yaml:"redact"`
	// Owners maps teams to the cookbooks they own, for the teams' failure
	// messages and the owner fields.
	Owners Owners `yaml:"owners"`
	// Rollout tracks each node's cookbook versions.
	Rollout Rollout `yaml:"rollout"`
}

// Attributes filter the node object of run_converge messages with
// chef-client's data_for_save semantics, level by level: a list that is
// absent (or null) keeps everything, an empty list keeps nothing (allowed) or
// removes nothing (blocked). An entry is a path "network/interfaces/eth0", or
// a list of keys ["filesystem", "/dev/disk0s2"] for keys that contain "/".
// The allow list applies first, then the block list. The *_whitelist and
// *_blacklist names are Chef's deprecated aliases; giving a list under both
// names is an error.
type Attributes struct {
	AllowedAutomatic []any `yaml:"allowed_automatic_attributes"`
	AllowedDefault   []any `yaml:"allowed_default_attributes"`
	AllowedNormal    []any `yaml:"allowed_normal_attributes"`
	AllowedOverride  []any `yaml:"allowed_override_attributes"`
	BlockedAutomatic []any `yaml:"blocked_automatic_attributes"`
	BlockedDefault   []any `yaml:"blocked_default_attributes"`
	BlockedNormal    []any `yaml:"blocked_normal_attributes"`
	BlockedOverride  []any `yaml:"blocked_override_attributes"`

	AutomaticWhitelist []any `yaml:"automatic_attribute_whitelist"`
	DefaultWhitelist   []any `yaml:"default_attribute_whitelist"`
	NormalWhitelist    []any `yaml:"normal_attribute_whitelist"`
	OverrideWhitelist  []any `yaml:"override_attribute_whitelist"`
	AutomaticBlacklist []any `yaml:"automatic_attribute_blacklist"`
	DefaultBlacklist   []any `yaml:"default_attribute_blacklist"`
	NormalBlacklist    []any `yaml:"normal_attribute_blacklist"`
	OverrideBlacklist  []any `yaml:"override_attribute_blacklist"`
}

// Redact configures redaction. It applies to run_converge messages: to the
// four attribute levels of the node object (after the allow and block lists)
// and to each resource's before and after states, in the run's message and
// in the per-resource messages.
type Redact struct {
	// Enabled turns redaction on. Default false.
	Enabled bool `yaml:"enabled"`
	// Patterns are Go regular expressions, matched case-insensitively
	// anywhere in each object key; a matching key's value, whatever it is,
	// becomes "*redacted*". Default password, token, secret, key.
	Patterns []string `yaml:"patterns"`
	// DropDelta replaces each resource's delta (a diff that may show file
	// contents) with "*redacted*". Independent of Enabled. Default false.
	DropDelta bool `yaml:"drop_delta"`
}

// Redacted is what a redacted value becomes.
const Redacted = "*redacted*"

// resourceStatuses are the statuses a Chef resource record can have.
var resourceStatuses = []string{"updated", "failed", "up-to-date", "skipped", "unprocessed"}

// DefaultConfig is the section's defaults: enabled, no filtering, no redaction.
func DefaultConfig() Config {
	return Config{
		Config:           intake.Config{Enabled: true, TopicPrefix: topics.DefaultChefPrefix, MaxBody: 32 * bytesize.MiB},
		Validation:       chefpayload.ValidationCompatible,
		ResourceStatuses: []string{"updated", "failed"},
		Redact: Redact{
			Patterns: []string{"password", "token", "secret", "key"},
		},
		Owners:  Owners{Teams: map[string]Team{}, ReloadInterval: 5 * time.Second},
		Rollout: Rollout{Enabled: true, MaxNodes: 200_000, TallyInterval: time.Second},
	}
}

// Validate reports every problem of the section at once.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	p.Wrap("", c.Config.Validate())
	for i, s := range c.ResourceStatuses {
		if !slices.Contains(resourceStatuses, s) {
			p.Add(fmt.Sprintf("resource_statuses[%d]", i), "%q is not a resource status; use %s", s, strings.Join(resourceStatuses, ", "))
		}
	}
	if _, err := c.Attributes.rules(); err != nil {
		for _, e := range err {
			p.Add(e.key, "%s", e.msg)
		}
	}
	p.Wrap("owners", c.Owners.Validate())
	p.Wrap("rollout", c.Rollout.Validate())
	return p.Err()
}

// Validate checks the patterns.
func (r *Redact) Validate() error {
	var p strictyaml.Problems
	if _, err := r.compile(); err != nil {
		p.Add("patterns", "%v", err)
	}
	return p.Err()
}

// compile joins the patterns into one case-insensitive expression; nil when
// there are none.
func (r *Redact) compile() (*regexp.Regexp, error) {
	if len(r.Patterns) == 0 {
		return nil, nil
	}
	alts := make([]string, len(r.Patterns))
	for i, pat := range r.Patterns {
		if pat == "" {
			return nil, fmt.Errorf("patterns[%d] is empty, which would redact every key", i)
		}
		if _, err := regexp.Compile(pat); err != nil {
			return nil, fmt.Errorf("patterns[%d]: %w", i, err)
		}
		alts[i] = "(?:" + pat + ")"
	}
	return regexp.Compile("(?i)" + strings.Join(alts, "|"))
}

// keyProblem is one problem with an attribute list, under its key.
type keyProblem struct{ key, msg string }

// The attribute levels of a node object, in chef-client's order.
var levels = []string{"automatic", "default", "normal", "override"}

// rules resolves the aliases and parses every entry.
func (a *Attributes) rules() (map[string]levelRules, []keyProblem) {
	type pair struct {
		name, alias string
		list, old   []any
	}
	allowed := []pair{
		{"allowed_automatic_attributes", "automatic_attribute_whitelist", a.AllowedAutomatic, a.AutomaticWhitelist},
		{"allowed_default_attributes", "default_attribute_whitelist", a.AllowedDefault, a.DefaultWhitelist},
		{"allowed_normal_attributes", "normal_attribute_whitelist", a.AllowedNormal, a.NormalWhitelist},
		{"allowed_override_attributes", "override_attribute_whitelist", a.AllowedOverride, a.OverrideWhitelist},
	}
	blocked := []pair{
		{"blocked_automatic_attributes", "automatic_attribute_blacklist", a.BlockedAutomatic, a.AutomaticBlacklist},
		{"blocked_default_attributes", "default_attribute_blacklist", a.BlockedDefault, a.DefaultBlacklist},
		{"blocked_normal_attributes", "normal_attribute_blacklist", a.BlockedNormal, a.NormalBlacklist},
		{"blocked_override_attributes", "override_attribute_blacklist", a.BlockedOverride, a.OverrideBlacklist},
	}
	var problems []keyProblem
	resolve := func(p pair) ([]any, string) {
		switch {
		case p.list != nil && p.old != nil:
			problems = append(problems, keyProblem{p.alias, fmt.Sprintf(
				"%s is the deprecated name of %s; give the list once, as %s", p.alias, p.name, p.name)})
			return p.list, p.name
		case p.old != nil:
			return p.old, p.alias
		}
		return p.list, p.name
	}
	out := map[string]levelRules{}
	for i, level := range levels {
		var r levelRules
		if list, key := resolve(allowed[i]); list != nil {
			r.allow, r.allowSet = parsePaths(key, list, &problems), true
		}
		if list, key := resolve(blocked[i]); list != nil {
			r.block = parsePaths(key, list, &problems)
		}
		if r.allowSet || len(r.block) > 0 {
			out[level] = r
		}
	}
	return out, problems
}

// parsePaths turns config entries into key paths.
func parsePaths(key string, list []any, problems *[]keyProblem) []attrPath {
	paths := make([]attrPath, 0, len(list))
	for i, item := range list {
		switch v := item.(type) {
		case string:
			path := splitPath(v)
			if len(path) == 0 {
				*problems = append(*problems, keyProblem{fmt.Sprintf("%s[%d]", key, i),
					fmt.Sprintf("%q names no attribute; remove it (an empty list, not an empty entry, keeps nothing)", v)})
				continue
			}
			paths = append(paths, path)
		case []any:
			if len(v) == 0 {
				*problems = append(*problems, keyProblem{fmt.Sprintf("%s[%d]", key, i), "[] names no attribute; remove it"})
				continue
			}
			path := make(attrPath, 0, len(v))
			for j, part := range v {
				s, ok := part.(string)
				if !ok {
					*problems = append(*problems, keyProblem{fmt.Sprintf("%s[%d][%d]", key, i, j),
						fmt.Sprintf("expected a key (a string), got %v; quote it", part)})
					continue
				}
				path = append(path, s)
			}
			paths = append(paths, path)
		default:
			*problems = append(*problems, keyProblem{fmt.Sprintf("%s[%d]", key, i),
				fmt.Sprintf(`expected a path such as "network/interfaces/eth0" or a list of keys, got %v; quote it`, item)})
		}
	}
	return paths
}

// splitPath splits a path string as Ruby's String#split("/") does, which
// drops trailing empty parts, then drops one leading empty part, as
// chef-client does: "/network/interfaces/" is ["network", "interfaces"].
func splitPath(s string) attrPath {
	parts := strings.Split(s, "/")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 0 && parts[0] == "" {
		parts = parts[1:]
	}
	return parts
}
