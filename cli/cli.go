// Package cli is the command line of both binaries: flag parsing, config
// loading, the logger and signals, then a call into app. cmd/bridge and
// cmd/broker only call Bridge or Broker, so the whole CLI can be tested
// in-process.
//
// Each subcommand is one Command in its program's table (bridgeCommands,
// brokerCommands); --help lists the table, so a new subcommand is one entry.
package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/configdb/configcli"
	"github.com/opsfirehose/firehose/ingest"
	"github.com/opsfirehose/firehose/internal/buildinfo"
	"github.com/opsfirehose/firehose/internal/cliflag"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/terminal"
	"github.com/opsfirehose/firehose/logging"
	"github.com/opsfirehose/firehose/subscribe"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the program failed while running
	ExitUsage = 2 // bad flags or a bad config: nothing was started
)

// Env is the process environment a command runs in; tests substitute it.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
	// Context is cancelled to stop a running command, as SIGINT/SIGTERM do.
	Context context.Context
	// Prog is the name the program was called by, for messages ("bridge",
	// or "firehose" as the packages install it); empty means the default.
	Prog string
}

// OS is the real environment, with SIGINT and SIGTERM cancelling the context.
func OS() (Env, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, Context: ctx,
		Prog: filepath.Base(os.Args[0])}, stop
}

// Command is one subcommand of a program.
type Command struct {
	Name    string
	Aliases []string
	// Args is the synopsis after the name, for --help.
	Args string
	// Summary says what it does, in one line.
	Summary string
	// Run runs it with the arguments after its name and returns the exit code.
	Run func(env Env, prog string, args []string) int
}

// program is one binary: its commands, "run" first.
type program struct {
	name     string // the default name, when Env.Prog is empty
	what     string
	commands []Command
	// defaultHTTP is the HTTP address health asks when the config gives
	// none.
	defaultHTTP string
}

// Bridge runs the bridge's command line and returns the exit code.
func Bridge(env Env, args []string) int { return bridgeProgram().main(env, args) }

// Broker runs the standalone broker's command line and returns the exit code.
func Broker(env Env, args []string) int { return brokerProgram().main(env, args) }

func bridgeProgram() *program {
	return &program{
		name:        "bridge",
		what:        "the firehose bridge: HTTP intake, embedded MQTT broker and router",
		defaultHTTP: "", // http.address, whose default is the bridge's
		commands: []Command{
			runCommand(func(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
				b, err := app.New(ctx, *cfg, log)
				if err != nil {
					return err
				}
				return b.Run(ctx)
			}),
			checkCommand(),
			healthCommand(),
			passwdCommand(),
			versionCommand(),
			{Name: "ingest", Args: "gerrit|launchpad [flags]", Summary: "relay Gerrit's stream-events, or a Launchpad mail, to a running bridge",
				Run: func(env Env, _ string, args []string) int {
					return ingest.Run(env.Context, args, env.Stdin, env.Stdout, env.Stderr, env.LookupEnv)
				}},
			ansiblePluginCommand(),
			{Name: "sub", Args: "[FILTER...] [flags]", Summary: "print the bus's messages as they come: time, coloured topic, compact JSON",
				Run: func(env Env, _ string, args []string) int {
					return subscribe.Run(env.Context, args, env.Stdout, env.Stderr, env.LookupEnv)
				}},
			{Name: "configdb", Aliases: []string{"config"}, Args: "<command> [flags]", Summary: "the ConfigDB client (fuel2 config: get, set, override, env, comp...) against a running bridge",
				Run: func(env Env, _ string, args []string) int {
					return configcli.Run(env.Context, args, env.Stdin, env.Stdout, env.Stderr, env.LookupEnv)
				}},
		},
	}
}

