// Package config is the bridge's configuration file: its shape, its defaults
// and its loading. Each section's type belongs to the package it configures
// (broker.Config, httpserver.Config, ...); this package composes them and
// applies the rules that span sections.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/opsfirehose/firehose/adapters/ansible"
	"github.com/opsfirehose/firehose/adapters/chef"
	configdbapi "github.com/opsfirehose/firehose/adapters/configdb"
	"github.com/opsfirehose/firehose/adapters/gerrit"
	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/adapters/launchpad"
	"github.com/opsfirehose/firehose/adapters/subunit"
	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/dashboard"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/logging"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/router"
	"github.com/opsfirehose/firehose/sinks"
)

// Config is the whole file.
type Config struct {
	Log    logging.Config    `yaml:"log"`
	HTTP   httpserver.Config `yaml:"http"`
	Broker broker.Config     `yaml:"broker"`
	// Sinks are the destinations routes deliver to, by name.
	Sinks map[string]sinks.Config `yaml:"sinks"`
	// Routes fan topic filters out to sinks.
	Routes []router.Config `yaml:"routes"`
	// DataDir holds the bridge's state: outboxes, ConfigDB's SQLite file,
	// the external MQTT client's store.
	DataDir string `yaml:"data_dir"`
	// ShutdownTimeout bounds a graceful shutdown, from the signal to exit.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Runtime tunes Go's garbage collector.
	Runtime Runtime `yaml:"runtime"`

	// The intake adapters, one section each.
	Chef      chef.Config      `yaml:"chef"`
	Ansible   ansible.Config   `yaml:"ansible"`
	Gerrit    gerrit.Config    `yaml:"gerrit"`
	Launchpad launchpad.Config `yaml:"launchpad"`
	Subunit   subunit.Config   `yaml:"subunit"`
	// ConfigDB is the Fuel/tuning-box config API and its store.
	ConfigDB configdbapi.Config `yaml:"configdb"`
	// Dashboard is the live page at / and its read API.
	Dashboard dashboard.Config `yaml:"dashboard"`

	// given holds the keys the file wrote, for Given.
	given map[string]bool
}

// Given reports whether the config file wrote key, a top-level key ("routes")
// or one a level below ("http.address"), rather than leaving its default.
// Merge keys and aliases count. With no file, nothing is given.
func (c *Config) Given(key string) bool { return c.given[key] }

// Runtime tunes Go's garbage collector for a message bus, which allocates a
// copy of every message per subscriber and so spends much of its CPU in the
// collector at the default GOGC of 100. The GOGC and GOMEMLIMIT environment
// variables, when set, win over these.
type Runtime struct {
	// GCPercent is GOGC: the heap may grow by this percentage of the live
	// heap before a collection. Higher trades memory for CPU.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimit is GOMEMLIMIT, a soft limit that makes the collector work
	// harder near it; 0 means none. Set it below the container's limit.
	MemoryLimit bytesize.Size `yaml:"memory_limit"`
}

// Default is what runs with no config file: everything embedded, the broker on
// :1883 (anonymous read-only) and :8083 (WebSocket), HTTP on 127.0.0.1:8080.
func Default() Config {
	return Config{
		Log:             logging.DefaultConfig(),
		HTTP:            httpserver.DefaultConfig(),
		Broker:          broker.DefaultConfig(),
		DataDir:         "data",
		Runtime:         Runtime{GCPercent: 400},
		ShutdownTimeout: 15 * time.Second,
		Chef:            chef.DefaultConfig(),
		Ansible:         ansible.DefaultConfig(),
		Gerrit:          gerrit.DefaultConfig(),
		Launchpad:       launchpad.DefaultConfig(),
		Subunit:         subunit.DefaultConfig(),
		ConfigDB:        configdbapi.DefaultConfig(),
		Dashboard:       dashboard.DefaultConfig(),
	}
}

// Intake is one intake adapter's section, as the rules that span them see it.
type Intake struct {
	// Key is the section, as in "chef".
	Key string
	intake.Config
}

