// Package cli is the command line of both binaries: flag parsing, config
// loading, the logger and signals, then a call into app. cmd/bridge and
// cmd/broker only call Bridge or Broker, so the whole CLI can be tested
// in-process.
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
	"runtime/debug"
	"strings"
	"syscall"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/configdb/configcli"
	"github.com/opsfirehose/firehose/ingest"
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
}

// OS is the real environment, with SIGINT and SIGTERM cancelling the context.
func OS() (Env, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, Context: ctx}, stop
}

// Bridge runs the bridge's command line and returns the exit code.
func Bridge(env Env, args []string) int {
	if len(args) > 0 && args[0] == "ingest" {
		return ingest.Run(env.Context, args[1:], env.Stdin, env.Stdout, env.Stderr, env.LookupEnv)
	}
	if len(args) > 0 && args[0] == "sub" {
		return subscribe.Run(env.Context, args[1:], env.Stdout, env.Stderr, env.LookupEnv)
	}
	if len(args) > 0 && args[0] == "config" {
		return configcli.Run(env.Context, args[1:], env.Stdin, env.Stdout, env.Stderr, env.LookupEnv)
	}
	return dispatch(env, "bridge", args, func(ctx context.Context, cfg *config.Config, env Env) error {
		log := logging.New(cfg.Log, env.Stderr)
		b, err := app.New(*cfg, log)
		if err != nil {
			return err
		}
		return b.Run(ctx)
	})
}

// Broker runs the standalone broker's command line and returns the exit code.
func Broker(env Env, args []string) int {
	return dispatch(env, "broker", args, func(ctx context.Context, cfg *config.Config, env Env) error {
		return app.RunBroker(ctx, *cfg, logging.New(cfg.Log, env.Stderr))
	})
}

type runFunc func(ctx context.Context, cfg *config.Config, env Env) error

func dispatch(env Env, prog string, args []string, run runFunc) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCmd(env, prog, args, run)
	case "check":
		return checkCmd(env, prog, args)
	case "passwd":
		return passwdCmd(env, prog, args)
	case "version":
		fmt.Fprintf(env.Stdout, "%s %s\n", prog, Version())
		return ExitOK
	case "help":
		usage(env.Stdout, prog)
		return ExitOK
	default:
		fmt.Fprintf(env.Stderr, "%s: unknown command %q\n\n", prog, cmd)
		usage(env.Stderr, prog)
		return ExitUsage
	}
}

func usage(w io.Writer, prog string) {
	what := "the firehose bridge: HTTP intake, embedded MQTT broker and router"
	extra := `  %[1]s ingest gerrit|launchpad
                                 relay Gerrit's stream-events, or a Launchpad mail, to a running
                                 bridge ("%[1]s ingest help" for its flags)
  %[1]s config <command> ...    the ConfigDB client (fuel2 config) against a running bridge
                                 ("%[1]s config help")
  %[1]s sub [FILTER...]         print the bus's messages as they come ("%[1]s sub --help")
`
	if prog == "broker" {
		what = "the firehose MQTT broker alone (anonymous read-only, authenticated publishers)"
		extra = ""
	}
	fmt.Fprintf(w, `%s runs %s.

Usage:
  %[1]s [run] [--config FILE]   run (with no config: everything embedded, defaults)
  %[1]s check --config FILE     validate a config file and exit
  %[1]s passwd [--cost N]       read a password on stdin, print its bcrypt hash for broker.users
  %[1]s version                 print the version
`+extra+`
The config file may also be given in $FIREHOSE_CONFIG.
`, prog, what)
}

// configFlag adds --config (and -c) to fs, defaulting to $FIREHOSE_CONFIG.
func configFlag(fs *flag.FlagSet, env Env) *string {
	def, _ := env.LookupEnv("FIREHOSE_CONFIG")
	path := fs.String("config", def, "YAML config `file` (default $FIREHOSE_CONFIG; none means built-in defaults)")
	fs.StringVar(path, "c", def, "shorthand for --config")
	return path
}

func newFlagSet(env Env, prog, cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return ExitUsage, false
	}
	return 0, true
}

func loadConfig(env Env, prog, path string) (*config.Config, bool) {
	cfg, err := config.Load(path, config.Options{LookupEnv: env.LookupEnv})
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, indent(err))
		return nil, false
	}
	return cfg, true
}

// indent puts each problem of a multi-line error on its own indented line.
func indent(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n")
}

func runCmd(env Env, prog string, args []string, run runFunc) int {
	fs := newFlagSet(env, prog, "run")
	path := configFlag(fs, env)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, ok := loadConfig(env, prog, *path)
	if !ok {
		return ExitUsage
	}
	applyRuntime(cfg.Runtime, env.LookupEnv)
	if err := run(env.Context, cfg, env); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", prog, indent(err))
		return ExitError
	}
	return ExitOK
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

func checkCmd(env Env, prog string, args []string) int {
	fs := newFlagSet(env, prog, "check")
	path := configFlag(fs, env)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if _, ok := loadConfig(env, prog, *path); !ok {
		return ExitUsage
	}
	name := *path
	if name == "" {
		name = "built-in defaults"
	}
	fmt.Fprintf(env.Stdout, "%s: config OK (%s)\n", prog, name)
	return ExitOK
}

func passwdCmd(env Env, prog string, args []string) int {
	fs := newFlagSet(env, prog, "passwd")
	cost := fs.Int("cost", bcrypt.DefaultCost, "bcrypt `cost` (4-31); each step doubles the time a check takes")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if f, ok := env.Stdin.(*os.File); ok && isTerminal(f) {
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
	hash, err := bcrypt.GenerateFromPassword([]byte(password), *cost)
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s passwd: %v\n", prog, err)
		return ExitUsage
	}
	fmt.Fprintln(env.Stdout, string(hash))
	return ExitOK
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Version is the module version the binary was built from, or "devel".
func Version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