func brokerProgram() *program {
	return &program{
		name:        "broker",
		what:        "the firehose MQTT broker alone (anonymous read-only, authenticated publishers)",
		defaultHTTP: app.DefaultBrokerHTTPAddress,
		commands: []Command{
			runCommand(func(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
				return app.RunBroker(ctx, *cfg, log)
			}),
			checkCommand(),
			healthCommand(),
			passwdCommand(),
			versionCommand(),
		},
	}
}

func (p *program) main(env Env, args []string) int {
	prog := env.Prog
	if prog == "" {
		prog = p.name
	}
	if env.LookupEnv == nil {
		env.LookupEnv = func(string) (string, bool) { return "", false }
	}
	env.Context = withProgram(env.Context, p)
	if len(args) == 0 {
		return p.commands[0].Run(env, prog, nil)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		p.usage(env.Stdout, prog)
		return ExitOK
	case "help":
		return p.help(env, prog, args[1:])
	case "-version", "--version":
		return p.find("version").Run(env, prog, nil)
	}
	if strings.HasPrefix(args[0], "-") {
		return p.commands[0].Run(env, prog, args)
	}
	if c := p.find(args[0]); c != nil {
		return c.Run(env, prog, args[1:])
	}
	fmt.Fprintf(env.Stderr, "%s: unknown command %q\n\n", prog, args[0])
	p.usage(env.Stderr, prog)
	return ExitUsage
}

func (p *program) find(name string) *Command {
	for i, c := range p.commands {
		if c.Name == name {
			return &p.commands[i]
		}
		for _, a := range c.Aliases {
			if a == name {
				return &p.commands[i]
			}
		}
	}
	return nil
}

// help is `help`, `help <command>` (its --help) and `help env`.
func (p *program) help(env Env, prog string, args []string) int {
	switch {
	case len(args) == 0:
		p.usage(env.Stdout, prog)
		return ExitOK
	case args[0] == "env":
		envHelp(env.Stdout)
		return ExitOK
	}
	if c := p.find(args[0]); c != nil {
		return c.Run(env, prog, []string{"--help"})
	}
	fmt.Fprintf(env.Stderr, "%s help: unknown command %q\n", prog, args[0])
	return ExitUsage
}

func (p *program) usage(w io.Writer, prog string) {
	fmt.Fprintf(w, "%s runs %s.\n\nUsage:\n  %s [run] [flags]\n  %s <command> [flags]\n\nCommands:\n", prog, p.what, prog, prog)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range p.commands {
		name := c.Name
		if len(c.Aliases) > 0 {
			name += " (" + strings.Join(c.Aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "  %s %s\t%s\n", name, c.Args, c.Summary)
	}
	fmt.Fprintf(tw, "  help [command|env]\tthis text, a command's flags, or the FIREHOSE_* variables\n")
	_ = tw.Flush()
	fmt.Fprintf(w, `
Flags of run (check and health take the same):
`)
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(w)
	runFlags(fs, Env{LookupEnv: func(string) (string, bool) { return "", false }})
	fs.PrintDefaults()
	fmt.Fprintf(w, `  --version
    	print the version and exit

Settings come from, highest first: flags, FIREHOSE_* environment variables
(FIREHOSE_HTTP_ADDRESS is http.address; "%[1]s help env" lists them), the
config file (--config or $FIREHOSE_CONFIG), the defaults.
Run "%[1]s <command> --help" for a command's flags.
`, prog)
}

func envHelp(w io.Writer) {
	fmt.Fprint(w, `Environment variables that override config keys. Each is FIREHOSE_ and the key
in upper case, "." becoming "_". Values are read as YAML values: true, 8,
30s, [a, b]; anything else is a string, never ${VAR}-expanded. Flags win
over these, and these over the file. Keys inside lists and maps (sinks,
routes, users, tokens, listeners) have none; FIREHOSE_MQTT_ADDRESS and
FIREHOSE_WS_ADDRESS set the plain MQTT and WebSocket listeners' addresses.

`)
	keys := config.EnvKeys()
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t%s\n", n, keys[n])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nAlso read: FIREHOSE_CONFIG (the config file), GOGC and GOMEMLIMIT (over runtime.*).\n")
}

