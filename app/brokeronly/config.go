package brokeronly

import (
	"reflect"
	"time"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/config/configcore"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/logging"
	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// DefaultHTTPAddress is where cmd/broker serves /healthz, /readyz and
// /metrics when the config file does not set http.address: loopback, like
// the bridge's 127.0.0.1:8080, but on a port of its own, so that a bridge
// and a broker can run on one host with no config.
const DefaultHTTPAddress = "127.0.0.1:9883"

// Config is cmd/broker's file. Its sections are the bridge's, with the
// bridge's defaults, except http.address (DefaultHTTPAddress).
type Config struct {
	Log    logging.Config    `yaml:"log"`
	HTTP   httpserver.Config `yaml:"http"`
	Broker broker.Config     `yaml:"broker"`
	// ShutdownTimeout bounds a graceful shutdown, from the signal to exit.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Runtime tunes Go's garbage collector.
	Runtime configcore.Runtime `yaml:"runtime"`

	// The bridge's sections, in bridgeOnlyKeys' order: read as plain YAML
	// and not used. config's tests keep them equal to the bridge's
	// sections that are not above.
	Sinks     any `yaml:"sinks"`
	Routes    any `yaml:"routes"`
	DataDir   any `yaml:"data_dir"`
	Chef      any `yaml:"chef"`
	Ansible   any `yaml:"ansible"`
	Gerrit    any `yaml:"gerrit"`
	Launchpad any `yaml:"launchpad"`
	Subunit   any `yaml:"subunit"`
	ConfigDB  any `yaml:"configdb"`
	Dashboard any `yaml:"dashboard"`
	History   any `yaml:"history"`

	given   map[string]bool
	sources configcore.Sources
}

// bridgeOnlyKeys are the top-level keys of the bridge's file that cmd/broker
// does not run.
var bridgeOnlyKeys = []string{"sinks", "routes", "data_dir", "chef", "ansible", "gerrit", "launchpad", "subunit", "configdb", "dashboard", "history"}

// Default is what runs with no config file.
func Default() Config {
	h := httpserver.DefaultConfig()
	h.Address = DefaultHTTPAddress
	return Config{
		Log:             logging.DefaultConfig(),
		HTTP:            h,
		Broker:          broker.DefaultConfig(),
		ShutdownTimeout: 15 * time.Second,
		Runtime:         configcore.Runtime{GCPercent: 400},
	}
}

// Given reports whether the config file wrote key, as config.Config.Given.
func (c *Config) Given(key string) bool { return c.given[key] }

// Sources are the keys flags and variables set, as config.Config.Sources.
func (c *Config) Sources() configcore.Sources { return c.sources }

// BridgeOnly lists the bridge's sections the file gives, which cmd/broker
// ignores, in bridgeOnlyKeys' order.
func (c *Config) BridgeOnly() []string {
	var given []string
	for _, k := range bridgeOnlyKeys {
		if c.Given(k) {
			given = append(given, k)
		}
	}
	return given
}

// Validate checks the settings that belong to no one section.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	configcore.ValidateCommon(&p, c.ShutdownTimeout, c.Runtime)
	return p.Err()
}

// EnvKeys maps each FIREHOSE_* variable that overrides a key of this file
// to its key.
func EnvKeys() map[string]string { return configcore.EnvKeys(reflect.TypeFor[Config]()) }

// Load reads the file at path over the defaults, as config.Load does.
func Load(path string, opts configcore.Options) (*Config, error) {
	cfg := Default()
	if err := configcore.Load(path, &cfg, opts, Parse); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Parse decodes YAML over cfg, which holds the defaults, as config.Parse does.
func Parse(data []byte, cfg *Config, opts configcore.Options) error {
	var err error
	cfg.given, cfg.sources, err = configcore.Parse(data, cfg, configcore.Users{Users: &cfg.Broker.Users, File: &cfg.Broker.UsersFile}, opts)
	return err
}