// Intakes lists every intake adapter's section.
func (c *Config) Intakes() []Intake {
	return []Intake{
		{"chef", c.Chef.Config},
		{"ansible", c.Ansible.Config},
		{"gerrit", c.Gerrit.Config},
		{"launchpad", c.Launchpad},
		{"subunit", c.Subunit.Config},
		// configdb.auth, when set, replaces http.tokens; it is more than
		// tokens (users, Keystone), so it counts here as a token of its own.
		{"configdb", intake.Config{Enabled: c.ConfigDB.Enabled && !c.ConfigDB.AuthConfigured()}},
	}
}

// openIntakes names the enabled endpoints that would take requests from
// anyone: the HTTP listener reaches beyond loopback, allow_unauthenticated is
// off, and neither http.tokens nor the section's own tokens are set.
func (c *Config) openIntakes() []string {
	if !c.HTTP.BeyondLoopback() || c.HTTP.AllowUnauthenticated || len(c.HTTP.Tokens) > 0 {
		return nil
	}
	var open []string
	for _, in := range c.Intakes() {
		if in.Enabled && len(in.Tokens) == 0 {
			open = append(open, in.Key)
		}
	}
	return open
}

// Validate checks the settings that belong to no one section.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if c.ShutdownTimeout <= 0 {
		p.Add("shutdown_timeout", "must be positive, for example 15s")
	}
	if c.Runtime.GCPercent < 25 && c.Runtime.GCPercent != -1 {
		p.Add("runtime.gc_percent", "must be at least 25, or -1 to turn the collector off (with memory_limit)")
	}
	if c.Runtime.GCPercent == -1 && c.Runtime.MemoryLimit == 0 {
		p.Add("runtime.memory_limit", "required when gc_percent is -1, or memory grows without bound")
	}
	if c.DataDir == "" {
		p.Add("data_dir", "required")
	}
	if open := c.openIntakes(); len(open) > 0 {
		p.Add("http.allow_unauthenticated", "the HTTP intake would listen on %s, beyond loopback, and %s would take requests with no token: "+
			"set http.tokens (or each section's tokens), disable those sections, or set http.allow_unauthenticated: true "+
			"to accept requests from anyone who can reach it", c.HTTP.Address, strings.Join(open, ", "))
	}
	names := map[string]bool{}
	for name := range c.Sinks {
		names[name] = true
		if name == "" || strings.ContainsAny(name, "/\\ \x00") || name == "." || name == ".." {
			p.Add("sinks", "%q is not a usable sink name: use letters, digits, '-', '_' or '.'", name)
		}
	}
	p.Wrap("", router.ValidateAll(c.Routes, names))
	// A route whose sink could never take its messages (subjects outside
	// its JetStream stream's) would fill its outbox forever.
	p.Wrap("", router.ValidateSinks(c.Routes, c.Sinks))
	return p.Err()
}

// Options are the environment a config is loaded in; zero values mean the
// real process environment.
type Options struct {
	LookupEnv func(string) (string, bool)
	ReadFile  func(string) ([]byte, error)
	// Dir is the directory a relative broker.users_file is resolved
	// against; Load sets it to the config file's own directory. Empty means
	// the working directory.
	Dir string
	// Overrides are applied over the file, in order (see Override).
	Overrides []Override
	// SyntaxOnly checks the file's shape and values but not what it refers
	// to: unset ${VAR}s, missing files (secrets, certificates, users_file)
	// are not problems. It is `bridge check --syntax-only`, for a config
	// checked away from the machine it is meant for, as promtool's
	// --syntax-only does.
	SyntaxOnly bool
}

// Load reads the file at path over the defaults. An empty path means no file:
// the defaults. Every problem in the file is reported at once, each naming its
// key. A relative broker.users_file is taken from the file's directory.
func Load(path string, opts Options) (*Config, error) {
	cfg := Default()
	if path == "" {
		if len(opts.Overrides) == 0 {
			return &cfg, nil
		}
		if err := Parse(nil, &cfg, opts); err != nil {
			return nil, fmt.Errorf("config:\n%w", err)
		}
		return &cfg, nil
	}
	readFile := opts.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(path)
	}
	if err := Parse(data, &cfg, opts); err != nil {
		return nil, fmt.Errorf("config %s:\n%w", path, err)
	}
	return &cfg, nil
}

