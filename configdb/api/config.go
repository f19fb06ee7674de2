package api

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/topics"
)

// Config is the `configdb:` section of the bridge config.
type Config struct {
	// Enabled serves the API under /api/v1/config. Default true.
	Enabled bool `yaml:"enabled"`
	// TopicPrefix is the first level of ConfigDB's topics. Default "configdb".
	TopicPrefix string `yaml:"topic_prefix"`
	// DSN is a postgres:// URL (PostgreSQL, for several bridges), or the
	// path of a SQLite file. Empty means <data_dir>/configdb.sqlite. Secret:
	// a URL may hold a password (or use dsn_file).
	DSN string `yaml:"dsn" secret:"true"`
	// MaxConnections bounds the database connections (SQLite readers, or the
	// PostgreSQL pool). Default 8.
	MaxConnections int `yaml:"max_connections"`
	// MaxBody bounds a request body. Default 16MiB: an astute.yaml is large.
	MaxBody bytesize.Size `yaml:"max_body"`
	// CacheSize bounds the memory of cached effective documents. 0 turns the
	// cache off. Default 64MiB.
	CacheSize bytesize.Size `yaml:"cache_size"`
	// Auth configures who may read and write. With nothing configured every
	// request is allowed, which the bridge permits on loopback only.
	Auth AuthConfig `yaml:"auth"`
	// Outbox tunes how events that could not be published at once are retried.
	Outbox OutboxConfig `yaml:"outbox"`
}

// AuthConfig lists the accepted credentials. ConfigDB needs roles, so it has
// its own section instead of http.tokens.
type AuthConfig struct {
	// Tokens are accepted in X-Auth-Token (or Authorization: Bearer).
	Tokens []Token `yaml:"tokens"`
	// Users are accepted with HTTP Basic.
	Users []User `yaml:"users"`
	// Keystone, when set, validates the X-Auth-Token values that are not
	// static tokens against Keystone's v3 API.
	Keystone *KeystoneConfig `yaml:"keystone"`
}

// Role names; "reader" may GET, "writer" may do everything.
const (
	RoleReader = "reader"
	RoleWriter = "writer"
)

// Token is a static token with a role.
type Token struct {
	// Name is logged and recorded as the author of changes.
	Name  string `yaml:"name"`
	Token string `yaml:"token" secret:"true"`
	// Role is reader or writer. Default reader.
	Role string `yaml:"role"`
}

// User is an HTTP Basic account with a role.
type User struct {
	Username string `yaml:"username"`
	// PasswordHash is a bcrypt hash, as printed by `bridge passwd`.
	PasswordHash string `yaml:"password_hash" secret:"true"`
	// Role is reader or writer. Default reader.
	Role string `yaml:"role"`
}

// KeystoneConfig validates tokens with GET <url>/v3/auth/tokens.
type KeystoneConfig struct {
	// URL is Keystone's public endpoint, such as http://keystone:5000.
	URL string `yaml:"url"`
	// ServiceToken authenticates the validation requests. Empty: each token
	// validates itself, which Keystone's default policy allows.
	ServiceToken string `yaml:"service_token" secret:"true"`
	// WriterRoles and ReaderRoles map Keystone role names to ours.
	WriterRoles []string `yaml:"writer_roles"`
	ReaderRoles []string `yaml:"reader_roles"`
	// CacheTTL is how long a validated token is trusted without asking again
	// (never beyond its expiry). Default 5m.
	CacheTTL time.Duration `yaml:"cache_ttl"`
	// Timeout bounds one validation request. Default 5s.
	Timeout time.Duration `yaml:"timeout"`
}

