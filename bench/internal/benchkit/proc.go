package benchkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opsfirehose/firehose/internal/gobuild"
)

// Proc is a process started by a benchmark, with its output in a log file.
// A nil *Proc stands for a process the benchmark did not start (an already
// running server): its methods then report nothing and do nothing.
type Proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string

	exited  chan struct{}
	waitErr error
}

// Start starts argv with env added to this process's environment, in dir,
// with its stdout and stderr going to dir/<name>.log. The process gets its
// own process group, so a Ctrl-C in the terminal reaches only the benchmark,
// which then stops its processes in order; it is killed if the benchmark dies.
func Start(name, dir string, env []string, argv ...string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = lf
	cmd.Stderr = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		lf.Close()
		close(p.exited)
	}()
	return p, nil
}

// PID is the process id, or 0 for a nil Proc.
func (p *Proc) PID() int {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stopGrace bounds a clean stop. A bridge stops in milliseconds on a quiet
// machine, but it flushes its history's store and closes its databases,
// which took over 5 s beside a cold test run at a load of 7 on 2 cores; the
// bound only tells a hang from a stop.
const stopGrace = 30 * time.Second

// Stop sends SIGTERM, and SIGKILL if the process is still running after
// stopGrace; the latter is an error. Stopping a process that has exited does nothing.
func (p *Proc) Stop() error {
	if p == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, stopGrace)
	}
}

// Kill sends SIGKILL (kill -9: no chance to save anything) and waits until
// the process has exited. Killing a process that has exited does nothing.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Alive returns an error, with the tail of the log, if the process has exited.
func (p *Proc) Alive() error {
	if p == nil {
		return nil
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); log tail:\n%s", p.name, p.waitErr, p.LogTail())
	default:
		return nil
	}
}

// LogSize is the current size of the log, an offset for LogMatches.
func (p *Proc) LogSize() int64 {
	if p == nil {
		return 0
	}
	fi, err := os.Stat(p.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogMatches returns up to n of the last log lines written after offset
// that contain substr (lower case; matched case-insensitively).
func (p *Proc) LogMatches(offset int64, substr string, n int) []string {
	if p == nil {
		return nil
	}
	data, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(data)) < offset {
		return nil
	}
	data = data[offset:]
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(strings.ToLower(l), substr) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// LogTail returns the last 20 lines of the log, indented for an error message.
func (p *Proc) LogTail() string {
	if p == nil {
		return ""
	}
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// ProcRSS returns pid's resident memory now (VmRSS in /proc/<pid>/status),
// in bytes.
func ProcRSS(pid int) (int64, bool) { return procStatusBytes(pid, "VmRSS") }

// procStatusBytes reads a "<field>: <n> kB" line of /proc/<pid>/status.
func procStatusBytes(pid int, field string) (int64, bool) {
	if pid <= 0 {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// FreeAddr finds a free TCP port on the loopback interface and returns it
// as 127.0.0.1:port.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreeAddrs is FreeAddr n times: the addresses of a server's listeners.
func FreeAddrs(n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		a, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	return addrs, nil
}

// Build runs `go build -o out pkg` as scripts/build.sh does (gobuild) at the root of the module the current
// directory is in, so "./cmd/bridge" means this repository's command
// wherever the benchmark runs from.
func Build(ctx context.Context, pkg, out string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := gobuild.Command(ctx, root, pkg, out, "")
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (in %s): %v\n%s", pkg, root, err, buf.String())
	}
	return nil
}

// ModuleRoot is the directory of the go.mod the current directory belongs to.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module; run from the firehose repository")
	}
	return filepath.Dir(gomod), nil
}
