package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/app/brokeronly"
	"github.com/opsfirehose/firehose/cli/clicore"
)

// TestEveryCommandsHelpListsItsFlags runs `<command> --help` for every
// command that `--help` lists, in both programs, and wants each of the
// command's flags in what it prints ("takes no flags" for none), and, for
// health, none that it does not read. A command missing from the table
// fails: a new command comes with its flags here.
func TestEveryCommandsHelpListsItsFlags(t *testing.T) {
	configFlags := []string{"config", "c", "http-address"}
	runFlags := append(configFlags[:len(configFlags):len(configFlags)], "mqtt-address", "ws-address")
	flags := map[string][]string{
		"run":              runFlags,
		"check":            append(runFlags, "syntax-only"),
		"health":           append(configFlags, "ready", "url", "timeout"),
		"passwd":           {"cost"},
		"version":          nil,
		"ingest":           {"url", "token", "token-file", "cacert", "timeout"},
		"ingest gerrit":    {"exec", "url", "token", "token-file", "cacert", "timeout", "batch", "buffer", "backoff-min", "backoff-max"},
		"ingest launchpad": {"url", "token", "token-file", "cacert", "timeout", "verbose"},
		"ansible-plugin":   {"dir", "env"},
		"sub": {"url", "username", "password", "password-file", "client-id", "ca-file", "cert-file", "key-file", "server-name",
			"insecure", "format", "color", "count", "qos", "retained-only", "no-retained", "connect-timeout", "since", "until", "http-url"},
		"help":         nil,
		"configdb":     {"url", "token", "user", "format"},
		"configdb env": {"id", "components", "levels"},
		"configdb get": {"env", "level", "resource", "key", "show-lookup", "format", "url", "token", "user"},
	}
	notRead := map[string][]string{"health": {"mqtt-address", "ws-address"}}

	for name, program := range map[string]func(clicore.Env, []string) int{"bridge": Bridge, "broker": brokeronly.Broker} {
		top := invoke(context.Background(), program, "", nil, "--help")
		_, list, _ := strings.Cut(top.stdout.String(), "Commands:\n")
		list, _, _ = strings.Cut(list, "\n\n")
		var commands []string
		for _, line := range strings.Split(list, "\n") {
			if cmd := strings.Fields(line); len(cmd) > 0 {
				commands = append(commands, cmd[0])
			}
		}
		if len(commands) < 5 {
			t.Fatalf("%s --help lists %v", name, commands)
		}
		if name == "bridge" {
			commands = append(commands, "ingest gerrit", "ingest launchpad", "configdb env", "configdb get")
		}
		for _, cmd := range commands {
			want, known := flags[cmd]
			if !known {
				t.Errorf("%s %s: not in this test's table; add its flags", name, cmd)
				continue
			}
			r := invoke(context.Background(), program, "", nil, append(strings.Fields(cmd), "--help")...)
			out := r.stdout.String() + r.stderr.String()
			if r.code != 0 {
				t.Errorf("%s %s --help: exit %d\n%s", name, cmd, r.code, out)
			}
			if len(want) == 0 && !strings.Contains(out, "takes no flags") {
				t.Errorf("%s %s --help says neither its flags nor that it has none:\n%s", name, cmd, out)
			}
			for _, f := range want {
				if !regexp.MustCompile(`(^|[\s|(\[])--?` + regexp.QuoteMeta(f) + `\b`).MatchString(out) {
					t.Errorf("%s %s --help does not list %s:\n%s", name, cmd, f, out)
				}
			}
			for _, f := range notRead[cmd] {
				if strings.Contains(out, "-"+f) {
					t.Errorf("%s %s --help lists %s, which it does not read:\n%s", name, cmd, f, out)
				}
			}
		}
	}
}