// OutboxConfig tunes the retry of events that could not be published.
type OutboxConfig struct {
	// RetryMin and RetryMax bound the backoff between attempts while the bus
	// refuses events. Defaults 500ms and 30s.
	RetryMin time.Duration `yaml:"retry_min"`
	RetryMax time.Duration `yaml:"retry_max"`
	// PollInterval is how often the outbox is checked when nothing wakes the
	// relay: events left by a crash, or by another bridge on the same database.
	// Default 10s.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// DefaultConfig is ConfigDB on SQLite under the data directory, with no auth.
func DefaultConfig() Config {
	return Config{
		Enabled:        true,
		TopicPrefix:    topics.DefaultConfigDBPrefix,
		MaxConnections: 8,
		MaxBody:        16 * bytesize.MiB,
		CacheSize:      64 * bytesize.MiB,
		Outbox:         OutboxConfig{RetryMin: 500 * time.Millisecond, RetryMax: 30 * time.Second, PollInterval: 10 * time.Second},
	}
}

// AuthConfigured reports whether any credential is configured. With none the
// API is open, which the bridge allows only on a loopback listener.
func (c *Config) AuthConfigured() bool {
	return len(c.Auth.Tokens) > 0 || len(c.Auth.Users) > 0 || c.Auth.Keystone != nil
}

// SetDefaults gives a listed token its default role.
func (t *Token) SetDefaults() { t.Role = RoleReader }

// SetDefaults gives a listed user its default role.
func (u *User) SetDefaults() { u.Role = RoleReader }

// SetDefaults gives a keystone section its defaults.
func (k *KeystoneConfig) SetDefaults() {
	k.WriterRoles = []string{"admin"}
	k.ReaderRoles = []string{"reader", "member", "_member_"}
	k.CacheTTL = 5 * time.Minute
	k.Timeout = 5 * time.Second
}

func validRole(p *strictyaml.Problems, role string) {
	if role != RoleReader && role != RoleWriter {
		p.Add("role", "%q is not a role; use reader or writer", role)
	}
}

// Validate checks one token.
func (t *Token) Validate() error {
	var p strictyaml.Problems
	if t.Token == "" {
		p.Add("token", "required (or token_file)")
	}
	validRole(&p, t.Role)
	return p.Err()
}

// Validate checks one user.
func (u *User) Validate() error {
	var p strictyaml.Problems
	credentials.ValidateUser(&p, u.Username, u.PasswordHash)
	validRole(&p, u.Role)
	return p.Err()
}

// Validate checks the keystone section.
func (k *KeystoneConfig) Validate() error {
	var p strictyaml.Problems
	if u, err := url.Parse(k.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.Add("url", "%q is not an http(s) URL such as http://keystone:5000", k.URL)
	}
	if len(k.WriterRoles)+len(k.ReaderRoles) == 0 {
		p.Add("writer_roles", "at least one role must map to reader or writer")
	}
	if k.CacheTTL < 0 {
		p.Add("cache_ttl", "must not be negative")
	}
	if k.Timeout <= 0 {
		p.Add("timeout", "must be positive")
	}
	return p.Err()
}

// Validate checks the section.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if c.TopicPrefix != "" {
		if err := topics.ValidPrefix(c.TopicPrefix); err != nil {
			p.Add("topic_prefix", "%v", err)
		}
	}
	if strings.Contains(c.DSN, "://") && !configdb.IsPostgres(c.DSN) {
		p.Add("dsn", "only postgres:// (or postgresql://) URLs are supported, or the path of a SQLite file")
	} else if !configdb.IsPostgres(c.DSN) && strings.ContainsAny(c.DSN, "?#") {
		p.Add("dsn", "a SQLite file path may not contain ? or #")
	}
	if c.MaxConnections <= 0 {
		p.Add("max_connections", "must be positive")
	}
	if c.MaxBody <= 0 {
		p.Add("max_body", "must be positive")
	}
	if c.CacheSize < 0 {
		p.Add("cache_size", "must not be negative")
	}
	if c.Outbox.RetryMin <= 0 {
		p.Add("outbox.retry_min", "must be positive")
	}
	if c.Outbox.RetryMax < c.Outbox.RetryMin {
		p.Add("outbox.retry_max", "must be at least outbox.retry_min")
	}
	if c.Outbox.PollInterval <= 0 {
		p.Add("outbox.poll_interval", "must be positive")
	}
	names := map[string]int{}
	for i, u := range c.Auth.Users {
		if j, dup := names[u.Username]; dup {
			p.Add(fmt.Sprintf("auth.users[%d].username", i), "%q is also auth.users[%d]; define each user once", u.Username, j)
		}
		names[u.Username] = i
	}
	return p.Err()
}
