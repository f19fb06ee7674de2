// Package cli is cmd/bridge's command line: the bridge's config file and
// run, and the commands only the bridge has (ingest, ansible-plugin, sub,
// configdb), over the shared core in cli/clicore, which cmd/broker uses
// alone. cmd/bridge only calls Bridge, so the whole CLI can be tested
// in-process.
package cli

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/cli/clicore"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/configdb/configcli"
	"github.com/opsfirehose/firehose/ingest"
	"github.com/opsfirehose/firehose/subscribe"
)

// Bridge runs the bridge's command line and returns the exit code.
func Bridge(env clicore.Env, args []string) int { return bridgeProgram().Main(env, args) }

func bridgeProgram() *clicore.Program {
	return &clicore.Program{
		Name:    "bridge",
		What:    "the firehose bridge: HTTP intake, embedded MQTT broker and router",
		EnvKeys: config.EnvKeys,
		Load: func(path string, opts config.Options) (*clicore.Loaded, error) {
			cfg, err := config.Load(path, opts)
			if err != nil {
				return nil, err
			}
			return &clicore.Loaded{Log: cfg.Log, HTTP: cfg.HTTP, Runtime: cfg.Runtime, Config: cfg, Sources: cfg.Sources(),
				Warnings: func() []string {
					var out []string
					for _, w := range cfg.Warnings() {
						out = append(out, w.String())
					}
					return out
				}}, nil
		},
		Run: func(ctx context.Context, l *clicore.Loaded, log zerolog.Logger) error {
			b, err := app.New(ctx, *l.Config.(*config.Config), log)
			if err != nil {
				return err
			}
			return b.Run(ctx)
		},
		Commands: []clicore.Command{
			{Name: "ingest", Args: "gerrit|launchpad [flags]", Summary: "relay Gerrit's stream-events, or a Launchpad mail, to a running bridge",
				Run: func(env clicore.Env, _ string, args []string) int {
					return ingest.Run(env.Context, args, env.Stdin, env.Stdout, env.Stderr, env.LookupEnv)
				}},
			ansiblePluginCommand(),
			{Name: "sub", Args: "[FILTER...] [flags]", Summary: "print the bus's messages as they come: time, coloured topic, compact JSON",
				Run: func(env clicore.Env, _ string, args []string) int {
					return subscribe.Run(env.Context, args, env.Stdout, env.Stderr, env.LookupEnv)
				}},
			{Name: "configdb", Aliases: []string{"config"}, Args: "<command> [flags]", Summary: "the ConfigDB client (fuel2 config: get, set, override, env, comp...) against a running bridge",
				Run: func(env clicore.Env, _ string, args []string) int {
					return configcli.Run(env.Context, args, env.Stdin, env.Stdout, env.Stderr, env.LookupEnv)
				}},
		},
	}
}
