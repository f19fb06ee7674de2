package broker

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// logLine is one JSON line of the broker's log.
type logLine struct {
	Level, Message, Component       string
	Client, Username, Topic, Remote string
	Denials, Suppressed             int
	raw                             string
}

func parseLog(t *testing.T, s string) []logLine {
	t.Helper()
	var lines []logLine
	for _, raw := range strings.Split(strings.TrimSpace(s), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		l.raw = raw
		lines = append(lines, l)
	}
	return lines
}

// startLogged starts a broker that logs JSON at info to logs, with the
// interval of its denials' and refused logins' counts given, and one user
// who may publish under pub/#.
func startLogged(t *testing.T, logs *testkit.SyncBuffer, interval time.Duration) *Broker {
	t.Helper()
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"pub/#"}}}
	b, err := New(cfg, Options{Logger: zerolog.New(logs).Level(zerolog.InfoLevel), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	b.auth.denials.interval = interval
	b.auth.loginLog.interval = interval
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// TestEveryDenialIsLoggedAndLibraryNoiseIsNot is issue 16's row 4, with
// real clients: every denied publish is logged with its client, user and
// topic, anonymous or not, MQTT 5 or 3.1.1; a client that goes on is
// logged once and then counted; and at info nothing comes from mochi, for
// refusals, disconnects and malformed packets alike.
func TestEveryDenialIsLoggedAndLibraryNoiseIsNot(t *testing.T) {
	pub := testkit.RequireCommand(t, "mosquitto_pub")
	var logs testkit.SyncBuffer
	b := startLogged(t, &logs, time.Hour) // every count is logged at Close
	host, port, _ := net.SplitHostPort(b.Addr("mqtt"))
	run := func(args ...string) {
		t.Helper()
		out, _ := exec.Command(pub, append([]string{"-h", host, "-p", port, "-m", "forged"}, args...)...).CombinedOutput()
		t.Logf("mosquitto_pub %s: %s", strings.Join(args, " "), out)
	}
	run("-V", "5", "-q", "1", "-i", "anon5", "-t", "pub/a")
	run("-V", "311", "-q", "1", "-i", "anon311", "-t", "pub/b")
	run("-V", "5", "-q", "1", "-i", "user5", "-u", "pub", "-P", "pw", "-t", "chef/c")
	run("-V", "311", "-q", "1", "-i", "user311", "-u", "pub", "-P", "pw", "-t", "chef/d")
	run("-V", "5", "-q", "0", "-i", "user5q0", "-u", "pub", "-P", "pw", "-t", "chef/e")
	run("-V", "311", "-q", "1", "-i", "sys311", "-u", "pub", "-P", "pw", "-t", "$SYS/f")
	// Ordinary traffic: an allowed publish, a wrong password, both 3.1.1.
	run("-V", "311", "-q", "1", "-i", "fine", "-u", "pub", "-P", "pw", "-t", "pub/ok")
	run("-V", "311", "-q", "1", "-i", "wrongpw", "-u", "pub", "-P", "nope", "-t", "pub/ok")

	// A client that goes on: 50 denials, one line now and one count later.
	c := testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{Username: "pub", Password: "pw"})
	for range 50 {
		if err := c.Publish("chef/flood", 1, false, "forged"); err != nil {
			t.Fatal(err)
		}
	}
	c.Disconnect(250)

	// What mochi used to log at warn: a malformed publish (with a 1.5 KB
	// packet dump) and a keepalive it finds too low.
	raw := testkit.DialRaw(t, b.Addr("mqtt"))
	raw.Connect(4, testkit.ConnectOptions{ClientID: "malformed", Username: "pub", Password: "pw", Clean: true})
	raw.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 1, TopicName: "pub/+", Payload: []byte(strings.Repeat("x", 1500))})
	raw.WaitClosed()
	run("-V", "311", "-q", "1", "-k", "5", "-i", "lowkeepalive", "-u", "pub", "-P", "pw", "-t", "pub/ok")

	testkit.Eventually(t, func() bool { return testutil.ToFloat64(b.metrics.publishDenied) >= 56 }, "56 denials counted")
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	lines := parseLog(t, logs.String())
	type key struct{ client, username, topic string }
	got := map[key]int{}
	for _, l := range lines {
		if strings.HasPrefix(l.Message, "refused publish: ") {
			got[key{l.Client, l.Username, l.Topic}]++
		}
	}
	for _, k := range []key{
		{"anon5", "", "pub/a"}, {"anon311", "", "pub/b"},
		{"user5", "pub", "chef/c"}, {"user311", "pub", "chef/d"}, {"user5q0", "pub", "chef/e"},
		{"sys311", "pub", "$SYS/f"},
	} {
		if got[k] != 1 {
			t.Errorf("denial of %+v logged %d times, want once", k, got[k])
		}
	}
	floods, more := 0, 0
	for _, l := range lines {
		if l.Topic != "chef/flood" {
			continue
		}
		switch {
		case strings.HasPrefix(l.Message, "refused publish: "):
			floods++
		case strings.HasPrefix(l.Message, "49 more denials in the last "):
			more++
			if l.Denials != 49 || l.Username != "pub" || l.Client == "" {
				t.Errorf("the count's line lacks its fields: %s", l.raw)
			}
		default:
			t.Errorf("unexpected line for chef/flood: %s", l.raw)
		}
	}
	if floods != 1 || more != 1 {
		t.Errorf("50 denials of one client and topic gave %d first lines and %d counts, want 1 and 1:\n%s", floods, more, logs.String())
	}
	for _, l := range lines {
		if l.Component == "mqtt" || len(l.raw) > 1024 {
			t.Errorf("library noise at info: %s", l.raw)
		}
		if strings.Contains(l.Topic, "pub/ok") {
			t.Errorf("an allowed publish was logged: %s", l.raw)
		}
	}
	if !strings.Contains(logs.String(), `"client":"wrongpw"`) {
		t.Errorf("the refused login is not logged with its client:\n%s", logs.String())
	}
}

