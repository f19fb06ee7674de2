// Package config is the bridge's configuration file: its shape, its defaults
// and its loading. Each section's type belongs to the package it configures
// (broker.Config, httpserver.Config, ...); this package composes them and
// applies the rules that span sections.
package config

import (
	"reflect"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/adapters/ansible"
	"github.com/opsfirehose/firehose/adapters/chef"
	"github.com/opsfirehose/firehose/adapters/gerrit"
	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/adapters/launchpad"
	"github.com/opsfirehose/firehose/adapters/subunit"
	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/config/configcore"
	configdbapi "github.com/opsfirehose/firehose/configdb/api"
	"github.com/opsfirehose/firehose/dashboard"
	"github.com/opsfirehose/firehose/history"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/logging"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/router"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
)

// Config is the whole file.
type Config struct {
	Log    logging.Config    `yaml:"log"`
	HTTP   httpserver.Config `yaml:"http"`
	Broker broker.Config     `yaml:"broker"`
	// Sinks are the destinations routes deliver to, by name.
	Sinks map[string]sinkconfig.Config `yaml:"sinks"`
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
	// History keeps the bus's recent past for replay.
	History history.Config `yaml:"history"`

	// given holds the keys the file wrote, for Given.
	given map[string]bool
	// sources are the keys flags and variables set, for Sources.
	sources configcore.Sources
}

// Given reports whether the config file wrote key, a top-level key ("routes")
// or one a level below ("http.address"), rather than leaving its default.
// Merge keys and aliases count. With no file, nothing is given.
func (c *Config) Given(key string) bool { return c.given[key] }

// Sources are the keys that flags and FIREHOSE_* variables set, to name them
// in a start-up error about their value (a port in use).
func (c *Config) Sources() configcore.Sources { return c.sources }

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
		History:         history.DefaultConfig(),
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
// off, and neither http.tokens nor the section's own tokens are set. An
// address that is no address is http.address's problem only.
func (c *Config) openIntakes() []string {
	if !c.HTTP.ValidAddress() || !c.HTTP.BeyondLoopback() || c.HTTP.AllowUnauthenticated || len(c.HTTP.Tokens) > 0 {
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
	configcore.ValidateCommon(&p, c.ShutdownTimeout, c.Runtime)
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
	if s := c.History.Sink; c.History.Enabled && s != "" {
		if sc, ok := c.Sinks[s]; !ok || sc.Type != sinkconfig.TypeJetStream && sc.Type != sinkconfig.TypeNATS {
			p.Add("history.sink", "%q: name a jetstream (or nats) entry of sinks, whose JetStream servers then keep the history", s)
		}
	}
	p.Wrap("", router.ValidateAll(c.Routes, names))
	// A route whose sink could never take its messages (subjects outside
	// its JetStream stream's) would fill its outbox forever.
	p.Wrap("", router.ValidateSinks(c.Routes, sinkconfig.StreamSubjects(c.Sinks)))
	return p.Err()
}

// Load reads the file at path over the defaults. An empty path means no file:
// the defaults. Every problem in the file is reported at once, each naming its
// key. A relative broker.users_file is taken from the file's directory.
func Load(path string, opts Options) (*Config, error) {
	cfg := Default()
	if err := configcore.Load(path, &cfg, opts, Parse); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Parse decodes YAML over cfg, which holds the defaults, then loads the
// broker's users_file, a relative path being taken from opts.Dir. It reports
// every problem at once.
func Parse(data []byte, cfg *Config, opts Options) error {
	var err error
	cfg.given, cfg.sources, err = configcore.Parse(data, cfg, configcore.Users{Users: &cfg.Broker.Users, File: &cfg.Broker.UsersFile}, opts)
	return err
}

// The shared parts of the file, as cmd/broker reads them too.
type (
	Options  = configcore.Options
	Override = configcore.Override
	Runtime  = configcore.Runtime
)

// The listener addresses' override keys.
const (
	MQTTAddress = configcore.MQTTAddress
	WSAddress   = configcore.WSAddress
)

// EnvKeys maps each environment variable that overrides a key of the
// bridge's file to its key (see configcore.EnvKeys).
func EnvKeys() map[string]string { return configcore.EnvKeys(reflect.TypeFor[Config]()) }

// EnvName is the environment variable that overrides key.
func EnvName(key string) string { return configcore.EnvName(key) }

// EnvOverrides returns the overrides that lookupEnv's FIREHOSE_* variables
// make for the bridge's file, sorted by key.
func EnvOverrides(lookupEnv func(string) (string, bool)) []Override {
	return configcore.EnvOverrides(EnvKeys(), lookupEnv)
}
