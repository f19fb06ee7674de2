package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opsfirehose/firehose/adapters/ansible"
	"github.com/opsfirehose/firehose/cli/clicore"
)

// ansiblePluginCommand is `ansible-plugin`, the path locator for control
// nodes that do not use collections, as ARA's `python3 -m
// ara.setup.callback_plugins` is: it writes the callback plugin built into
// this binary to a directory (once, and again when it changed) and prints
// that directory, for
//
//	export ANSIBLE_CALLBACK_PLUGINS=$(bridge ansible-plugin)
func ansiblePluginCommand() clicore.Command {
	return clicore.Command{Name: "ansible-plugin", Args: "[--dir DIR] [--env]", Summary: "put the Ansible callback plugin in a directory and print it, for ANSIBLE_CALLBACK_PLUGINS",
		Run: func(env clicore.Env, prog string, args []string) int {
			fs := clicore.NewFlagSet(env, prog, "ansible-plugin")
			dir := fs.String("dir", "", "the `directory` for firehose.py (default $XDG_DATA_HOME/firehose/ansible/callback_plugins, or ~/.local/share/...)")
			exports := fs.Bool("env", false, "print export lines that enable the plugin, rather than the directory alone")
			if code, ok := clicore.ParseFlags(fs, args); !ok {
				return code
			}
			if *dir == "" {
				base, ok := env.LookupEnv("XDG_DATA_HOME")
				if !ok || base == "" {
					home, _ := env.LookupEnv("HOME")
					if home == "" {
						fmt.Fprintf(env.Stderr, "%s ansible-plugin: neither XDG_DATA_HOME nor HOME is set; give --dir\n", prog)
						return clicore.ExitUsage
					}
					base = filepath.Join(home, ".local", "share")
				}
				*dir = filepath.Join(base, "firehose", "ansible", "callback_plugins")
			}
			abs, err := filepath.Abs(*dir)
			if err != nil {
				fmt.Fprintf(env.Stderr, "%s ansible-plugin: %v\n", prog, err)
				return clicore.ExitError
			}
			if err := writeIfChanged(filepath.Join(abs, "firehose.py"), []byte(ansible.PluginSource)); err != nil {
				fmt.Fprintf(env.Stderr, "%s ansible-plugin: %v\n", prog, err)
				return clicore.ExitError
			}
			if !*exports {
				fmt.Fprintln(env.Stdout, abs)
				return clicore.ExitOK
			}
			fmt.Fprintf(env.Stdout, "export ANSIBLE_CALLBACK_PLUGINS=%s\nexport ANSIBLE_CALLBACKS_ENABLED=firehose\n", shellQuote(abs))
			if u, ok := env.LookupEnv("FIREHOSE_URL"); ok {
				fmt.Fprintf(env.Stdout, "export FIREHOSE_URL=%s\n", shellQuote(u))
			}
			return clicore.ExitOK
		}}
}

func writeIfChanged(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
