package ansible

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/topics"
)

var eventsOut = flag.String("events-out", "", "TestPlaybook writes every message it received to this file (topic, tab, payload), for the docs")

// playbook runs testdata/playbook/site.yml with the real ansible-playbook.
type playbook struct {
	bin, dir, secret, closedPort string
}

// playbookRun is what one ansible-playbook run left behind.
type playbookRun struct {
	code    int
	output  string
	elapsed time.Duration
	recap   map[string]map[string]int
}

func newPlaybook(t *testing.T) *playbook {
	t.Helper()
	bin := testkit.RequireCommand(t, "ansible-playbook")
	// The unreachable host is reached with ssh (Debian's openssh-client).
	testkit.RequireCommand(t, "ssh")
	dir, err := filepath.Abs("testdata/playbook")
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 12)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	return &playbook{bin: bin, dir: dir, secret: "s3cr3t-" + hex.EncodeToString(secret), closedPort: closedPort(t)}
}

// closedPort returns a loopback port nothing listens on: ssh to it is
// refused at once, which Ansible reports as unreachable.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// run runs the playbook with the plugin configured by env (FIREHOSE_* and
// ANSIBLE_* variables of the caller's environment are not inherited).
func (p *playbook) run(t *testing.T, env ...string) playbookRun {
	t.Helper()
	env = append([]string{"ANSIBLE_CONFIG=" + filepath.Join(p.dir, "ansible.cfg")}, env...)
	return runAnsible(t, p.bin, p.dir,
		[]string{"site.yml", "-e", "secret=" + p.secret, "-e", "closed_port=" + p.closedPort}, env...)
}

// runAnsible runs ansible-playbook with args in dir, with env added to the
// caller's environment minus its ANSIBLE_* and FIREHOSE_* variables, and
// with temporary directories of its own.
func runAnsible(t *testing.T, bin, dir string, args []string, env ...string) playbookRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	tmp := t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANSIBLE_") && !strings.HasPrefix(kv, "FIREHOSE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(tmp, "local"),
		"ANSIBLE_REMOTE_TEMP="+filepath.Join(tmp, "remote"),
		"ANSIBLE_ASYNC_DIR="+filepath.Join(tmp, "async"),
		"ANSIBLE_SSH_CONTROL_PATH_DIR="+filepath.Join(tmp, "cp"),
		"PYTHONDONTWRITEBYTECODE=1",
	)
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := playbookRun{output: string(out), elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("ansible-playbook: %v\n%s", err, out)
	}
	if ctx.Err() != nil {
		t.Fatalf("ansible-playbook did not finish in time:\n%s", out)
	}
	r.recap = parseRecap(t, r.output)
	return r
}

var recapLine = regexp.MustCompile(`^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$`)

// parseRecap reads Ansible's PLAY RECAP: host -> counter -> value.
func parseRecap(t *testing.T, out string) map[string]map[string]int {
	t.Helper()
	_, after, ok := strings.Cut(out, "PLAY RECAP")
	if !ok {
		t.Fatalf("no PLAY RECAP in:\n%s", out)
	}
	recap := map[string]map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(after))
	for sc.Scan() {
		m := recapLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		counters := map[string]int{}
		for _, f := range strings.Fields(m[2]) {
			k, v, _ := strings.Cut(f, "=")
			counters[k], _ = strconv.Atoi(v)
		}
		recap[m[1]] = counters
	}
	return recap
}