type programKey struct{}

// withProgram lets a command find its program (health needs its default
// HTTP address) without a global.
func withProgram(ctx context.Context, p *program) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, programKey{}, p)
}

func programOf(ctx context.Context) *program {
	p, _ := ctx.Value(programKey{}).(*program)
	return p
}

// settings are the flags that choose a config and override it.
type settings struct {
	fs                         *flag.FlagSet
	path                       *string
	httpAddr, mqttAddr, wsAddr *string
	lookupEnv                  func(string) (string, bool)
	syntaxOnly                 bool
}

// runFlags adds --config and the address flags to fs.
func runFlags(fs *flag.FlagSet, env Env) *settings {
	def, _ := env.LookupEnv("FIREHOSE_CONFIG")
	s := &settings{fs: fs, lookupEnv: env.LookupEnv}
	s.path = fs.String("config", def, "YAML config `file` (default $FIREHOSE_CONFIG; none means built-in defaults)")
	fs.StringVar(s.path, "c", def, "shorthand for --config")
	s.httpAddr = fs.String("http-address", "", "HTTP listener `host:port` (http.address; $FIREHOSE_HTTP_ADDRESS)")
	s.mqttAddr = fs.String("mqtt-address", "", "the MQTT (tcp, no TLS) listener's `host:port`; \"\" removes it ($FIREHOSE_MQTT_ADDRESS)")
	s.wsAddr = fs.String("ws-address", "", "the MQTT over WebSocket (no TLS) listener's `host:port`; \"\" removes it ($FIREHOSE_WS_ADDRESS)")
	return s
}

// overrides are the FIREHOSE_* variables, then the flags given.
func (s *settings) overrides() []config.Override {
	ovs := config.EnvOverrides(s.lookupEnv)
	s.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "http-address":
			ovs = append(ovs, config.Override{Key: "http.address", Value: *s.httpAddr, Source: "--http-address"})
		case "mqtt-address":
			ovs = append(ovs, config.Override{Key: config.MQTTAddress, Value: *s.mqttAddr, Source: "--mqtt-address"})
		case "ws-address":
			ovs = append(ovs, config.Override{Key: config.WSAddress, Value: *s.wsAddr, Source: "--ws-address"})
		}
	})
	return ovs
}

func (s *settings) load(env Env, prog string) (*config.Config, bool) {
	cfg, err := config.Load(*s.path, config.Options{LookupEnv: env.LookupEnv, Overrides: s.overrides(), SyntaxOnly: s.syntaxOnly})
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, indent(err))
		return nil, false
	}
	return cfg, true
}

func newFlagSet(env Env, prog, cmd string) *flag.FlagSet {
	return cliflag.NewFlagSet(prog+" "+cmd, env.Stderr)
}

func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	return cliflag.Parse(fs, args, ExitUsage)
}

// indent puts each problem of a multi-line error on its own indented line.
func indent(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n")
}

type runFunc func(ctx context.Context, cfg *config.Config, log zerolog.Logger) error

func runCommand(run runFunc) Command {
	return Command{Name: "run", Args: "[flags]", Summary: "run (the default; with no config: everything embedded, defaults)",
		Run: func(env Env, prog string, args []string) int {
			fs := newFlagSet(env, prog, "run")
			s := runFlags(fs, env)
			if code, ok := parseFlags(fs, args); !ok {
				return code
			}
			cfg, ok := s.load(env, prog)
			if !ok {
				return ExitUsage
			}
			applyRuntime(cfg.Runtime, env.LookupEnv)
			log := logging.New(cfg.Log, env.Stderr)
			in := buildinfo.Get()
			log.Info().Str("version", in.Version).Str("commit", in.Commit).Str("go", in.GoVersion).
				Str("config", orDefaults(*s.path)).Msg("starting " + prog)
			if err := run(env.Context, cfg, log); err != nil {
				fmt.Fprintf(env.Stderr, "%s: %v\n", prog, indent(err))
				return ExitError
			}
			return ExitOK
		}}
}

