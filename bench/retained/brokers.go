package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// server is a broker under test that can be stopped and started again on
// the same config and data: mosquitto or cmd/bridge.
type server struct {
	name     string
	dir      string
	argv     []string
	env      []string
	mqttAddr string
	// httpAddr is the bridge's HTTP listener; empty for mosquitto.
	httpAddr string
	user     string
	pass     string
	starts   int
	proc     *benchkit.Proc
}

// start starts the server and waits until it takes MQTT logins (and, for
// the bridge, answers the data collector's health check).
func (s *server) start(ctx context.Context, timeout time.Duration) error {
	s.starts++
	proc, err := benchkit.Start(fmt.Sprintf("%s-%d", s.name, s.starts), s.dir, s.env, s.argv...)
	if err != nil {
		return err
	}
	s.proc = proc
	if err := mqttload.WaitReady(ctx, s.mqttAddr, s.user, s.pass, proc, timeout); err != nil {
		return err
	}
	if s.httpAddr != "" {
		return waitHTTP(ctx, "http://"+s.httpAddr+convergePath, proc, timeout)
	}
	return nil
}

// restart stops the server cleanly (SIGTERM), or with kill -9 when kill is
// set, and starts it again on the same config and data.
func (s *server) restart(ctx context.Context, kill bool, timeout time.Duration) error {
	if kill {
		s.proc.Kill()
	} else if err := s.proc.Stop(); err != nil {
		return err
	}
	return s.start(ctx, timeout)
}

func (s *server) stop() error { return s.proc.Stop() }

// rss is the server's resident memory now.
func (s *server) rss() (int64, error) {
	n, ok := benchkit.ProcRSS(s.proc.PID())
	if !ok {
		return 0, fmt.Errorf("%s: cannot read its RSS from /proc", s.name)
	}
	return n, nil
}

// cpu is the server's CPU time so far.
func (s *server) cpu() (time.Duration, error) {
	d, ok := benchkit.ProcCPU(s.proc.PID())
	if !ok {
		return 0, fmt.Errorf("%s: cannot read its CPU time from /proc", s.name)
	}
	return d, nil
}

// newMosquitto prepares Debian's mosquitto with its defaults (20 messages
// in flight and 1,000 queued per client), persistence on in dir as Debian's
// package configures it (saved at a clean stop and every 30 minutes), and a
// password and ACL for the publisher account.
func newMosquitto(p params, dir string) (*server, error) {
	addr, err := benchkit.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	pwFile := filepath.Join(dir, "mosquitto.passwd")
	if out, err := exec.Command(p.MosqPasswd, "-b", "-c", pwFile, p.User, p.Pass).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", p.MosqPasswd, err, out)
	}
	aclFile := filepath.Join(dir, "mosquitto.acl")
	if err := os.WriteFile(aclFile, []byte(fmt.Sprintf("user %s\ntopic readwrite chef/#\n", p.User)), 0o600); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data") + "/"
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listener %s 127.0.0.1\n", port)
	fmt.Fprintf(&b, "allow_anonymous false\npassword_file %s\nacl_file %s\n", pwFile, aclFile)
	fmt.Fprintf(&b, "persistence true\npersistence_location %s\n", dataDir)
	b.WriteString("log_dest stderr\nlog_type error\nlog_type warning\nconnection_messages false\n")
	if os.Geteuid() == 0 {
		// Otherwise mosquitto drops to user "mosquitto", which cannot read
		// the files in our private temp dir.
		b.WriteString("user root\n")
	}
	confFile := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(confFile, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	return &server{name: nameMosquitto, dir: dir, argv: []string{p.MosqBin, "-c", confFile},
		mqttAddr: addr, user: p.User, pass: p.Pass}, nil
}

// newBridge prepares cmd/bridge (bin) with bridgeConfig in dir.
func newBridge(p params, bin, dir string) (*server, error) {
	addrs, err := benchkit.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	mqttAddr, httpAddr := addrs[0], addrs[1]
	hash, err := bcrypt.GenerateFromPassword([]byte(p.Pass), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	confFile := filepath.Join(dir, "bridge.yaml")
	conf := benchkit.BridgeConfig(mqttAddr, httpAddr, filepath.Join(dir, "data"), p.User, string(hash), "chef/#")
	if p.MemoryStore {
		conf = strings.Replace(conf, "broker:\n", "broker:\n  persistence: {memory: true}\n", 1)
	}
	if p.NoHistory {
		conf += "history: {enabled: false}\n"
	}
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return &server{name: nameOurs, dir: dir, argv: []string{bin, "--config", confFile}, env: p.BridgeEnv,
		mqttAddr: mqttAddr, httpAddr: httpAddr, user: p.User, pass: p.Pass}, nil
}

// waitHTTP polls url with GET until it answers 200, proc exits, or timeout.
func waitHTTP(ctx context.Context, url string, proc *benchkit.Proc, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	err := benchkit.PollUntil(ctx, time.Now().Add(timeout), 50*time.Millisecond, proc, func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			last = err
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		last = fmt.Errorf("%s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return err
	}
	if last != nil && !strings.HasPrefix(last.Error(), "200") {
		return fmt.Errorf("%s not ready after %v: %v\nlog tail:\n%s", url, timeout, last, proc.LogTail())
	}
	return nil
}
