package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/app/brokeronly"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/config/configcore"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
)

// The targets, in the table's column order.
const (
	targetBroker    = "broker"       // cmd/broker's brokeronly.Server, in-process
	targetBridge    = "bridge+route" // cmd/bridge's app.Bridge with a required route to JetStream, in-process
	targetMosquitto = "mosquitto"    // Debian's mosquitto, the reference
)

var targetNames = []string{targetBroker, targetBridge, targetMosquitto}

// The same accounts on every target: anonymous clients may read everything
// and publish nothing; the publisher may publish under conf/ and read
// everything; the limited user may only read under conf/ (subscribing
// elsewhere is refused: the subscribe-failure check).
const (
	pubUser     = "conf-pub"
	pubPass     = "conf-pub-secret"
	limitedUser = "conf-limited"
	limitedPass = "conf-limited-secret"
	// maxPacketSize is the largest packet every target accepts from a
	// client, so that the maximum-packet-size check has a limit to test.
	maxPacketSize = 4096
)

// target is a broker under test, serving MQTT on addr.
type target struct {
	name       string
	addr       string
	user, pass string // the publisher account
}

// startTarget starts the named target for the test, on free ports, and
// stops it when the test ends.
func startTarget(t *testing.T, name string) *target {
	t.Helper()
	tg := &target{name: name, user: pubUser, pass: pubPass}
	switch name {
	case targetBroker:
		tg.addr = startBroker(t)
	case targetBridge:
		tg.addr = startBridge(t)
	case targetMosquitto:
		tg.addr = startMosquitto(t)
	default:
		t.Fatalf("unknown target %q", name)
	}
	return tg
}

// oursConfig is the YAML both of our targets share: the accounts above, a
// packet size limit, everything on loopback with kernel-chosen ports.
func oursConfig(t *testing.T) string {
	t.Helper()
	hash := func(pass string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	return fmt.Sprintf(`data_dir: %q
http:
  address: "127.0.0.1:0"
broker:
  listeners:
    - name: mqtt
      type: tcp
      address: "127.0.0.1:0"
  allow_anonymous: true
  max_packet_size: %d
  users:
    - username: %s
      password_hash: %q
      publish: ["conf/#"]
    - username: %s
      password_hash: %q
      subscribe: ["conf/#"]
`, t.TempDir(), maxPacketSize, pubUser, hash(pubPass), limitedUser, hash(limitedPass))
}

func parseConfig(t *testing.T, yaml string) config.Config {
	t.Helper()
	cfg := config.Default()
	if err := config.Parse([]byte(yaml), &cfg, config.Options{}); err != nil {
		t.Fatalf("config:\n%s\n%v", yaml, err)
	}
	return cfg
}

// startBroker runs cmd/broker's application in-process.
func startBroker(t *testing.T) string {
	t.Helper()
	cfg := brokeronly.Default()
	if err := brokeronly.Parse([]byte(oursConfig(t)), &cfg, configcore.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := brokeronly.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, s.Close) })
	return s.Broker().Addr("mqtt")
}

// startBridge runs cmd/bridge's application in-process with one required
// route of everything to a JetStream stream on an in-process nats-server,
// and waits until /readyz says the route's sink is up.
func startBridge(t *testing.T) string {
	t.Helper()
	ns := testnats.Start(t)
	yaml := oursConfig(t) + fmt.Sprintf(`sinks:
  js:
    type: jetstream
    urls: [%q]
    stream:
      name: CONFORMANCE
      create: true
      subjects: ["firehose.>"]
      storage: file
routes:
  - name: all
    filters: ["#"]
    sink: js
`, ns.URL())
	b, err := app.New(t.Context(), parseConfig(t, yaml), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, b.Close) })
	testkit.WaitHTTP(t, nil, "http://"+b.HTTPAddr()+"/readyz")
	return b.Broker().Addr("mqtt")
}

func shutdown(t *testing.T, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// startMosquitto runs Debian's mosquitto with the same accounts: a
// password file made by mosquitto_passwd and an ACL file.
func startMosquitto(t *testing.T) string {
	t.Helper()
	passwd := testkit.RequireCommand(t, "mosquitto_passwd")
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "passwd")
	for i, acct := range [][2]string{{pubUser, pubPass}, {limitedUser, limitedPass}} {
		args := []string{"-b", pwFile, acct[0], acct[1]}
		if i == 0 {
			args = append([]string{"-c"}, args...)
		}
		if out, err := execCommand(passwd, args...); err != nil {
			t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
		}
	}
	// Lines before the first "user" apply to anonymous clients. "#" does
	// not match $SYS topics in an ACL, so they are named.
	acl := strings.Join([]string{
		"topic read #", "topic read $SYS/#",
		"user " + pubUser, "topic readwrite conf/#", "topic read #", "topic read $SYS/#",
		"user " + limitedUser, "topic read conf/#",
	}, "\n") + "\n"
	aclFile := filepath.Join(dir, "acl")
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := []string{"password_file " + pwFile, "acl_file " + aclFile, fmt.Sprintf("max_packet_size %d", maxPacketSize),
		// Back to mosquitto's defaults, which testkit raises for throughput
		// tests (a later line wins): the reference runs as shipped.
		"max_inflight_messages 20", "max_queued_messages 1000"}
	if os.Geteuid() == 0 {
		// Otherwise mosquitto drops to user "mosquitto", which cannot read
		// the files in the test's private temp dir.
		extra = append(extra, "user root")
	}
	m := testkit.StartMosquitto(t, extra...)
	waitMQTT(t, m.Addr)
	return m.Addr
}

// waitMQTT waits until addr answers an MQTT CONNECT (mosquitto accepts TCP
// connections a moment before it has read its password file).
func waitMQTT(t *testing.T, addr string) {
	t.Helper()
	testkit.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		// CONNECT, MQTT 3.1.1, clean session, keepalive 0, client id "ready".
		_, _ = c.Write([]byte{0x10, 17, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 0, 0, 5, 'r', 'e', 'a', 'd', 'y'})
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 4)
		n, _ := c.Read(b)
		return n == 4 && b[0] == 0x20 && b[3] == 0
	}, "mosquitto at %s to answer CONNECT", addr)
}
