// Package brokercli is cmd/broker's command line: its config file
// (brokerconfig) and app/brokeronly over the shared core in cli/clicore, and
// nothing else, so the broker binary links no adapter, sink or store.
package brokercli

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/app/brokeronly"
	"github.com/opsfirehose/firehose/cli/clicore"
	"github.com/opsfirehose/firehose/config/brokerconfig"
	"github.com/opsfirehose/firehose/config/configcore"
)

// Broker runs the standalone broker's command line and returns the exit code.
func Broker(env clicore.Env, args []string) int { return program().Main(env, args) }

func program() *clicore.Program {
	return &clicore.Program{
		Name:    "broker",
		What:    "the firehose MQTT broker alone (anonymous read-only, authenticated publishers)",
		EnvKeys: brokerconfig.EnvKeys,
		Load: func(path string, opts configcore.Options) (*clicore.Loaded, error) {
			cfg, err := brokerconfig.Load(path, opts)
			if err != nil {
				return nil, err
			}
			return &clicore.Loaded{Log: cfg.Log, HTTP: cfg.HTTP, Runtime: cfg.Runtime, Config: cfg, Sources: cfg.Sources()}, nil
		},
		Run: func(ctx context.Context, l *clicore.Loaded, log zerolog.Logger) error {
			return brokeronly.RunBroker(ctx, *l.Config.(*brokerconfig.Config), log)
		},
	}
}
