package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// The README's commands, exactly as written there. TestReadmeCommandsAreCovered
// fails when the README gains a command this file does not run.
const (
	cmdRun        = "go run ./cmd/bridge"
	cmdTour       = "go run ./cmd/bridge --config examples/tour.yaml"
	cmdSub        = "mosquitto_sub -t '#' -v"
	cmdPub        = "mosquitto_pub -u demo -P demo -t demo/hello -m 'hello, firehose'"
	cmdAnonPub    = "mosquitto_pub -V 5 -q 1 -t demo/hello -m 'forged'"
	cmdOutsidePub = "mosquitto_pub -V 5 -q 1 -u demo -P demo -t chef/acme/web1/status -m 'forged'"
	cmdDenied     = "curl -s 127.0.0.1:8080/metrics | grep '^firehose_broker_publish_denied_total'"
	cmdCheck      = "go run ./cmd/bridge check --config examples/tour.yaml"
	cmdCheckShape = "go run ./cmd/bridge check --syntax-only --config config.example.yaml"
	cmdTwoBridges = "FIREHOSE_DATA_DIR=data2 go run ./cmd/bridge --http-address 127.0.0.1:8081 --mqtt-address :1884 --ws-address ''"
	cmdPasswd     = "printf %s 'the-password' | go run ./cmd/bridge passwd"
	cmdBroker     = "go run ./cmd/broker --config examples/tour.yaml"
	cmdChef       = "curl -s --data-binary @adapters/chef/testdata/01_run_start_chef12_ubuntu/input.json 127.0.0.1:8080/data-collector/v0/"
	cmdGerrit     = "curl -s --data-binary @adapters/gerrit/testdata/patchset_created/input.json 127.0.0.1:8080/gerrit/v1/events"
	cmdLaunchpad  = "go run ./cmd/bridge ingest launchpad < adapters/launchpad/testdata/bug_new/input.eml"
	cmdSubunit    = "curl -s -H 'Content-Type: application/x-subunit' --data-binary @adapters/subunit/testdata/stream_failing/input.subunit " +
		"'127.0.0.1:8080/subunit/v1/events?worker=ci01&project=openstack/nova&change=12345&build_uuid=45f7c1dd&source_url=https://logs.example.org/45f7c1dd/testrepository.subunit'"
	cmdGalaxyBuild   = "ansible-galaxy collection build adapters/ansible/collection"
	cmdGalaxyInstall = "ansible-galaxy collection install opsfirehose-firehose-0.1.0.tar.gz"
	cmdAnsible       = "ANSIBLE_CALLBACKS_ENABLED=opsfirehose.firehose.firehose ansible-playbook -i localhost, -c local examples/hello-playbook.yml"
	cmdConfigComp    = "go run ./cmd/bridge configdb comp create --name fuel-lcm --resource-definitions astute"
	cmdConfigEnv     = "go run ./cmd/bridge configdb env create --id 1 --components fuel-lcm --levels nodes"
	cmdConfigSet     = "go run ./cmd/bridge configdb set --env 1 --level nodes=node-1.domain.tld --resource astute --key deployment_id --value 2 --type int"
	cmdConfigGet     = "curl -s '127.0.0.1:8080/api/v1/config/environments/1/nodes/node-1.domain.tld/resources/astute/values?effective'"
	cmdSubFailure    = "go run ./cmd/bridge sub 'chef/+/+/run/failure'"
	cmdSubStatus     = "go run ./cmd/bridge sub 'chef/+/+/status' --retained-only --format json"
	cmdStream        = "curl -N 'http://127.0.0.1:8080/api/v1/stream?filter=chef/%2B/%2B/run/failure'"
	cmdSubSince      = "go run ./cmd/bridge sub --since 2h 'chef/+/+/run/failure'"
	cmdHistory       = "curl -s 'http://127.0.0.1:8080/api/v1/history?filter=chef/%2B/%2B/run/failure&since=2h'"
)

