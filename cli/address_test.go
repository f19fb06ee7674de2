package cli

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/app/brokeronly"
	"github.com/opsfirehose/firehose/cli/clicore"
)

// TestCheckRefusesWhatRunRefuses: every address run cannot listen on is a
// config problem, so check refuses it too, with one problem naming the
// flag, and no spurious "beyond loopback" problem beside it (issue 26).
func TestCheckRefusesWhatRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-address", "127.0.0.1:99999"}, `http.address (from --http-address): "127.0.0.1:99999": the port must be a number from 0 to 65535`},
		{[]string{"--http-address", "0.0.0.0:80800"}, `http.address (from --http-address): "0.0.0.0:80800": the port must be`},
		{[]string{"--http-address", "nonsense"}, `http.address (from --http-address): "nonsense" is not host:port`},
		{[]string{"--mqtt-address", ":99999"}, `broker.listeners[0].address (from --mqtt-address): ":99999": the port must be`},
		{[]string{"--ws-address", "127.0.0.1:no-such-service"}, `broker.listeners[1].address (from --ws-address): "127.0.0.1:no-such-service": the port must be`},
	} {
		for _, program := range []struct {
			name string
			main func(clicore.Env, []string) int
		}{{"bridge", Bridge}, {"broker", brokeronly.Broker}} {
			if program.name == "broker" && tc.args[0] == "--ws-address" {
				continue // the same listeners as the bridge's; one is enough
			}
			for _, cmd := range []string{"check", "run"} {
				r := invoke(context.Background(), program.main, "", map[string]string{"FIREHOSE_DATA_DIR": t.TempDir()}, append([]string{cmd}, tc.args...)...)
				problems := strings.Count(r.stderr.String(), "\n  ")
				if r.code != clicore.ExitUsage || problems != 1 || !strings.Contains(r.stderr.String(), tc.want) {
					t.Errorf("%s %s %v: exit %d, %d problems, stderr:\n%s\nwant exit %d and one problem: %s", program.name, cmd, tc.args, r.code, problems, r.stderr, clicore.ExitUsage, tc.want)
				}
			}
		}
	}
}

// TestAPortInUseNamesTheFlagOrKey: the error of a listener whose port is
// taken names the setting behind the address: the flag, the variable or
// the config key.
func TestAPortInUseNamesTheFlagOrKey(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	inFile := writeFile(t, "broker:\n  listeners: [{address: '127.0.0.1:0'}, {name: second, address: '"+addr+"'}]\n")
	free := []string{"--ws-address", "", "--http-address", "127.0.0.1:0", "--mqtt-address", "127.0.0.1:0"}
	for _, tc := range []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, []string{"--mqtt-address", addr}, "broker.listeners[0].address (from --mqtt-address): listener mqtt: listen tcp " + addr + ": bind: address already in use"},
		{map[string]string{"FIREHOSE_MQTT_ADDRESS": addr}, []string{"--http-address", "127.0.0.1:0", "--ws-address", ""}, "broker.listeners[0].address (from FIREHOSE_MQTT_ADDRESS): listener mqtt: listen tcp " + addr},
		{nil, []string{"--http-address", addr}, "http.address (from --http-address): listen tcp " + addr + ": bind: address already in use"},
		{nil, []string{"--config", inFile, "--http-address", "127.0.0.1:0", "--ws-address", ""}, "broker.listeners[1].address: listener second: listen tcp " + addr},
	} {
		vars := map[string]string{"FIREHOSE_DATA_DIR": t.TempDir()}
		for k, v := range tc.vars {
			vars[k] = v
		}
		args := []string{"run"}
		if tc.vars == nil && tc.args[0] != "--config" {
			args = append(args, free...) // the flag under test comes after, and wins
		}
		args = append(args, tc.args...)
		r := invoke(context.Background(), Bridge, "", vars, args...)
		if r.code != clicore.ExitError || !strings.Contains(r.stderr.String(), "bridge: "+tc.want) {
			t.Errorf("%v %v: exit %d, stderr:\n%s\nwant: bridge: %s", tc.vars, args, r.code, r.stderr, tc.want)
		}
	}
}