func orDefaults(path string) string {
	if path == "" {
		return "built-in defaults"
	}
	return path
}

// applyRuntime sets the collector's targets from the config, unless the
// operator set GOGC or GOMEMLIMIT, which the Go runtime has already applied.
func applyRuntime(rt config.Runtime, lookupEnv func(string) (string, bool)) {
	if _, set := lookupEnv("GOGC"); !set {
		debug.SetGCPercent(rt.GCPercent)
	}
	if _, set := lookupEnv("GOMEMLIMIT"); !set && rt.MemoryLimit > 0 {
		debug.SetMemoryLimit(int64(rt.MemoryLimit))
	}
}

func checkCommand() Command {
	return Command{Name: "check", Args: "[--config FILE] [--syntax-only]", Summary: "validate a config (with the environment and flags applied) and exit",
		Run: func(env Env, prog string, args []string) int {
			fs := newFlagSet(env, prog, "check")
			s := runFlags(fs, env)
			fs.BoolVar(&s.syntaxOnly, "syntax-only", false, "check the file alone: unset ${VAR}s and missing files (secrets, certificates) are not problems")
			if code, ok := parseFlags(fs, args); !ok {
				return code
			}
			cfg, ok := s.load(env, prog)
			if !ok {
				return ExitUsage
			}
			if prog == "bridge" { // the warnings are about routes and intakes, which cmd/broker has not
				for _, w := range cfg.Warnings() {
					fmt.Fprintf(env.Stderr, "%s: warning: %s\n", prog, w)
				}
			}
			what := "config OK"
			if s.syntaxOnly {
				what = "config syntax OK"
			}
			fmt.Fprintf(env.Stdout, "%s: %s (%s)\n", prog, what, orDefaults(*s.path))
			return ExitOK
		}}
}

func passwdCommand() Command {
	return Command{Name: "passwd", Args: "[--cost N]", Summary: "read a password on stdin, print its bcrypt hash for broker.users",
		Run: func(env Env, prog string, args []string) int {
			fs := newFlagSet(env, prog, "passwd")
			cost := fs.Int("cost", credentials.DefaultCost, "bcrypt `cost` (4-31); each step doubles the time a check takes")
			if code, ok := parseFlags(fs, args); !ok {
				return code
			}
			if f, ok := env.Stdin.(*os.File); ok && terminal.Is(f) {
				fmt.Fprint(env.Stderr, "Password (echoed): ")
			}
			line, err := bufio.NewReader(env.Stdin).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				fmt.Fprintf(env.Stderr, "%s passwd: %v\n", prog, err)
				return ExitError
			}
			password := strings.TrimRight(line, "\r\n")
			if password == "" {
				fmt.Fprintf(env.Stderr, "%s passwd: empty password; pipe one in, e.g. `printf %%s \"$PASS\" | %s passwd`\n", prog, prog)
				return ExitUsage
			}
			hash, err := credentials.Hash([]byte(password), *cost)
			if err != nil {
				fmt.Fprintf(env.Stderr, "%s passwd: %v\n", prog, err)
				return ExitUsage
			}
			fmt.Fprintln(env.Stdout, string(hash))
			return ExitOK
		}}
}

func versionCommand() Command {
	return Command{Name: "version", Summary: "print the version (also --version)",
		Run: func(env Env, prog string, args []string) int {
			fs := newFlagSet(env, prog, "version")
			if code, ok := parseFlags(fs, args); !ok {
				return code
			}
			fmt.Fprintf(env.Stdout, "%s %s\n", prog, buildinfo.Get())
			return ExitOK
		}}
}

// Version is the version the binary was built as; see internal/buildinfo.
func Version() string { return buildinfo.Version() }
