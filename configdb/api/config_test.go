package api

import (
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// exampleSection is the configdb section of config.example.yaml, as the
// report hands it to the lead; it must decode as written.
const exampleSection = `
# The ConfigDB API (Fuel's tuning-box, /api/v1/config): components, resource
# definitions, environments with hierarchy levels, and per-level values and
# overrides that Puppet's Hiera reads merged. Every write is published on
# configdb/<env>/<resource>/<values|overrides>[/<level>/<value>]...
enabled: true
topic_prefix: configdb
# A postgres:// URL (production, and several bridges on one database), or a
# SQLite file. Empty: <data_dir>/configdb.sqlite. Secret (dsn_file works).
dsn: ${FIREHOSE_CONFIGDB_DSN:-}
# Database connections: SQLite readers, or the PostgreSQL pool.
max_connections: 8
# A node's astute.yaml is large; bigger bodies get 413.
max_body: 16MiB
# Memory for merged (?effective) documents, which Hiera reads on every
# catalog compilation; 0 turns the cache off.
cache_size: 64MiB
# Who may read and write. With nothing here http.tokens apply, each as a
# writer; with no http.tokens either, the API is open (loopback only).
# reader may GET; writer may do everything. The name is the author recorded
# in each version's history and event.
auth:
  tokens:                        # X-Auth-Token, or Authorization: Bearer
    - name: deployer
      token: ${FIREHOSE_CONFIGDB_DEPLOYER_TOKEN}   # secret
      role: writer
    - name: hiera
      token: ${FIREHOSE_CONFIGDB_HIERA_TOKEN}      # secret
      role: reader
  # HTTP Basic, with bcrypt hashes from "bridge passwd".
  # users:
  #   - username: fuel
  #     password_hash_file: /run/secrets/configdb-fuel-hash
  #     role: writer
  # Keystone tokens in X-Auth-Token, validated with GET /v3/auth/tokens.
  # keystone:
  #   url: http://keystone.example.com:5000
  #   service_token_file: /run/secrets/keystone-service-token  # or none: tokens validate themselves
  #   writer_roles: [admin]
  #   reader_roles: [reader, member, _member_]
  #   cache_ttl: 5m               # a valid token is trusted this long (never past its expiry)
  #   timeout: 5s
# An event is committed with its change; when the bus refuses it the write
# still succeeds and the event is retried from the database until published.
outbox:
  retry_min: 500ms
  retry_max: 30s
  # How often to look for events left by a crash or by another bridge.
  poll_interval: 10s
`

func decode(t *testing.T, doc string, env map[string]string) (Config, error) {
	t.Helper()
	cfg := DefaultConfig()
	err := strictyaml.Decode([]byte(doc), &cfg, strictyaml.Options{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		ReadFile:  func(name string) ([]byte, error) { return []byte("secret-from-" + name + "\n"), nil },
	})
	return cfg, err
}

func TestConfigExample(t *testing.T) {
	cfg, err := decode(t, exampleSection, map[string]string{"FIREHOSE_CONFIGDB_DEPLOYER_TOKEN": "d", "FIREHOSE_CONFIGDB_HIERA_TOKEN": "h"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DSN != "" || cfg.MaxBody != 16*bytesize.MiB || cfg.CacheSize != 64*bytesize.MiB || !cfg.AuthConfigured() {
		t.Fatalf("%+v", cfg)
	}
	if got := cfg.Auth.Tokens; got[0].Token != "d" || got[0].Role != RoleWriter || got[1].Token != "h" || got[1].Role != RoleReader {
		t.Fatalf("tokens %+v", got)
	}
	if got := DatabaseDSN(cfg, "/var/lib/firehose"); got != "/var/lib/firehose/configdb.sqlite" {
		t.Fatalf("default DSN %q", got)
	}
	if _, err := decode(t, exampleSection, map[string]string{"FIREHOSE_CONFIGDB_DEPLOYER_TOKEN": "d"}); err == nil ||
		!strings.Contains(err.Error(), "auth.tokens[1].token: environment variable FIREHOSE_CONFIGDB_HIERA_TOKEN is not set") {
		t.Fatalf("a missing variable: %v", err)
	}

	// The commented-out parts, uncommented.
	cfg, err = decode(t, `
dsn_file: /run/secrets/configdb-dsn
auth:
  users:
    - username: fuel
      password_hash: "$2a$10$2oRDsqtLXm5nfbTvXIgDXeqWR7FT9IZ0DyuLTHjcMxD3jhEvFNbTS"
      role: writer
  keystone:
    url: http://keystone.example.com:5000
    service_token_file: /run/secrets/keystone-service-token
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DSN != "secret-from-/run/secrets/configdb-dsn" || cfg.Auth.Users[0].Role != RoleWriter ||
		cfg.Auth.Keystone.CacheTTL != 5*time.Minute || cfg.Auth.Keystone.ServiceToken == "" || len(cfg.Auth.Keystone.ReaderRoles) != 3 {
		t.Fatalf("%+v %+v", cfg, cfg.Auth.Keystone)
	}
	cfg, err = decode(t, "dsn: postgres://configdb:pw@db.example.com/configdb\n", nil)
	if err != nil || DatabaseDSN(cfg, "data") != "postgres://configdb:pw@db.example.com/configdb" {
		t.Fatalf("%q %v", cfg.DSN, err)
	}
	// No section at all: ConfigDB on SQLite with no auth.
	cfg, err = decode(t, "{}\n", nil)
	if err != nil || !cfg.Enabled || cfg.AuthConfigured() || cfg.TopicPrefix != "configdb" {
		t.Fatalf("%+v %v", cfg, err)
	}
}

func TestConfigProblems(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"dsn: mysql://db/configdb\n", "dsn: only postgres://"},
		{"dsn: /var/lib/x.sqlite?mode=ro\n", "dsn: a SQLite file path"},
		{"databse: x\n", "databse"},
		{"max_connections: 0\n", "max_connections: must be positive"},
		{"auth:\n  tokens:\n    - name: x\n      token: t\n      role: admin\n", "auth.tokens[0].role"},
		{"auth:\n  users:\n    - username: u\n      password_hash: plain\n", "auth.users[0].password_hash: not a bcrypt hash"},
		{"auth:\n  keystone:\n    url: keystone:5000\n", "auth.keystone.url"},
		{"outbox:\n  retry_min: 1s\n  retry_max: 10ms\n", "outbox.retry_max"},
	} {
		_, err := decode(t, c.doc, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.doc, err, c.want)
		}
	}
}
