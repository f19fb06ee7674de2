package testkit

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/freeport"
	"github.com/opsfirehose/firehose/internal/gobuild"
)

// BuildBinary builds a main package (such as "./cmd/bridge", relative to the
// module root) into a temporary directory, as scripts/build.sh does (gobuild:
// sharing the release build's compiled packages), and returns the binary's path.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	root := moduleRoot(t)
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := gobuild.Command(context.Background(), root, pkg, out, "")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// ModuleRoot is the repository root, for tests that read README.md or examples/.
func ModuleRoot(t testing.TB) string { return moduleRoot(t) }

// Process is a program under test, with its combined output captured.
type Process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
	err  error
}

// Start runs a program in dir (the module root when empty) and stops it with
// SIGTERM when the test ends.
func Start(t testing.TB, dir string, name string, args ...string) *Process {
	t.Helper()
	if dir == "" {
		dir = moduleRoot(t)
	}
	p := &Process{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Dir = dir
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			p.mu.Lock()
			p.out.WriteString(s.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() {
		p.err = p.cmd.Wait()
		_ = w.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.Stop() })
	return p
}

// Output is everything the program printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after Timeout). It
// returns the exit error.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(Timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

// Kill sends SIGKILL, as a crash or the OOM killer would, and waits for the exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Exited reports whether the program has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitTCP waits until addr accepts connections, failing the test if p exits first.
func WaitTCP(t testing.TB, p *Process, addr string) {
	t.Helper()
	waitFor(t, p, addr+" to accept connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// WaitHTTP waits until url answers 200, failing the test if p exits first.
func WaitHTTP(t testing.TB, p *Process, url string) {
	t.Helper()
	waitFor(t, p, url+" to answer 200", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// waitFor polls ready, a readiness probe of something that is starting up.
func waitFor(t testing.TB, p *Process, what string, ready func() bool) {
	t.Helper()
	Eventually(t, func() bool {
		if p != nil && p.Exited() {
			t.Fatalf("process exited while waiting for %s:\n%s", what, p.Output())
		}
		return ready()
	}, "%s", what)
}

// RequirePortsFree skips (outside CI) or fails (CI=true) when a fixed port a
// test needs is taken, e.g. by a mosquitto service.
func RequirePortsFree(t testing.TB, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			Unavailable(t, "port %s is taken (%v); this test needs the default ports", addr, err)
		}
		ln.Close()
	}
}

// FreePort returns a loopback address for a program that cannot report the
// port it bound (a binary under test, mosquitto, a nats-server restarted on
// the same port). The port stays reserved until the test ends (see package
// freeport): a port merely free a moment ago may be taken by another test,
// or by a connection's source port, before the program binds it. A test that
// can listen on :0 itself should, and pass the listener on.
func FreePort(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePortNumber(t)))
}

// FreePortNumber is FreePort's port alone, for options that take the host
// and the port apart; it is reserved the same way.
func FreePortNumber(t testing.TB) int {
	t.Helper()
	port, release, err := freeport.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return port
}

// Mosquitto is Debian's mosquitto broker run for a test on a free loopback
// port, restartable on the same port.
type Mosquitto struct {
	t    testing.TB
	bin  string
	conf string
	Addr string // host:port
	proc *Process
}

// StartMosquitto runs mosquitto with anonymous access (extra config lines are
// appended to its config file) and stops it when the test ends.
func StartMosquitto(t testing.TB, extraConfig ...string) *Mosquitto {
	t.Helper()
	bin := RequireCommand(t, "mosquitto")
	addr := FreePort(t)
	_, port, _ := net.SplitHostPort(addr)
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	lines := append([]string{"listener " + port + " 127.0.0.1", "allow_anonymous true", "persistence false", "max_inflight_messages 0", "max_queued_messages 1000000"}, extraConfig...)
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Mosquitto{t: t, bin: bin, conf: conf, Addr: addr}
	m.Restart()
	return m
}

// URL is tcp://host:port.
func (m *Mosquitto) URL() string { return "tcp://" + m.Addr }

// Stop stops the broker.
func (m *Mosquitto) Stop() {
	if m.proc != nil {
		_ = m.proc.Stop()
		m.proc = nil
	}
}

// Restart (re)starts the broker and waits until it accepts connections.
func (m *Mosquitto) Restart() {
	m.t.Helper()
	m.Stop()
	m.proc = Start(m.t, os.TempDir(), m.bin, "-c", m.conf)
	WaitTCP(m.t, m.proc, m.Addr)
}
