// Package clicore is what the command lines of cmd/bridge (package cli) and
// cmd/broker share: flag parsing, config loading with the FIREHOSE_*
// overrides, the logger and signals, and the commands both have (run, check,
// health, passwd, version, help). A program is a Program: its config file,
// its run function and its own commands. clicore imports no adapter, so
// cmd/broker links none.
//
// Each subcommand is one Command in its program's table; --help lists the
// table, so a new subcommand is one entry.
package clicore

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

	"github.com/opsfirehose/firehose/config/configcore"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/internal/buildinfo"
	"github.com/opsfirehose/firehose/internal/cliflag"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/gctune"
	"github.com/opsfirehose/firehose/internal/logging"
	"github.com/opsfirehose/firehose/internal/terminal"
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

// Exit runs a program's command line, run, in the real environment (OS) on
// the process's arguments, and exits with its code: all a command's main does.
func Exit(run func(env Env, args []string) int) {
	env, stop := OS()
	code := run(env, os.Args[1:])
	stop()
	os.Exit(code)
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

// Loaded is a program's config file as the shared commands see it.
type Loaded struct {
	Log     logging.Config
	HTTP    httpserver.Config
	Runtime configcore.Runtime
	// Warnings, when set, lists what check warns about.
	Warnings func() []string
	// Config is the program's own config, for its Run.
	Config any
	// Sources name the flags and variables behind keys, in Run's error.
	Sources configcore.Sources
}

// Program is one binary.
type Program struct {
	// Name is the default name, when Env.Prog is empty.
	Name string
	// What it runs, for --help.
	What string
	// EnvKeys maps each FIREHOSE_* variable to the key of the program's
	// config file it overrides.
	EnvKeys func() map[string]string
	// Load reads the program's config file (none: path "") over its
	// defaults.
	Load func(path string, opts configcore.Options) (*Loaded, error)
	// Run runs the program until ctx is done.
	Run func(ctx context.Context, cfg *Loaded, log zerolog.Logger) error
	// Commands are the program's own, listed after the shared ones.
	Commands []Command

	commands []Command
}

// Main runs the program's command line and returns the exit code.
func (p *Program) Main(env Env, args []string) int {
	p.commands = append([]Command{p.runCommand(), p.checkCommand(), p.healthCommand(), passwdCommand(), versionCommand()}, p.Commands...)
	return p.main(env, args)
}

func (p *Program) main(env Env, args []string) int {
	prog := env.Prog
	if prog == "" {
		prog = p.Name
	}
	if env.LookupEnv == nil {
		env.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if env.Context == nil {
		env.Context = context.Background()
	}
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

func (p *Program) find(name string) *Command {
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
func (p *Program) help(env Env, prog string, args []string) int {
	switch {
	case len(args) == 0:
		p.usage(env.Stdout, prog)
		return ExitOK
	case args[0] == "env":
		p.envHelp(env.Stdout)
		return ExitOK
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		fmt.Fprintf(env.Stdout, "%s help [command|env] takes no flags.\n\n", prog)
		p.usage(env.Stdout, prog)
		return ExitOK
	}
	if c := p.find(args[0]); c != nil {
		return c.Run(env, prog, []string{"--help"})
	}
	fmt.Fprintf(env.Stderr, "%s help: unknown command %q\n", prog, args[0])
	return ExitUsage
}

func (p *Program) usage(w io.Writer, prog string) {
	fmt.Fprintf(w, "%s runs %s.\n\nUsage:\n  %s [run] [flags]\n  %s <command> [flags]\n\nCommands:\n", prog, p.What, prog, prog)
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
Flags of run (check takes the same; health --config, -c and --http-address):
`)
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(w)
	p.runFlags(fs, Env{LookupEnv: func(string) (string, bool) { return "", false }})
	fs.PrintDefaults()
	fmt.Fprintf(w, `  --version
    	print the version and exit

Settings come from, highest first: flags, FIREHOSE_* environment variables
(FIREHOSE_HTTP_ADDRESS is http.address; "%[1]s help env" lists them), the
config file (--config or $FIREHOSE_CONFIG), the defaults.
Run "%[1]s <command> --help" for a command's flags.
`, prog)
}

func (p *Program) envHelp(w io.Writer) {
	fmt.Fprint(w, `Environment variables that override config keys. Each is FIREHOSE_ and the key
in upper case, "." becoming "_". Values are read as YAML values: true, 8,
30s, [a, b]; anything else is a string, never ${VAR}-expanded. Flags win
over these, and these over the file. Keys inside lists and maps (sinks,
routes, users, tokens, listeners) have none; FIREHOSE_MQTT_ADDRESS and
FIREHOSE_WS_ADDRESS set the plain MQTT and WebSocket listeners' addresses.

`)
	keys := p.EnvKeys()
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

// settings are the flags that choose a config and override it.
type settings struct {
	fs                         *flag.FlagSet
	path                       *string
	httpAddr, mqttAddr, wsAddr *string
	lookupEnv                  func(string) (string, bool)
	syntaxOnly                 bool
	program                    *Program
}

// runFlags adds --config and the address flags to fs.
func (p *Program) runFlags(fs *flag.FlagSet, env Env) *settings {
	s := p.configFlags(fs, env)
	s.mqttAddr = fs.String("mqtt-address", "", "the MQTT (tcp, no TLS) listener's `host:port`; \"\" removes it ($FIREHOSE_MQTT_ADDRESS)")
	s.wsAddr = fs.String("ws-address", "", "the MQTT over WebSocket (no TLS) listener's `host:port`; \"\" removes it ($FIREHOSE_WS_ADDRESS)")
	return s
}

// configFlags adds --config and --http-address to fs: all that health
// reads of the config.
func (p *Program) configFlags(fs *flag.FlagSet, env Env) *settings {
	def, _ := env.LookupEnv("FIREHOSE_CONFIG")
	s := &settings{fs: fs, lookupEnv: env.LookupEnv, program: p}
	s.path = fs.String("config", def, "YAML config `file` (default $FIREHOSE_CONFIG; none means built-in defaults)")
	fs.StringVar(s.path, "c", def, "shorthand for --config")
	s.httpAddr = fs.String("http-address", "", "HTTP listener `host:port` (http.address; $FIREHOSE_HTTP_ADDRESS)")
	return s
}

// overrides are the FIREHOSE_* variables, then the flags given.
func (s *settings) overrides() []configcore.Override {
	ovs := configcore.EnvOverrides(s.program.EnvKeys(), s.lookupEnv)
	s.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "http-address":
			ovs = append(ovs, configcore.Override{Key: "http.address", Value: *s.httpAddr, Source: "--http-address"})
		case "mqtt-address":
			ovs = append(ovs, configcore.Override{Key: configcore.MQTTAddress, Value: *s.mqttAddr, Source: "--mqtt-address"})
		case "ws-address":
			ovs = append(ovs, configcore.Override{Key: configcore.WSAddress, Value: *s.wsAddr, Source: "--ws-address"})
		}
	})
	return ovs
}

func (s *settings) load(env Env, prog string) (*Loaded, bool) {
	cfg, err := s.program.Load(*s.path, configcore.Options{LookupEnv: env.LookupEnv, Overrides: s.overrides(), SyntaxOnly: s.syntaxOnly})
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, indent(err))
		return nil, false
	}
	return cfg, true
}

// NewFlagSet is the flag set of the command cmd of prog.
func NewFlagSet(env Env, prog, cmd string) *flag.FlagSet {
	return cliflag.NewFlagSet(prog+" "+cmd, env.Stderr)
}

// ParseFlags parses args; on false, the command exits with the code.
func ParseFlags(fs *flag.FlagSet, args []string) (int, bool) {
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

func (p *Program) runCommand() Command {
	return Command{Name: "run", Args: "[flags]", Summary: "run (the default; with no config: everything embedded, defaults)",
		Run: func(env Env, prog string, args []string) int {
			fs := NewFlagSet(env, prog, "run")
			s := p.runFlags(fs, env)
			if code, ok := ParseFlags(fs, args); !ok {
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
			if err := p.Run(env.Context, cfg, log); err != nil {
				fmt.Fprintf(env.Stderr, "%s: %v\n", prog, indent(cfg.Sources.Name(err)))
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
func applyRuntime(rt configcore.Runtime, lookupEnv func(string) (string, bool)) {
	if _, set := lookupEnv("GOGC"); !set {
		if rt.GCPercent < 0 {
			debug.SetGCPercent(rt.GCPercent)
		} else {
			// gc_percent while the live heap is small; less as it grows
			// (a big fleet's state), so the headroom stays near 64 MiB.
			gctune.Start(gctune.Config{MaxPercent: rt.GCPercent, MinPercent: min(100, rt.GCPercent), Headroom: 64 << 20})
		}
	}
	if _, set := lookupEnv("GOMEMLIMIT"); !set && rt.MemoryLimit > 0 {
		debug.SetMemoryLimit(int64(rt.MemoryLimit))
	}
}

func (p *Program) checkCommand() Command {
	return Command{Name: "check", Args: "[--config FILE] [--syntax-only]", Summary: "validate a config (with the environment and flags applied) and exit",
		Run: func(env Env, prog string, args []string) int {
			fs := NewFlagSet(env, prog, "check")
			s := p.runFlags(fs, env)
			fs.BoolVar(&s.syntaxOnly, "syntax-only", false, "check the file alone: unset ${VAR}s and missing files (secrets, certificates) are not problems")
			if code, ok := ParseFlags(fs, args); !ok {
				return code
			}
			cfg, ok := s.load(env, prog)
			if !ok {
				return ExitUsage
			}
			if cfg.Warnings != nil {
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
			fs := NewFlagSet(env, prog, "passwd")
			cost := fs.Int("cost", credentials.DefaultCost, "bcrypt `cost` (4-31); each step doubles the time a check takes")
			if code, ok := ParseFlags(fs, args); !ok {
				return code
			}
			password, err := readPassword(env)
			if err != nil {
				fmt.Fprintf(env.Stderr, "%s passwd: %v\n", prog, err)
				return ExitError
			}
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

// readPassword reads passwd's password: typed at a terminal, without echo;
// else the first line of stdin.
func readPassword(env Env) (string, error) {
	if f, ok := env.Stdin.(*os.File); ok && terminal.Is(f) {
		fmt.Fprint(env.Stderr, "Password: ")
		password, err := terminal.ReadSecret(env.Context, f)
		fmt.Fprintln(env.Stderr) // the Enter typed was not echoed either
		return password, err
	}
	line, err := bufio.NewReader(env.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func versionCommand() Command {
	return Command{Name: "version", Summary: "print the version (also --version)",
		Run: func(env Env, prog string, args []string) int {
			fs := NewFlagSet(env, prog, "version")
			if code, ok := ParseFlags(fs, args); !ok {
				return code
			}
			fmt.Fprintf(env.Stdout, "%s %s\n", prog, buildinfo.Get())
			return ExitOK
		}}
}
