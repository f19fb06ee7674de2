package main

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

	"golang.org/x/crypto/bcrypt"
)

// Settings written into the generated mosquitto.conf. Mosquitto's defaults
// (20 in flight, 1000 queued per client) would throttle QoS 1 fan-out well
// below what the hardware can do, while mochi (our broker) does not limit
// in-flight messages for MQTT 3.1.1 clients (it stores up to 8192 per client,
// Capabilities.MaximumInflight) and drops beyond 8192 pending writes per
// client (MaximumClientWritesPending). max_inflight_messages 0 means no limit,
// so mosquitto never queues or drops for a connected client. (A large finite
// value, 8192, made mosquitto 2.0.11 drop and never deliver acknowledged QoS 1
// messages although the subscribers kept up.) max_queued_messages then only
// matters for offline clients; it is set large anyway.
const (
	mosquittoMaxInflight = 0
	mosquittoMaxQueued   = 100000
)

// brokerProc is a broker process started by the benchmark.
type brokerProc struct {
	name    string
	addr    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File

	exited  chan struct{}
	waitErr error
}

func (b *brokerProc) pid() int {
	if b == nil || b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// freeAddr finds a free TCP port on the loopback interface.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startProc starts a broker binary with its output going to a log file in dir.
func startProc(name, dir, addr string, env []string, argv ...string) (*brokerProc, error) {
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
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a Ctrl-C in the terminal reaches only us, and we
		// stop the brokers in order. Pdeathsig cleans up if we are killed.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	b := &brokerProc{name: name, addr: addr, cmd: cmd, logPath: logPath, logFile: lf, exited: make(chan struct{})}
	go func() {
		b.waitErr = cmd.Wait()
		lf.Close()
		close(b.exited)
	}()
	return b, nil
}

// stop sends SIGTERM, and SIGKILL if the broker is still running after 5s.
func (b *brokerProc) stop() error {
	if b == nil {
		return nil
	}
	select {
	case <-b.exited:
		return nil
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-b.exited:
		return nil
	case <-t.C:
		_ = b.cmd.Process.Kill()
		<-b.exited
		return fmt.Errorf("%s did not exit within 5s of SIGTERM; killed", b.name)
	}
}

// alive reports an error if the process has exited.
func (b *brokerProc) alive() error {
	if b == nil {
		return nil
	}
	select {
	case <-b.exited:
		return fmt.Errorf("%s exited (%v); log tail:\n%s", b.name, b.waitErr, b.logTail())
	default:
		return nil
	}
}

// logSize returns the current size of the broker's log.
func (b *brokerProc) logSize() int64 {
	if b == nil {
		return 0
	}
	fi, err := os.Stat(b.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logMatches returns up to n of the last log lines written after offset
// that contain substr (case-insensitive).
func (b *brokerProc) logMatches(offset int64, substr string, n int) []string {
	if b == nil {
		return nil
	}
	data, err := os.ReadFile(b.logPath)
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

func (b *brokerProc) logTail() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// waitReady polls until a TCP connect and an authenticated MQTT CONNECT
// succeed, the process exits, or the timeout passes.
func waitReady(ctx context.Context, addr, user, pass string, proc *brokerProc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for attempt := 0; ; attempt++ {
		if err := proc.alive(); err != nil {
			return err
		}
		c, err := dialMQTT(clientOptions{
			Addr: addr, ClientID: fmt.Sprintf("bench-ready-%d", attempt),
			Username: user, Password: pass, Timeout: 2 * time.Second,
		})
		if err == nil {
			c.conn.Write([]byte{pktDisconnect << 4, 0})
			c.conn.Close()
			return nil
		}
		lastErr = err
		var refused *refusedError
		if errors.As(err, &refused) && refused.authFailure() {
			// The broker is up and answered; polling will not change that.
			return fmt.Errorf("broker at %s: %w (check -user/-pass)", addr, err)
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("broker at %s not ready after %v: %v", addr, timeout, lastErr)
			if proc != nil {
				msg += "\nlog tail:\n" + proc.logTail()
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // poll interval
		}
	}
}

// startMosquitto writes a password file, an ACL file and a config, and starts
// mosquitto on a free loopback port.
func startMosquitto(bin, passwdBin, dir, user, pass string) (*brokerProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	pwFile := filepath.Join(dir, "mosquitto.passwd")
	out, err := exec.Command(passwdBin, "-b", "-c", pwFile, user, pass).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %s", passwdBin, err, out)
	}
	aclFile := filepath.Join(dir, "mosquitto.acl")
	acl := fmt.Sprintf("user %s\ntopic readwrite bench/#\n", user)
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		return nil, err
	}
	conf := mosquittoConfig(port, pwFile, aclFile)
	confFile := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return startProc("mosquitto", dir, addr, nil, bin, "-c", confFile)
}

func mosquittoConfig(port, pwFile, aclFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listener %s 127.0.0.1\n", port)
	b.WriteString("allow_anonymous false\n")
	fmt.Fprintf(&b, "password_file %s\n", pwFile)
	fmt.Fprintf(&b, "acl_file %s\n", aclFile)
	fmt.Fprintf(&b, "max_inflight_messages %d\n", mosquittoMaxInflight)
	fmt.Fprintf(&b, "max_queued_messages %d\n", mosquittoMaxQueued)
	b.WriteString("persistence false\n")
	b.WriteString("log_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\nconnection_messages false\n")
	if os.Geteuid() == 0 {
		// Otherwise mosquitto drops to user "mosquitto", which cannot read
		// the files in our private temp dir.
		b.WriteString("user root\n")
	}
	return b.String()
}

// oursConfig renders cmd/broker's YAML config. Only log, broker.listeners
// and broker.users are relied on; adjust here if cmd/broker's schema moves.
func oursConfig(addr, user, passwordHash string) string {
	return fmt.Sprintf(`log:
  level: warn
broker:
  listeners:
    - name: mqtt
      type: tcp
      address: %s
  users:
    - username: %s
      password_hash: %q
      publish: ["bench/#"]
`, addr, user, passwordHash)
}

// buildOurs builds the broker package once into dir and returns the binary.
func buildOurs(ctx context.Context, pkg, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "firehose-broker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s (in %s): %v\n%s", pkg, root, err, out.String())
	}
	return bin, nil
}

func moduleRoot() (string, error) {
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

// startOurs writes the config and starts the built broker binary.
func startOurs(bin, dir, user, pass string, env []string) (*brokerProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), 10)
	if err != nil {
		return nil, err
	}
	confFile := filepath.Join(dir, "firehose.yaml")
	if err := os.WriteFile(confFile, []byte(oursConfig(addr, user, string(hash))), 0o600); err != nil {
		return nil, err
	}
	return startProc("ours", dir, addr, env, bin, "--config", confFile)
}

// procCPU returns the user+system CPU time consumed so far by pid, from
// /proc/<pid>/stat (clock ticks of 1/100 s, Linux's USER_HZ).
func procCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// selfCPU returns this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mosquittoVersion returns e.g. "mosquitto version 2.0.11".
func mosquittoVersion(bin string) string {
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// perfRecorder is a `perf record` attached to a broker process.
type perfRecorder struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startPerf attaches `perf record -g` to pid, writing to out.
func startPerf(pid int, out string) (*perfRecorder, error) {
	cmd := exec.Command("perf", "record", "-F", "999", "-g", "-p", strconv.Itoa(pid), "-o", out)
	lf, err := os.Create(out + ".log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("perf record: %w", err)
	}
	r := &perfRecorder{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		lf.Close()
		close(r.done)
	}()
	return r, nil
}

// stop ends the recording (SIGINT makes perf write its data file).
func (r *perfRecorder) stop() {
	if r == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// systemBusy returns the CPU time all cores have spent not idle, from the
// first line of /proc/stat (ticks of 1/100 s).
func systemBusy() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, s := range f[1:] {
		if i >= 8 { // guest times are already included in user/nice
			break
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += v
	}
	return time.Duration(busy) * 10 * time.Millisecond, true
}
