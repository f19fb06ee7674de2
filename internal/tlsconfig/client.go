package tlsconfig

import (
	"crypto/tls"

	"github.com/opsfirehose/firehose/internal/strictyaml"
)

// Client is the YAML shape of TLS settings for connecting out (to NATS, to an
// external MQTT broker).
type Client struct {
	// CAFile verifies the server; empty means the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile, when set, present a client certificate.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify turns off verification of the server. Only for tests.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Validate loads the files, so a bad path fails at start-up naming its key.
func (c *Client) Validate() error {
	var p strictyaml.Problems
	if (c.CertFile == "") != (c.KeyFile == "") {
		p.Add("cert_file", "cert_file and key_file go together")
	}
	if p.Err() == nil {
		if _, err := c.Config(); err != nil {
			p.Wrap("", err)
		}
	}
	return p.Err()
}

// Config returns the client-side *tls.Config.
func (c *Client) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify}
	if c.CAFile != "" {
		pool, err := certPool("ca_file", c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := keyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
