package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
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

// startMosquitto writes a password file, an ACL file and a config, and starts
// mosquitto on a free loopback port, which it returns.
func startMosquitto(bin, passwdBin, dir, user, pass string) (*benchkit.Proc, string, error) {
	addr, err := benchkit.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	pwFile := filepath.Join(dir, "mosquitto.passwd")
	out, err := exec.Command(passwdBin, "-b", "-c", pwFile, user, pass).CombinedOutput()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v: %s", passwdBin, err, out)
	}
	aclFile := filepath.Join(dir, "mosquitto.acl")
	acl := fmt.Sprintf("user %s\ntopic readwrite bench/#\n", user)
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		return nil, "", err
	}
	conf := mosquittoConfig(port, pwFile, aclFile)
	confFile := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, "", err
	}
	proc, err := benchkit.Start("mosquitto", dir, nil, bin, "-c", confFile)
	return proc, addr, err
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

// oursConfig renders cmd/broker's YAML config. Only log, http.address,
// broker.listeners and broker.users are relied on; adjust here if
// cmd/broker's schema moves. Its HTTP listener (health and metrics) goes on
// a port the kernel chooses, so that it never clashes with a broker already
// running on its default 127.0.0.1:9883.
func oursConfig(addr, user, passwordHash string) string {
	return fmt.Sprintf(`log:
  level: warn
http:
  address: "127.0.0.1:0"
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
	bin := filepath.Join(dir, "firehose-broker")
	if err := benchkit.Build(ctx, pkg, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// startOurs writes the config and starts the built broker binary on a free
// loopback port, which it returns.
func startOurs(bin, dir, user, pass string, env []string) (*benchkit.Proc, string, error) {
	addr, err := benchkit.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), 10)
	if err != nil {
		return nil, "", err
	}
	confFile := filepath.Join(dir, "firehose.yaml")
	if err := os.WriteFile(confFile, []byte(oursConfig(addr, user, string(hash))), 0o600); err != nil {
		return nil, "", err
	}
	proc, err := benchkit.Start("ours", dir, env, bin, "--config", confFile)
	return proc, addr, err
}
