package httpserver

import (
	"fmt"
	"net"
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/listenaddr"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
)

// Config is the `http:` section: the one listener for every intake endpoint,
// health checks and metrics.
type Config struct {
	// Address is host:port. The default, 127.0.0.1:8080, is loopback only.
	Address string `yaml:"address"`
	// TLS serves HTTPS when set.
	TLS *tlsconfig.Files `yaml:"tls"`
	// Tokens are accepted by every intake endpoint. Each may have a name,
	// which is logged with the requests it authenticates.
	Tokens []Token `yaml:"tokens"`
	// AllowUnauthenticated lets the intake listen beyond loopback with no token.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
	// ReadTimeout bounds reading one request, body included.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds handling a request and writing its response,
	// counted from the end of its body (or of its headers, when the body is
	// not read), so a slow upload does not eat into it.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// LingerTime and LingerBytes bound the reading and discarding of a
	// request body after an answer given before it was read (a 413 over
	// max_body, a 401), so that a client that sends its whole body before
	// reading (Python's urllib, chef-client) reads the answer instead of a
	// connection reset. 0 turns lingering off.
	LingerTime  time.Duration `yaml:"linger_time"`
	LingerBytes bytesize.Size `yaml:"linger_bytes"`
}

// Token is one accepted intake token.
type Token struct {
	Name  string `yaml:"name"`
	Token string `yaml:"token" secret:"true"`
}

// DefaultConfig listens on loopback, where no token is needed.
func DefaultConfig() Config {
	return Config{
		Address:      "127.0.0.1:8080",
		ReadTimeout:  60 * time.Second,
		WriteTimeout: 60 * time.Second,
		LingerTime:   30 * time.Second,
		LingerBytes:  128 * bytesize.MiB,
	}
}

// Validate checks the section. The secure-by-default rule (beyond loopback,
// every intake needs a token or an explicit allow_unauthenticated) spans the
// adapters' sections too, so package config applies it, with BeyondLoopback.
func (c *Config) Validate() error {
	var p strictyaml.Problems
	if err := listenaddr.Check(c.Address, "127.0.0.1:8080"); err != nil {
		p.Add("address", "%v", err)
	}
	for i, t := range c.Tokens {
		if t.Token == "" {
			p.Add(fmt.Sprintf("tokens[%d].token", i), "required (or token_file)")
		}
	}
	if c.ReadTimeout <= 0 {
		p.Add("read_timeout", "must be positive")
	}
	if c.WriteTimeout <= 0 {
		p.Add("write_timeout", "must be positive")
	}
	if c.LingerTime < 0 {
		p.Add("linger_time", "must not be negative (0 turns lingering off)")
	}
	if c.LingerBytes < 0 {
		p.Add("linger_bytes", "must not be negative (0 turns lingering off)")
	}
	return p.Err()
}

// BeyondLoopback reports whether the listener can be reached from other
// machines. An address that does not parse counts as reachable; Validate
// reports it (ValidAddress).
func (c *Config) BeyondLoopback() bool {
	host, _, err := net.SplitHostPort(c.Address)
	return err != nil || !IsLoopback(host)
}

// ValidAddress reports whether Address can be listened on, so that a rule
// about where the intake listens is not applied to an address Validate
// already refuses: one bad value, one problem.
func (c *Config) ValidAddress() bool { return listenaddr.Check(c.Address, "") == nil }

// IsLoopback reports whether a listen host reaches only this machine. An empty
// host, 0.0.0.0 and :: listen everywhere; host names other than localhost are
// treated as reachable from elsewhere, since they may resolve anywhere.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
