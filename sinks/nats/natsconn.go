package nats

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// NATSCredentials are the nats.go options that authenticate and secure a
// connection as the NATS sink cfg describes it: token, user and password,
// or a creds file, and TLS. Whoever else connects to a sink's servers (the
// history) uses them, so that a sink's credentials are read in one place.
func NATSCredentials(cfg Config) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	case cfg.Username != "":
		opts = append(opts, nats.UserInfo(cfg.Username, cfg.Password))
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLS != nil {
		tlsCfg, err := cfg.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		opts = append(opts, nats.Secure(tlsCfg))
	}
	return opts, nil
}