// Commands in the README that other tests or tools cover.
var coveredElsewhere = map[string]string{
	"./scripts/test.sh":                                   "CI runs it (.ci/run)",
	"./scripts/release.sh":                                "scripts/check-packages.sh runs it in CI and installs the .deb",
	"go run ./bench/broker":                               "bench/broker's smoke test",
	"go run ./bench/fanout":                               "bench/fanout's smoke test",
	"go run ./bench/chef":                                 "bench/chef's smoke test",
	"go run ./bench/chef -teams steady":                   "bench/chef's smoke test",
	"go run ./bench/ansible":                              "bench/ansible's smoke test",
	"go run ./bench/configdb":                             "bench/configdb's smoke test",
	"go run ./bench/loginstorm":                           "bench/loginstorm's smoke test",
	"go run ./bench/dashboard":                            "bench/dashboard's smoke test",
	"go test -run xxx -bench . ./topics/":                 "plain go test",
	"mosquitto_sub -t 'chef/+/+/run/failure'":             "illustration of filters",
	"mosquitto_sub -t 'ansible/playbook/+/task/+/FAILED'": "illustration of filters",
	"mosquitto_sub -t 'chef/+/+/resource/collectd/#'":     "illustration of filters",
}

func readmeCommands(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(testkit.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	inSh := false
	comment := regexp.MustCompile(`\s+#\s.*$`)
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		switch {
		case line == "```sh":
			inSh = true
		case line == "```":
			inSh = false
		case inSh && strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			cmds = append(cmds, strings.TrimSpace(comment.ReplaceAllString(line, "")))
		}
	}
	return cmds
}

func TestReadmeCommandsAreCovered(t *testing.T) {
	known := map[string]bool{}
	for _, c := range []string{cmdRun, cmdTour, cmdSub, cmdPub, cmdAnonPub, cmdOutsidePub, cmdDenied, cmdCheck, cmdCheckShape, cmdTwoBridges, cmdPasswd, cmdBroker, cmdChef, cmdGerrit, cmdLaunchpad, cmdSubunit,
		cmdGalaxyBuild, cmdGalaxyInstall, cmdAnsible, cmdConfigComp, cmdConfigEnv, cmdConfigSet, cmdConfigGet,
		cmdSubFailure, cmdSubStatus, cmdStream, cmdSubSince, cmdHistory} {
		known[c] = true
	}
	for c := range coveredElsewhere {
		known[c] = true
	}
	cmds := readmeCommands(t)
	seen := map[string]bool{}
	for _, c := range cmds {
		seen[c] = true
		if !known[c] && !strings.HasPrefix(c, "docker ") {
			t.Errorf("README command %q is not run by any test; add it to cmd/bridge/readme_test.go", c)
		}
	}
	for c := range known {
		if !seen[c] {
			t.Errorf("the test runs %q, which the README no longer shows", c)
		}
	}
}

