package app

import (
	"context"
	"net/http"
	"time"

	"github.com/opsfirehose/firehose/adapters/ansible"
	"github.com/opsfirehose/firehose/adapters/chef"
	"github.com/opsfirehose/firehose/adapters/gerrit"
	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/adapters/launchpad"
	"github.com/opsfirehose/firehose/adapters/subunit"
	"github.com/opsfirehose/firehose/config"
	configdbapi "github.com/opsfirehose/firehose/configdb/api"
	"github.com/opsfirehose/firehose/httpserver"
)

// endpoints is what every adapter gives the bridge: its routes.
type endpoints interface {
	Register(mux interface{ Handle(string, http.Handler) })
}

// registerAdapters builds every enabled intake adapter and adds its
// endpoints to the HTTP server.
func (b *Bridge) registerAdapters(ctx context.Context) error {
	cfg := b.cfg
	adapters := []struct {
		name    string
		section intake.Config
		build   func(intake.Options) (endpoints, error)
	}{
		{"chef", cfg.Chef.Config, func(o intake.Options) (endpoints, error) {
			h, err := chef.New(cfg.Chef, chef.Options{Options: o, DataDir: cfg.DataDir})
			b.chef = h // it has work to start and state (the rollout store) to close
			return h, err
		}},
		{"ansible", cfg.Ansible.Config, func(o intake.Options) (endpoints, error) { return ansible.New(cfg.Ansible, o) }},
		{"gerrit", cfg.Gerrit.Config, func(o intake.Options) (endpoints, error) { return gerrit.New(cfg.Gerrit, o) }},
		{"launchpad", cfg.Launchpad, func(o intake.Options) (endpoints, error) { return launchpad.New(cfg.Launchpad, o) }},
		{"subunit", cfg.Subunit.Config, func(o intake.Options) (endpoints, error) { return subunit.New(cfg.Subunit, o) }},
	}
	for _, a := range adapters {
		if !a.section.Enabled {
			continue
		}
		h, err := a.build(intake.Options{
			Publisher:  b.publisher,
			Logger:     b.log.With().Str("adapter", a.name).Logger(),
			Tokens:     b.adapterTokens(a.section.Tokens),
			Registerer: b.registry,
		})
		if err != nil {
			return err
		}
		h.Register(b.http)
	}
	if cfg.ConfigDB.Enabled {
		// Open connects and runs migrations; PostgreSQL may be slow to
		// answer, but a signal (ctx) must not wait for it.
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		h, err := configdbapi.Open(ctx, cfg.ConfigDB, configdbapi.Options{
			Options: intake.Options{
				Publisher: b.publisher, Logger: b.log.With().Str("adapter", "configdb").Logger(),
				Tokens: b.http.Tokens(), Registerer: b.registry,
			},
			DataDir: cfg.DataDir,
		})
		cancel()
		if err != nil {
			return err
		}
		b.configdb = h
		h.Register(b.http)
	}
	return nil
}

// adapterTokens are an endpoint's effective tokens: its section's own when
// set, which replace http.tokens there, else http.tokens.
func (b *Bridge) adapterTokens(own []httpserver.Token) *httpserver.Tokens {
	if len(own) > 0 {
		return httpserver.NewTokens(own)
	}
	return b.http.Tokens()
}

// adapterTopicPrefixes are the topic prefixes of the enabled adapters: in
// external mode, the bridge that accepts such a message routes it, and the
// router subscribers leave it alone.
func adapterTopicPrefixes(cfg config.Config) []string {
	var out []string
	for _, a := range []intake.Config{cfg.Chef.Config, cfg.Ansible.Config, cfg.Gerrit.Config, cfg.Launchpad, cfg.Subunit.Config} {
		if a.Enabled {
			out = append(out, a.TopicPrefix)
		}
	}
	if cfg.ConfigDB.Enabled {
		out = append(out, cfg.ConfigDB.TopicPrefix)
	}
	return out
}
