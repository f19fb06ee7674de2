package brokeronly

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/cli/clicore"
	"github.com/opsfirehose/firehose/config/configcore"
)

// Broker runs the standalone broker's command line and returns the exit code.
func Broker(env clicore.Env, args []string) int { return program().Main(env, args) }

func program() *clicore.Program {
	return &clicore.Program{
		Name:    "broker",
		What:    "the firehose MQTT broker alone (anonymous read-only, authenticated publishers)",
		EnvKeys: EnvKeys,
		Load: func(path string, opts configcore.Options) (*clicore.Loaded, error) {
			cfg, err := Load(path, opts)
			if err != nil {
				return nil, err
			}
			return &clicore.Loaded{Log: cfg.Log, HTTP: cfg.HTTP, Runtime: cfg.Runtime, Config: cfg, Sources: cfg.Sources()}, nil
		},
		Run: func(ctx context.Context, l *clicore.Loaded, log zerolog.Logger) error {
			return run(ctx, *l.Config.(*Config), log)
		},
	}
}