// shell runs a README command with `go run ./cmd/X` replaced by the built binary.
func shell(t *testing.T, bins map[string]string, command string) *exec.Cmd {
	t.Helper()
	for pkg, bin := range bins {
		command = strings.ReplaceAll(command, "go run ./cmd/"+pkg, bin)
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = testkit.ModuleRoot(t)
	return cmd
}

func TestReadme(t *testing.T) {
	testkit.RequireCommand(t, "mosquitto_sub")
	testkit.RequireCommand(t, "mosquitto_pub")
	testkit.RequireCommand(t, "curl")
	testkit.RequirePortsFree(t, ":1883", ":8083", "127.0.0.1:8080")
	bins := map[string]string{"bridge": testkit.BuildBinary(t, "./cmd/bridge"), "broker": testkit.BuildBinary(t, "./cmd/broker")}

	t.Run("no config: MQTT on 1883, WebSocket on 8083, HTTP on 127.0.0.1:8080", func(t *testing.T) {
		// The bridge keeps its state (ConfigDB) in ./data: run it where that
		// starts empty, as on a fresh clone.
		p := testkit.Start(t, t.TempDir(), "sh", "-c", "exec "+bins["bridge"])
		testkit.WaitHTTP(t, p, "http://127.0.0.1:8080/healthz")
		testkit.WaitTCP(t, p, "127.0.0.1:1883")
		testkit.WaitTCP(t, p, "127.0.0.1:8083")
		c := testkit.Connect(t, "ws://127.0.0.1:8083", testkit.ClientOptions{})
		c.Disconnect(0)
		if err := p.Stop(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Output())
		}
	})

	t.Run("tour", func(t *testing.T) {
		tour := strings.Replace(cmdTour, "go run ./cmd/bridge", bins["bridge"], 1)
		tour = strings.Replace(tour, "examples/tour.yaml", filepath.Join(testkit.ModuleRoot(t), "examples/tour.yaml"), 1)
		p := testkit.Start(t, t.TempDir(), "sh", "-c", "exec "+tour)
		testkit.WaitHTTP(t, p, "http://127.0.0.1:8080/healthz")

		sub := shell(t, bins, cmdSub)
		stdout, err := sub.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Process.Kill(); _ = sub.Wait() }()
		lines := make(chan string, 100)
		go func() {
			s := bufio.NewScanner(stdout)
			for s.Scan() {
				lines <- s.Text()
			}
			close(lines)
		}()
		// mosquitto_sub is subscribed once a message published afterwards
		// reaches it; until then, publish again (each try waits a little for it).
		deadline := time.After(testkit.Timeout)
		for ready := false; !ready; {
			if out, err := shell(t, bins, "mosquitto_pub -u demo -P demo -t demo/ready -m up").CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			select {
			case line := <-lines:
				ready = line == "demo/ready up"
			case <-time.After(200 * time.Millisecond):
			case <-deadline:
				t.Fatal("mosquitto_sub received nothing")
			}
		}
		// Drain any extra "ready" copies from the retries.
		for drained := false; !drained; {
			if out, err := shell(t, bins, "mosquitto_pub -u demo -P demo -t demo/synced -m x").CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			for line := range lines {
				if line == "demo/synced x" {
					drained = true
					break
				}
			}
		}

		if out, err := shell(t, bins, cmdPub).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", cmdPub, err, out)
		}
		expectLine(t, lines, "demo/hello hello, firehose")

		for _, c := range []string{cmdAnonPub, cmdOutsidePub} {
			out, _ := shell(t, bins, c).CombinedOutput()
			if string(out) != "Warning: Publish 1 failed: Not authorized.\nnot authorized\n" { // as the README shows
				t.Errorf("%s printed %q", c, out)
			}
		}
		// Nothing forged arrived: the next line is a message published after them.
		if out, err := shell(t, bins, "mosquitto_pub -u demo -P demo -t demo/after -m x").CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		expectLine(t, lines, "demo/after x")

		out, err := shell(t, bins, cmdDenied).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "firehose_broker_publish_denied_total 2" {
			t.Fatalf("%s: %v: %q", cmdDenied, err, out)
		}
		// Both refusals are logged, the user's too (issue 16, row 4).
		for _, why := range []string{"refused publish: anonymous clients are read-only", "refused publish: topic outside the user's publish ACL"} {
			if !strings.Contains(p.Output(), why) {
				t.Errorf("%q was not logged:\n%s", why, p.Output())
			}
		}

		out, err = shell(t, bins, cmdChef).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != `{"status":"ok","type":"run_start","messages":1}` {
			t.Fatalf("%s: %v: %q", cmdChef, err, out)
		}
		expectLine(t, lines, "chef/chef/chefdk-ubuntu-16.04-tester-91bc78/run/start {")

		// The Sources section: each command, what it prints, and the
		// subscriber's view the README shows.
		for _, tt := range []struct{ cmd, output, line string }{
			{cmdGerrit, `{"accepted":1}`, "gerrit/openstack/nova/patchset-created {"},
			{cmdLaunchpad, "", "launchpad/octavia/bug/1680938 {"},
			{cmdSubunit, `"status":"failure"`, `gearman-subunit/ci01/openstack/nova/12345 {"status":"failure","build_uuid":"45f7c1dd",` +
				`"source_url":"https://logs.example.org/45f7c1dd/testrepository.subunit"}`},
			{cmdConfigComp, `"name": "fuel-lcm"`, `configdb/components/1/created {"component_id":1,"event":"created"`},
			{cmdConfigEnv, `"hierarchy_levels"`, `configdb/1/environment/created {"environment_id":1,"event":"created"`},
			{cmdConfigSet, "", `configdb/1/astute/values/nodes/node-1.domain.tld {"environment_id":1,"resource":"astute"`},
		} {
			out, err := shell(t, bins, tt.cmd).CombinedOutput()
			if err != nil || !strings.Contains(string(out), tt.output) {
				t.Fatalf("%s: %v: %q", tt.cmd, err, out)
			}
			expectLinePrefix(t, lines, tt.line)
		}
		if out, err := shell(t, bins, cmdConfigGet).CombinedOutput(); err != nil || string(out) != `{"deployment_id":2}` {
			t.Fatalf("%s: %v: %q", cmdConfigGet, err, out)
		}

		testkit.RequireCommand(t, "ansible-playbook")
		testkit.RequireCommand(t, "ansible-galaxy")
		// The collection is built in, and installed into, directories of the
		// test's own rather than the repository and ~/.ansible.
		work, collections := t.TempDir(), "ANSIBLE_COLLECTIONS_PATH="+t.TempDir()
		for _, c := range []string{cmdGalaxyBuild, cmdGalaxyInstall} {
			cmd := exec.Command("sh", "-c", strings.Replace(c, "adapters/", filepath.Join(testkit.ModuleRoot(t), "adapters")+"/", 1))
			cmd.Dir, cmd.Env = work, append(os.Environ(), collections)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c, err, out)
			}
		}
		ansible := shell(t, bins, cmdAnsible)
		ansible.Env = append(os.Environ(), collections)
		out, err = ansible.CombinedOutput()
		if err != nil || strings.Contains(string(out), "WARNING]: firehose") {
			t.Fatalf("%s: %v:\n%s", cmdAnsible, err, out)
		}
		for _, want := range []string{"/action/start {", "/task/localhost/OK {", "/task/localhost/OK {", "/stats/localhost {", "/action/finish/OK {"} {
			got := expectLinePrefix(t, lines, "ansible/playbook/")
			if !strings.Contains(got, want) {
				t.Fatalf("mosquitto_sub printed %q, want the next ansible message to be on .../%s", got, want)
			}
		}
	})

	t.Run("watch the bus", func(t *testing.T) {
		tour := strings.Replace(cmdTour, "go run ./cmd/bridge", bins["bridge"], 1)
		tour = strings.Replace(tour, "examples/tour.yaml", filepath.Join(testkit.ModuleRoot(t), "examples/tour.yaml"), 1)
		p := testkit.Start(t, t.TempDir(), "sh", "-c", "exec "+tour)
		testkit.WaitHTTP(t, p, "http://127.0.0.1:8080/healthz")
		if code, body := httpGetStatus(t, "http://127.0.0.1:8080/"); code != 200 || !strings.Contains(body, "<title>firehose</title>") {
			t.Fatalf("GET /: %d", code)
		}
		// The two live readers print a failed run once they are subscribed:
		// post one until both have.
		sub := testkit.Start(t, "", "sh", "-c", "exec "+strings.Replace(cmdSubFailure, "go run ./cmd/bridge", bins["bridge"], 1))
		stream := testkit.Start(t, "", "sh", "-c", "exec "+cmdStream)
		failure := filepath.Join(testkit.ModuleRoot(t), "adapters/chef/testdata/03_run_converge_failure_chef15_policyfile_macos/input.json")
		const topic = "chef/chefit-development/FVFWM0M8HV2J/run/failure"
		testkit.Eventually(t, func() bool {
			if out, err := exec.Command("curl", "-s", "--data-binary", "@"+failure, "127.0.0.1:8080/data-collector/v0/").CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			return strings.Contains(sub.Output(), " "+topic+" {") && strings.Contains(stream.Output(), `"topic":"`+topic+`"`)
		}, "bridge sub and the stream printing %s", topic)
		if !regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} ` + topic + ` \{"chef_server_fqdn":"api.chef.io",`).MatchString(sub.Output()) {
			t.Errorf("bridge sub printed %q", sub.Output())
		}
		if !strings.Contains(stream.Output(), "event: message\ndata: {\"time\":") {
			t.Errorf("the stream printed %q", stream.Output())
		}
		// The History section: the failure, from the history, by a reader
		// that came after it; bridge sub then goes on live.
		since := testkit.Start(t, "", "sh", "-c", "exec "+strings.Replace(cmdSubSince, "go run ./cmd/bridge", bins["bridge"], 1))
		testkit.Eventually(t, func() bool { return strings.Contains(since.Output(), " "+topic+" {") }, "bridge sub --since printing %s", topic)
		if out, err := shell(t, bins, cmdHistory).Output(); err != nil || !strings.Contains(string(out), `"topic":"`+topic+`","source":"chef","payload":{"chef_server_fqdn":"api.chef.io"`) {
			t.Fatalf("%s: %v: %q", cmdHistory, err, out)
		}

		out, err := shell(t, bins, cmdSubStatus).Output()
		if err != nil || !strings.HasPrefix(string(out), `{"time":`) || !strings.Contains(string(out), `"topic":"chef/chefit-development/FVFWM0M8HV2J/status","retained":true,"qos":0,"payload":{"node_name":"FVFWM0M8HV2J"`) {
			t.Fatalf("%s: %v: %q", cmdSubStatus, err, out)
		}
	})

	t.Run("check and passwd", func(t *testing.T) {
		if out, err := shell(t, bins, cmdCheck).CombinedOutput(); err != nil || !strings.Contains(string(out), "config OK") {
			t.Fatalf("%s: %v: %s", cmdCheck, err, out)
		}
		if out, err := shell(t, bins, cmdCheckShape).CombinedOutput(); err != nil || !strings.Contains(string(out), "config syntax OK") {
			t.Fatalf("%s: %v: %s", cmdCheckShape, err, out)
		}
		out, err := shell(t, bins, cmdPasswd).Output()
		if err != nil {
			t.Fatal(err)
		}
		if err := bcrypt.CompareHashAndPassword([]byte(strings.TrimSpace(string(out))), []byte("the-password")); err != nil {
			t.Fatalf("%s printed %q: %v", cmdPasswd, out, err)
		}
	})

	t.Run("a second bridge beside the first, by flags", func(t *testing.T) {
		testkit.RequirePortsFree(t, "127.0.0.1:8081", ":1884")
		// Both in one directory, as on a fresh clone: the first bridge's
		// state is in ./data, so the second needs a directory of its own.
		dir := t.TempDir()
		first := testkit.Start(t, dir, "sh", "-c", "exec "+bins["bridge"])
		testkit.WaitHTTP(t, first, "http://127.0.0.1:8080/healthz")
		sameDir := testkit.Start(t, dir, "sh", "-c", "exec "+bins["bridge"]+" --http-address 127.0.0.1:8081 --mqtt-address :1884 --ws-address ''")
		want := `another bridge uses the data directory data (pid `
		testkit.Eventually(t, func() bool { return strings.Contains(sameDir.Output(), want) }, "a second bridge on ./data to say it is in use")
		testkit.Eventually(t, sameDir.Exited, "a second bridge on ./data to stop")
		if !strings.Contains(sameDir.Output(), want) || !strings.Contains(sameDir.Output(), "set data_dir or FIREHOSE_DATA_DIR") {
			t.Fatalf("a second bridge on ./data said:\n%s\nwant %q and what to set", sameDir.Output(), want)
		}
		p := testkit.Start(t, dir, "sh", "-c", strings.Replace(cmdTwoBridges, "go run ./cmd/bridge", "exec "+bins["bridge"], 1))
		testkit.WaitHTTP(t, p, "http://127.0.0.1:8081/healthz")
		testkit.WaitTCP(t, p, "127.0.0.1:1884")
		testkit.Eventually(t, func() bool { return strings.Contains(p.Output(), "bridge ready") }, "the bridge to log readiness")
		if n := strings.Count(p.Output(), "MQTT listener up"); n != 1 || strings.Contains(p.Output(), `"listener":"ws"`) {
			t.Errorf("want only the MQTT listener up, not the WebSocket one:\n%s", p.Output())
		}
		if err := p.Stop(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Output())
		}
		if err := first.Stop(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, first.Output())
		}
	})

	t.Run("the broker alone", func(t *testing.T) {
		p := testkit.Start(t, "", "sh", "-c", "exec "+strings.Replace(cmdBroker, "go run ./cmd/broker", bins["broker"], 1))
		testkit.WaitTCP(t, p, "127.0.0.1:1883")
		sub := testkit.Connect(t, "tcp://127.0.0.1:1883", testkit.ClientOptions{})
		ch := sub.Subscribe("demo/#", 1)
		if out, err := shell(t, bins, cmdPub).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got := testkit.Next(t, ch); got.Payload != "hello, firehose" {
			t.Fatalf("got %+v", got)
		}
		if err := p.Stop(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Output())
		}
	})
}

func httpGetStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// expectLinePrefix skips lines (the rest of a multi-line payload) until one
// starts with prefix.
func expectLinePrefix(t *testing.T, lines <-chan string, prefix string) string {
	t.Helper()
	deadline := time.After(testkit.Timeout)
	for {
		select {
		case got := <-lines:
			if strings.HasPrefix(got, prefix) {
				return got
			}
		case <-deadline:
			t.Fatalf("mosquitto_sub did not print %q", prefix)
		}
	}
}

func expectLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	select {
	case got := <-lines:
		if got != want {
			t.Fatalf("mosquitto_sub printed %q, want %q", got, want)
		}
	case <-time.After(testkit.Timeout):
		t.Fatalf("mosquitto_sub did not print %q", want)
	}
}