// TestDenialCountsAreLoggedEachInterval: while a client goes on being
// denied, a count is logged each interval, and the counts add up.
func TestDenialCountsAreLoggedEachInterval(t *testing.T) {
	var logs testkit.SyncBuffer
	b := startLogged(t, &logs, 20*time.Millisecond)
	c := testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{})
	total := 0
	counted := func() (first, more int) {
		for _, l := range parseLog(t, logs.String()) {
			switch {
			case l.Topic != "pub/x":
			case strings.HasPrefix(l.Message, "refused publish: anonymous clients are read-only"):
				first++
			case strings.Contains(l.Message, " more denials in the last "):
				more += l.Denials
			}
		}
		return first, more
	}
	// Publish until a count has been logged by the timer, not by Close.
	testkit.Eventually(t, func() bool {
		for range 5 {
			if err := c.Publish("pub/x", 1, false, "forged"); err != nil {
				t.Fatal(err)
			}
			total++
		}
		_, more := counted()
		return more > 0
	}, "a count logged while the client goes on")
	_ = b.Close(t.Context())
	first, more := counted()
	if first+more != total || first < 1 {
		t.Errorf("%d denials logged as %d first lines and counts of %d in all:\n%s", total, first, more, logs.String())
	}
}

// TestRefusedLoginsAreCountedWhenTheyStop: a burst of refused logins gives
// one full line, and the count of the rest is logged when the interval ends,
// with no later login to carry it and before the broker closes.
func TestRefusedLoginsAreCountedWhenTheyStop(t *testing.T) {
	var logs testkit.SyncBuffer
	b := startLogged(t, &logs, 20*time.Millisecond)
	counted := func() (full, more int) {
		for _, l := range parseLog(t, logs.String()) {
			switch {
			case strings.HasPrefix(l.Message, "refused connection: "):
				full++
			case strings.Contains(l.Message, " more refused connections in the last "):
				more += l.Suppressed
			}
		}
		return full, more
	}
	total := 0
	refuse := func() {
		if _, err := testkit.Dial(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{Username: "pub", Password: "wrong"}); err == nil {
			t.Fatal("a wrong password was let in")
		}
		total++
	}
	// Refuse until the timer has logged a count, then stop.
	testkit.Eventually(t, func() bool {
		for range 5 {
			refuse()
		}
		_, more := counted()
		return more > 0
	}, "a count of refused logins logged while they go on")
	refuse()
	testkit.Eventually(t, func() bool {
		full, more := counted()
		return full+more == total
	}, "every one of %d refused logins logged or counted, without a later one", total)
	full, more := counted()
	if full < 1 || more < 1 {
		t.Errorf("%d refused logins gave %d full lines and counts of %d:\n%s", total, full, more, logs.String())
	}
}