// TestPlaybook runs a real playbook four times at once: without the plugin
// (the baseline), with the plugin and the bridge up, with nothing listening
// at the plugin's URL, and with a bridge that accepts connections but never
// answers. It then checks what reached the bus, and that the bridge's
// absence changed neither the result nor, beyond the flush deadline, the
// time.
func TestPlaybook(t *testing.T) {
	pb := newPlaybook(t)
	in := startIntake(t, DefaultConfig())
	const flush = 3 * time.Second
	flushEnv := "FIREHOSE_FLUSH_TIMEOUT=" + strconv.Itoa(int(flush/time.Second))

	stalled := stallingServer(t)
	var base, up, down, stall playbookRun
	t.Run("runs", func(t *testing.T) {
		t.Run("baseline", func(t *testing.T) {
			t.Parallel()
			base = pb.run(t, "ANSIBLE_CALLBACKS_ENABLED=")
		})
		t.Run("bridge up", func(t *testing.T) {
			t.Parallel()
			// At -vvv Ansible keeps invocation (the task args) in results; the
			// plugin must drop it anyway.
			up = pb.run(t, "FIREHOSE_URL="+in.url, "FIREHOSE_TOKEN="+testToken, flushEnv, "ANSIBLE_VERBOSITY=3")
		})
		t.Run("bridge down", func(t *testing.T) {
			t.Parallel()
			// A bridge that refuses connections is down: the run ends
			// without waiting for this long flush deadline.
			down = pb.run(t, "FIREHOSE_URL=http://127.0.0.1:"+closedPort(t)+Path, "FIREHOSE_FLUSH_TIMEOUT=600")
		})
		t.Run("bridge stalled", func(t *testing.T) {
			t.Parallel()
			stall = pb.run(t, "FIREHOSE_URL=http://"+stalled+Path, "FIREHOSE_TIMEOUT=120", flushEnv)
		})
	})
	if t.Failed() {
		return
	}
	got := in.bus.Collect(t, in.sub, barrier)
	if *eventsOut != "" {
		var b strings.Builder
		for _, m := range got {
			b.WriteString(m.Topic + "\t" + m.Payload + "\n")
		}
		if err := os.WriteFile(*eventsOut, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("baseline result", func(t *testing.T) {
		if base.code == 0 {
			t.Fatalf("the playbook should fail (gamma fails, down is unreachable):\n%s", base.output)
		}
		want := map[string]map[string]int{
			"alpha":       {"ok": 10, "changed": 6, "unreachable": 0, "failed": 0, "skipped": 1, "rescued": 0, "ignored": 2},
			"web/01+blue": {"ok": 5, "changed": 3, "unreachable": 0, "failed": 0, "skipped": 2, "rescued": 0, "ignored": 1},
			"gamma":       {"ok": 5, "changed": 3, "unreachable": 0, "failed": 1, "skipped": 1, "rescued": 0, "ignored": 1},
			"down":        {"ok": 0, "changed": 0, "unreachable": 1, "failed": 0, "skipped": 0, "rescued": 0, "ignored": 0},
		}
		if fmt.Sprint(base.recap) != fmt.Sprint(want) {
			t.Fatalf("recap %v, want %v\n%s", base.recap, want, base.output)
		}
		if strings.Contains(base.output, "firehose:") {
			t.Fatalf("the baseline ran the plugin:\n%s", base.output)
		}
	})

	t.Run("events", func(t *testing.T) {
		if up.code != base.code || fmt.Sprint(up.recap) != fmt.Sprint(base.recap) {
			t.Fatalf("with the plugin: exit %d recap %v; without: exit %d recap %v", up.code, up.recap, base.code, base.recap)
		}
		if strings.Contains(up.output, "firehose:") || strings.Contains(up.output, "firehose callback") {
			t.Fatalf("the plugin warned with the bridge up:\n%s", up.output)
		}
		checkEvents(t, got, pb, base.recap)
	})

	for name, r := range map[string]*playbookRun{"bridge down": &down, "bridge stalled": &stall} {
		wait := flush
		if name == "bridge down" {
			wait = 0 // refused connections: no flush wait at all, whatever flush_timeout says
		}
		t.Run(name, func(t *testing.T) {
			if r.code != base.code || fmt.Sprint(r.recap) != fmt.Sprint(base.recap) {
				t.Fatalf("exit %d recap %v, want exit %d recap %v\n%s", r.code, r.recap, base.code, base.recap, r.output)
			}
			// A bound, not a performance target: the plugin may wait for the
			// flush deadline, and the margin absorbs a loaded machine (the
			// runs are concurrent, so load hits the baseline alike). What it
			// catches is a wait for FIREHOSE_TIMEOUT (120s) or for every
			// refused connection, far beyond it.
			if limit := base.elapsed*3/2 + wait + 20*time.Second; r.elapsed > limit {
				t.Fatalf("took %v; the baseline took %v, so the limit was %v", r.elapsed, base.elapsed, limit)
			}
			warning := regexp.MustCompile(`firehose: (\d+) event\(s\) were not delivered`)
			all := warning.FindAllStringSubmatch(r.output, -1)
			if len(all) != 1 || all[0][1] != strconv.Itoa(len(got)) {
				t.Fatalf("want one warning about %d dropped events, got %v:\n%s", len(got), all, r.output)
			}
			t.Logf("%s: %v (baseline %v, flush wait allowed %v)", name, r.elapsed.Round(time.Millisecond), base.elapsed.Round(time.Millisecond), wait)
		})
	}
}

// stallingServer accepts connections and reads requests but never answers,
// the worst case for a sender: only the flush deadline ends its wait.
func stallingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = c.Read(make([]byte, 1<<20)) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// event is a received payload, decoded.
type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// checkEvents checks everything one run of site.yml put on the bus.
func checkEvents(t *testing.T, got []testkit.Received, pb *playbook, recap map[string]map[string]int) {
	t.Helper()
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("nothing was published")
	}
	var first event
	if err := json.Unmarshal([]byte(got[0].Payload), &first); err != nil {
		t.Fatal(err)
	}
	id, session := first.str("playbook_id"), first.str("session")
	if len(id) != 36 || len(session) != 36 || id == session {
		t.Fatalf("playbook_id %q session %q: want two different UUIDs", id, session)
	}
	prefix := "ansible/playbook/" + id + "/"

	// The exact topics, with how many events each.
	topicCount := map[string]int{}
	for _, m := range got {
		topicCount[strings.TrimPrefix(m.Topic, prefix)]++
		if !strings.HasPrefix(m.Topic, prefix) {
			t.Errorf("topic %q is not under %s", m.Topic, prefix)
		}
	}
	wantTopics := map[string]int{
		"action/start":                 2,
		"task/alpha/OK":                8, // async failure forgiven by failed_when: OK only
		"task/alpha/FAILED":            2, // ignored failure, async failure (published once)
		"task/alpha/SKIPPED":           1,
		"task/gamma/OK":                4,
		"task/gamma/FAILED":            2,
		"task/gamma/SKIPPED":           1,
		"task/web%2F01%2Bblue/OK":      4,
		"task/web%2F01%2Bblue/FAILED":  1,
		"task/web%2F01%2Bblue/SKIPPED": 2,
		"task/down/UNREACHABLE":        1,
		"stats/alpha":                  1,
		"stats/gamma":                  1,
		"stats/web%2F01%2Bblue":        1,
		"stats/down":                   1,
		"action/finish/FAILED":         1,
	}
	if fmt.Sprint(topicCount) != fmt.Sprint(wantTopics) {
		t.Errorf("topics (under %s):\n got %v\nwant %v", prefix, topicCount, wantTopics)
	}

	// Exactly the schema's fields: the plugin's event_id, the
	// de-duplication id, is not published.
	wantKeys := map[string][]string{
		"start": {"ansible_type", "host", "playbook_id", "playbook_name", "session", "status"},
		"task":  {"ansible_host", "ansible_result", "ansible_task", "ansible_type", "host", "playbook_id", "playbook_name", "session", "status"},
		// As in the firehose schema, stats and finish have no ansible_type.
		"stats":  {"ansible_host", "host", "playbook_id", "playbook_name", "stats"},
		"finish": {"playbook_id", "playbook_name", "status"},
	}
	var starts []string
	tasks := map[string]int{}
	for _, m := range got {
		// The secret is in the no_log tasks' args and results, and in the
		// extra vars: it must appear nowhere.
		if strings.Contains(m.Topic, pb.secret) || strings.Contains(m.Payload, pb.secret) {
			t.Errorf("the secret is on the bus: %s %s", m.Topic, m.Payload)
		}
		var e event
		if err := json.Unmarshal([]byte(m.Payload), &e); err != nil {
			t.Fatalf("%s: %v", m.Topic, err)
		}
		typ := e.str("ansible_type")
		if typ == "" {
			typ = "finish"
			if strings.Contains(m.Topic, "/stats/") {
				typ = "stats"
			}
		}
		if !slices.Equal(keys(e), wantKeys[typ]) {
			t.Errorf("%s: fields %v, want %v", m.Topic, keys(e), wantKeys[typ])
		}
		if e.str("playbook_id") != id {
			t.Errorf("%s: playbook_id %q, want %q throughout", m.Topic, e.str("playbook_id"), id)
		}
		if s, ok := e["session"]; ok && s != session {
			t.Errorf("%s: session %v, want %q throughout", m.Topic, s, session)
		}
		if h, ok := e["host"]; ok && h != hostname {
			t.Errorf("%s: host %v, want the controller %q", m.Topic, h, hostname)
		}
		level := func(i int) string {
			l, err := topics.Unescape(strings.Split(strings.TrimPrefix(m.Topic, prefix), "/")[i])
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		switch typ {
		case "start":
			starts = append(starts, e.str("playbook_name"))
			if e.str("status") != "OK" {
				t.Errorf("%s: status %q", m.Topic, e.str("status"))
			}
		case "task":
			checkTask(t, m.Topic, e, level(1), level(2))
			tasks[e.str("ansible_task")+" "+e.str("ansible_host")+" "+e.str("status")]++
		case "stats":
			host := e.str("ansible_host")
			if level(1) != host {
				t.Errorf("%s: ansible_host %q", m.Topic, host)
			}
			stats, _ := e["stats"].(map[string]any)
			want := map[string]any{}
			for k, v := range recap[host] {
				if k == "failed" { // the recap's name for summarize()'s "failures"
					k = "failures"
				}
				want[k] = float64(v)
			}
			if len(stats) != 7 || fmt.Sprint(stats) != fmt.Sprint(want) {
				t.Errorf("%s: stats %v, want the recap's %v", m.Topic, stats, want)
			}
			if e.str("playbook_name") != "second play" {
				t.Errorf("%s: playbook_name %q, want the last play's", m.Topic, e.str("playbook_name"))
			}
		case "finish":
			if e.str("status") != "FAILED" || e.str("playbook_name") != "second play" {
				t.Errorf("%s: %v", m.Topic, e)
			}
		default:
			t.Errorf("%s: ansible_type %q", m.Topic, typ)
		}
	}
	if !slices.Equal(starts, []string{"firehose test play", "second play"}) {
		t.Errorf("play starts %v", starts)
	}
	for k, n := range map[string]int{
		"TASK: succeed down UNREACHABLE": 1, "TASK: change something web/01+blue OK": 1,
		"TASK: fail but ignored gamma FAILED": 1, "TASK: secret task alpha OK": 1, "TASK: secret loop gamma OK": 1,
		"TASK: async failure alpha FAILED": 1, "TASK: async failure gamma SKIPPED": 1,
		"TASK: fail for real gamma FAILED": 1, "TASK: fail for real alpha SKIPPED": 1, "TASK: still here alpha OK": 1,
		"TASK: loop and register alpha OK": 1, "TASK: show a registered result alpha OK": 1,
		// The async poll failed, but failed_when forgave it: one OK, no FAILED.
		"TASK: async failure forgiven alpha OK": 1, "TASK: async failure forgiven alpha FAILED": 0,
	} {
		if tasks[k] != n {
			t.Errorf("want %d %q event(s), got %d (all: %v)", n, k, tasks[k], tasks)
		}
	}
}

// checkTask checks one task event against its topic's host and status levels.
func checkTask(t *testing.T, topic string, e event, host, status string) {
	t.Helper()
	if e.str("ansible_host") != host || e.str("status") != status {
		t.Errorf("%s: ansible_host %q status %q", topic, e.str("ansible_host"), e.str("status"))
	}
	if !strings.HasPrefix(e.str("ansible_task"), "TASK: ") {
		t.Errorf("%s: ansible_task %q", topic, e.str("ansible_task"))
	}
	result, ok := e["ansible_result"].(map[string]any)
	if !ok {
		t.Errorf("%s: ansible_result is %T, want an object", topic, e["ansible_result"])
		return
	}
	raw, _ := json.Marshal(result)
	for _, banned := range []string{`"invocation"`, `"module_args"`, `"_ansible_`} {
		if strings.Contains(string(raw), banned) {
			t.Errorf("%s: ansible_result has %s: %s", topic, banned, raw)
		}
	}
	switch task := e.str("ansible_task"); task {
	case "TASK: secret task", "TASK: secret loop":
		want := `{"censored":"the output has been hidden due to the fact that 'no_log: true' was specified for this result","changed":true}`
		if string(raw) != want {
			t.Errorf("%s %s: ansible_result %s, want only the censored marker", topic, task, raw)
		}
	case "TASK: succeed":
		if status == "OK" && result["ping"] != "pong" {
			t.Errorf("%s: %s", topic, raw)
		}
		if status == "UNREACHABLE" && (result["unreachable"] != true || !strings.Contains(fmt.Sprint(result["msg"]), "ssh")) {
			t.Errorf("%s: %s", topic, raw)
		}
	case "TASK: change something":
		if result["changed"] != true || result["stdout"] != "changed" {
			t.Errorf("%s: %s", topic, raw)
		}
	case "TASK: fail for real":
		if status == "FAILED" && result["msg"] != "gamma fails" {
			t.Errorf("%s: %s", topic, raw)
		}
	case "TASK: show a registered result":
		// The registered result is there, without its invocation (checked
		// above for the whole result).
		reg, _ := result["loop_result"].(map[string]any)
		items, _ := reg["results"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["stdout"] != "looped" {
			t.Errorf("%s: %s", topic, raw)
		}
	case "TASK: async failure forgiven":
		if result["rc"] != 1.0 || result["failed_when_result"] != false {
			t.Errorf("%s: %s", topic, raw)
		}
	}
}