// Parse decodes YAML over cfg, which holds the defaults, then loads the
// broker's users_file, a relative path being taken from opts.Dir. It reports
// every problem at once.
func Parse(data []byte, cfg *Config, opts Options) error {
	var sources map[string]string
	if len(opts.Overrides) > 0 {
		var err error
		if data, sources, err = applyOverrides(data, opts.Overrides); err != nil {
			return err
		}
	}
	err := parse(data, cfg, opts)
	if opts.SyntaxOnly {
		err = withoutOutsideProblems(err)
	}
	return nameSources(err, sources)
}

func parse(data []byte, cfg *Config, opts Options) error {
	sopts := strictyaml.Options{LookupEnv: opts.LookupEnv, ReadFile: opts.ReadFile}
	err := strictyaml.Decode(data, cfg, sopts)
	cfg.given = givenKeys(data)
	if cfg.Broker.UsersFile != "" {
		if !filepath.IsAbs(cfg.Broker.UsersFile) && opts.Dir != "" {
			cfg.Broker.UsersFile = filepath.Join(opts.Dir, cfg.Broker.UsersFile)
		}
		users, uerr := LoadUsersFile(cfg.Broker.UsersFile, sopts)
		if uerr == nil {
			uerr = checkNoOverlap(cfg.Broker.Users, users)
			cfg.Broker.Users = append(cfg.Broker.Users, users...)
		}
		err = errors.Join(err, reroot("broker.users_file", uerr))
	}
	return err
}

// withoutOutsideProblems drops the problems that are about the machine the
// config is checked on rather than the config: unset variables and missing
// files.
func withoutOutsideProblems(err error) error {
	if err == nil {
		return nil
	}
	var kept []error
	for _, e := range flatten(err) {
		if !errors.Is(e, strictyaml.ErrUnsetVariable) && !errors.Is(e, fs.ErrNotExist) {
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// UsersFile is the shape of broker.users_file: the same user entries as broker.users.
type UsersFile struct {
	Users []broker.User `yaml:"users"`
}

// LoadUsersFile reads a users file. Errors name keys inside that file.
func LoadUsersFile(path string, opts strictyaml.Options) ([]broker.User, error) {
	readFile := opts.ReadFile
	if readFile == nil {
		readFile = os.ReadFile
	}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	var f UsersFile
	if err := strictyaml.Decode(data, &f, opts); err != nil {
		return nil, fmt.Errorf("in %s: %w", path, err)
	}
	return f.Users, nil
}

// checkNoOverlap refuses a user defined both in the config and in the users
// file, since which one wins would be a surprise.
func checkNoOverlap(inConfig, inFile []broker.User) error {
	names := map[string]bool{}
	for _, u := range inConfig {
		names[u.Username] = true
	}
	var errs []error
	for i, u := range inFile {
		if names[u.Username] {
			errs = append(errs, fmt.Errorf("users[%d]: %q is also defined in broker.users; define each user once", i, u.Username))
		}
	}
	return errors.Join(errs...)
}

// reroot reports err under key, so a problem in the users file reads
// "broker.users_file: in users.yaml: users[0].password_hash: ...".
func reroot(key string, err error) error {
	if err == nil {
		return nil
	}
	return &strictyaml.KeyError{Key: key, Err: err}
}

// givenKeys lists the keys a config file writes: each top-level key and each
// key one level below it ("http" and "http.address"). It only looks at keys,
// so a file that does not parse gives nothing; strictyaml reports why.
func givenKeys(data []byte) map[string]bool {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	keys := map[string]bool{}
	for key, value := range mappingKeys(doc.Content[0], 0) {
		keys[key] = true
		for sub := range mappingKeys(value, 0) {
			keys[key+"."+sub] = true
		}
	}
	return keys
}

// mappingKeys returns the keys of a mapping node and their values, with the
// keys of merged mappings (<<: *anchor) included. depth bounds merges of
// merges.
func mappingKeys(n *yaml.Node, depth int) map[string]*yaml.Node {
	keys := map[string]*yaml.Node{}
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode || depth > 8 {
		return keys
	}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			if v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
			continue
		}
		keys[k.Value] = v
	}
	for _, m := range merged {
		for k, v := range mappingKeys(m, depth+1) {
			if _, ok := keys[k]; !ok {
				keys[k] = v
			}
		}
	}
	return keys
}
