package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
)

// hugeConnect is a CONNECT whose fixed header claims 256 MiB, followed by
// the few bytes attack 1 of issue 12 sent: nothing more ever arrives.
var hugeConnect = []byte("\x10\xff\xff\xff\x7f\x00\x04MQTT")

// allocated runs fn and returns how many bytes the process allocated
// meanwhile (Go's cumulative count, so a buffer allocated and freed again
// still shows).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// waitEOF waits until the broker closes c, failing the test if it sends
// anything or keeps it open.
func waitEOF(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(testkit.Timeout))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatal("the broker kept the connection open")
	case err == nil:
		t.Fatalf("the broker answered %d bytes instead of closing", n)
	}
}

// TestClaimedLengthsAreNotAllocated is attack 1: eight connections whose
// CONNECT claims 256 MiB cost almost nothing and are closed at once, over
// TCP, TLS and WebSocket.
func TestClaimedLengthsAreNotAllocated(t *testing.T) {
	certs := testkit.TLS(t)
	cfg := testConfig()
	cfg.Listeners = append(cfg.Listeners,
		ListenerConfig{Name: "ws", Type: ListenerWebSocket, Address: "127.0.0.1:0"},
		ListenerConfig{Name: "mqtts", Type: ListenerTCP, Address: "127.0.0.1:0", TLS: &tlsconfig.Files{CertFile: certs.CertFile, KeyFile: certs.KeyFile}})
	b, reg := start(t, cfg)

	t.Run("tcp", func(t *testing.T) {
		grew := allocated(func() {
			conns := make([]net.Conn, 8)
			for i := range conns {
				c, err := net.Dial("tcp", b.Addr("mqtt"))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.Write(hugeConnect); err != nil {
					t.Fatal(err)
				}
				conns[i] = c
			}
			for _, c := range conns {
				waitEOF(t, c)
			}
		})
		if grew > 16<<20 {
			t.Fatalf("8 CONNECTs claiming 256 MiB allocated %d MiB", grew>>20)
		}
	})
	t.Run("tls", func(t *testing.T) {
		grew := allocated(func() {
			conns := make([]net.Conn, 8)
			for i := range conns {
				c, err := tls.Dial("tcp", b.Addr("mqtts"), &tls.Config{RootCAs: certs.CertPool(t)})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.Write(hugeConnect); err != nil {
					t.Fatal(err)
				}
				conns[i] = c
			}
			for _, c := range conns {
				waitEOF(t, c)
			}
		})
		if grew > 16<<20 {
			t.Fatalf("8 CONNECTs claiming 256 MiB over TLS allocated %d MiB", grew>>20)
		}
	})
	t.Run("websocket", func(t *testing.T) {
		grew := allocated(func() {
			conns := make([]*websocket.Conn, 8)
			for i := range conns {
				c, _, err := (&websocket.Dialer{Subprotocols: []string{"mqtt"}}).Dial("ws://"+b.Addr("ws")+"/mqtt", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.WriteMessage(websocket.BinaryMessage, hugeConnect); err != nil {
					t.Fatal(err)
				}
				conns[i] = c
			}
			for _, c := range conns {
				_ = c.SetReadDeadline(time.Now().Add(testkit.Timeout))
				_, _, err := c.ReadMessage()
				var ne net.Error
				if err == nil || errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the broker kept the WebSocket open (%v)", err)
				}
			}
		})
		if grew > 16<<20 {
			t.Fatalf("8 CONNECTs claiming 256 MiB over WebSocket allocated %d MiB", grew>>20)
		}
	})
	tooLarge := b.metrics.refused.WithLabelValues(refusedConnectTooLarge)
	testkit.Eventually(t, func() bool { return testutil.ToFloat64(tooLarge) == 24 },
		"connections_refused_total{reason=connect_too_large} = 24 (now %v)", testutil.ToFloat64(tooLarge))
	if n, err := testutil.GatherAndCount(reg, "firehose_broker_connections_refused_total"); err != nil || n == 0 {
		t.Errorf("refusals not exposed: %d, %v", n, err)
	}
}

// TestLaterPacketsCostOnlyWhatArrives: after CONNECT, a packet that claims
// a large size is held until its bytes arrive (with no limit configured,
// mochi would otherwise allocate the claim), and one over max_packet_size
// gets an MQTT 5 client DISCONNECT "packet too large".
func TestLaterPacketsCostOnlyWhatArrives(t *testing.T) {
	t.Run("no limit", func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxPacketSize = 0
		b, _ := start(t, cfg)
		grew := allocated(func() {
			for i := range 8 {
				c := testkit.DialRaw(t, b.Addr("mqtt"))
				id := fmt.Sprintf("big-%d", i)
				if ack := c.Connect(4, testkit.ConnectOptions{ClientID: id, Clean: true}); ack.ReasonCode != 0 {
					t.Fatalf("CONNACK %#x", ack.ReasonCode)
				}
				// A PUBLISH claiming 256 MiB, then the first bytes of its topic.
				if _, err := c.Conn.Write([]byte("\x30\xff\xff\xff\x7f\x00\x05abc")); err != nil {
					t.Fatal(err)
				}
				// The broker has read them: the gate holds them back from mochi.
				cl, ok := b.server.Clients.Get(id)
				if !ok {
					t.Fatalf("client %s not connected", id)
				}
				gc := cl.Net.Conn.(*gatedConn)
				testkit.Eventually(t, func() bool { return gc.held.Load() == 10 }, "the gate to hold the 10 bytes that arrived")
			}
		})
		if grew > 16<<20 {
			t.Fatalf("8 PUBLISH headers claiming 256 MiB allocated %d MiB", grew>>20)
		}
	})
	t.Run("over max_packet_size", func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxPacketSize = 1024
		b, _ := start(t, cfg)
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		ack := c.Connect(5, testkit.ConnectOptions{Clean: true})
		if ack.Properties.MaximumPacketSize != 1024 || ack.Properties.TopicAliasMaximum != 10 {
			t.Fatalf("CONNACK announces Maximum Packet Size %d and Topic Alias Maximum %d, want 1024 and 10",
				ack.Properties.MaximumPacketSize, ack.Properties.TopicAliasMaximum)
		}
		c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: "a", Payload: make([]byte, 2000)})
		got := c.WaitClosed()
		if len(got) != 1 || got[0].FixedHeader.Type != packets.Disconnect || got[0].ReasonCode != packets.ErrPacketTooLarge.Code {
			t.Fatalf("got %+v, want one DISCONNECT 0x95", got)
		}
		// MQTT 3.1.1 has no DISCONNECT from the server: the connection just ends.
		c3 := testkit.DialRaw(t, b.Addr("mqtt"))
		c3.Connect(4, testkit.ConnectOptions{Clean: true})
		c3.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: "a", Payload: make([]byte, 2000)})
		if got := c3.WaitClosed(); len(got) != 0 {
			t.Fatalf("an MQTT 3.1.1 client got %+v", got)
		}
		if got := testutil.ToFloat64(b.metrics.refused.WithLabelValues(refusedPacketTooLarge)); got != 2 {
			t.Errorf("connections_refused_total{reason=packet_too_large} = %v, want 2", got)
		}
	})
}

// TestSilentConnectionsAreClosedByTheDeadline is attack 2: connections that
// never send CONNECT are closed after connect_timeout, and leave nothing
// behind.
func TestSilentConnectionsAreClosedByTheDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.ConnectTimeout = time.Second
	b, _ := start(t, cfg)
	runtime.GC()
	baseline := runtime.NumGoroutine()
	conns := make([]net.Conn, 2000)
	for i := range conns {
		c, err := net.Dial("tcp", b.Addr("mqtt"))
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		conns[i] = c
	}
	for _, c := range conns {
		waitEOF(t, c)
	}
	testkit.Eventually(t, func() bool { return runtime.NumGoroutine() <= baseline+2 },
		"goroutines back to %d (now %d)", baseline, runtime.NumGoroutine())
	refused := b.metrics.refused.WithLabelValues(refusedConnectTimeout)
	testkit.Eventually(t, func() bool { return testutil.ToFloat64(refused) == 2000 },
		"connections_refused_total{reason=connect_timeout} = 2000 (now %v)", testutil.ToFloat64(refused))
	// A client that does send its CONNECT in time is served as before.
	testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{})
}

func willOf(topic string, retain bool) *packets.Packet {
	return &packets.Packet{FixedHeader: packets.FixedHeader{Qos: 1, Retain: retain}, TopicName: topic, Payload: []byte("offline")}
}

// TestWillsArePublishes is attack 3: a will is checked against the publish
// ACL at CONNECT, and a client whose will it could not publish is refused
// ("not authorized"); a will inside the ACL is published as before.
func TestWillsArePublishes(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "demo", PasswordHash: hash(t, "demo"), Publish: []string{"demo/#"}}}
	b, _ := start(t, cfg)
	sub := testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{})
	all := sub.Subscribe("#", 1)

	for _, tc := range []struct {
		name        string
		version     byte
		user, pass  string
		topic, want string
		code        byte
	}{
		{"anonymous, MQTT 3.1.1", 4, "", "", "chef/acme/web1/status", "", packets.Err3NotAuthorized.Code},
		{"anonymous, MQTT 5", 5, "", "", "chef/acme/web1/status", "", packets.ErrNotAuthorized.Code},
		{"outside the ACL", 4, "demo", "demo", "chef/acme/web1/status", "", packets.Err3NotAuthorized.Code},
		{"$SYS", 5, "demo", "demo", "$SYS/broker/version", "", packets.ErrNotAuthorized.Code},
	} {
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		ack := c.Connect(tc.version, testkit.ConnectOptions{ClientID: "will-" + tc.name, Username: tc.user, Password: tc.pass, Clean: true, Will: willOf(tc.topic, true)})
		if ack.ReasonCode != tc.code {
			t.Errorf("%s: CONNACK %#x, want %#x", tc.name, ack.ReasonCode, tc.code)
		}
		c.WaitClosed()
	}
	if got := testutil.ToFloat64(b.metrics.publishDenied); got != 4 {
		t.Errorf("publish_denied = %v, want 4 (one per will refused)", got)
	}

	// Inside the ACL: connect, then vanish without DISCONNECT.
	c := testkit.DialRaw(t, b.Addr("mqtt"))
	if ack := c.Connect(4, testkit.ConnectOptions{ClientID: "will-ok", Username: "demo", Password: "demo", Clean: true, Will: willOf("demo/web1/status", false)}); ack.ReasonCode != 0 {
		t.Fatalf("a will inside the ACL: CONNACK %#x", ack.ReasonCode)
	}
	c.Conn.Close()
	if got := testkit.Next(t, all); got.Topic != "demo/web1/status" || got.Payload != "offline" {
		t.Fatalf("got %+v, want the will on demo/web1/status (and no forged will before it)", got)
	}
	// No forged will was retained either.
	late := testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{})
	publishBarrier(t, b, late.Subscribe("chef/#", 1), "chef/barrier")
}

// TestSessionTakeoverAcrossIdentitiesIsRefused is attack 4: a client id
// belongs to the identity that holds its session. Another identity is
// refused and the owner keeps its connection; the same identity takes over,
// as MQTT requires.
func TestSessionTakeoverAcrossIdentitiesIsRefused(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{
		{Username: "pub", PasswordHash: hash(t, "pw"), Publish: []string{"pub/#"}},
		{Username: "other", PasswordHash: hash(t, "pw2"), Publish: []string{"other/#"}},
	}
	b, _ := start(t, cfg)
	sub := testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{})
	all := sub.Subscribe("pub/#", 1)

	owner := testkit.DialRaw(t, b.Addr("mqtt"))
	if ack := owner.Connect(4, testkit.ConnectOptions{ClientID: "publisher-1", Username: "pub", Password: "pw", Clean: true}); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %#x", ack.ReasonCode)
	}
	for _, tc := range []struct {
		name       string
		version    byte
		user, pass string
		code       byte
	}{
		{"anonymous", 4, "", "", packets.Err3ClientIdentifierNotValid.Code},
		{"anonymous, MQTT 5", 5, "", "", packets.ErrClientIdentifierNotValid.Code},
		{"another user", 4, "other", "pw2", packets.Err3ClientIdentifierNotValid.Code},
	} {
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		if ack := c.Connect(tc.version, testkit.ConnectOptions{ClientID: "publisher-1", Username: tc.user, Password: tc.pass, Clean: true}); ack.ReasonCode != tc.code {
			t.Errorf("%s: CONNACK %#x, want %#x", tc.name, ack.ReasonCode, tc.code)
		}
		c.WaitClosed()
	}
	// The owner survived all three.
	owner.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 1, TopicName: "pub/still-here", Payload: []byte("yes")})
	if ack := owner.Next(); ack.FixedHeader.Type != packets.Puback {
		t.Fatalf("owner got packet type %d, want PUBACK", ack.FixedHeader.Type)
	}
	if got := testkit.Next(t, all); got.Topic != "pub/still-here" {
		t.Fatalf("got %+v", got)
	}
	// The same identity takes the session over; the old connection ends.
	again := testkit.DialRaw(t, b.Addr("mqtt"))
	if ack := again.Connect(4, testkit.ConnectOptions{ClientID: "publisher-1", Username: "pub", Password: "pw", Clean: true}); ack.ReasonCode != 0 {
		t.Fatalf("same identity: CONNACK %#x", ack.ReasonCode)
	}
	owner.WaitClosed()
	if got := testutil.ToFloat64(b.metrics.refused.WithLabelValues(refusedClientIDTaken)); got != 3 {
		t.Errorf("connections_refused_total{reason=client_id_taken} = %v, want 3", got)
	}
}

// TestTopicAliasesResolveBeforeTheACL is attack 6: an alias-only publish
// inside a narrow ACL is delivered, at QoS 0 and 1.
func TestTopicAliasesResolveBeforeTheACL(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "demo", PasswordHash: hash(t, "demo"), Publish: []string{"demo/#"}}}
	b, _ := start(t, cfg)
	sub := testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{})
	all := sub.Subscribe("#", 1)

	c := testkit.DialRaw(t, b.Addr("mqtt"))
	c.Connect(5, testkit.ConnectOptions{Username: "demo", Password: "demo", Clean: true})
	aliased := func(topic string, qos byte, id uint16, payload string) packets.Packet {
		return packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, PacketID: id, TopicName: topic, Payload: []byte(payload),
			Properties: packets.Properties{TopicAlias: 1, TopicAliasFlag: true},
		}
	}
	c.Send(aliased("demo/a", 1, 1, "named"))
	if ack := c.Next(); ack.FixedHeader.Type != packets.Puback || ack.ReasonCode != 0 {
		t.Fatalf("got type %d reason %#x", ack.FixedHeader.Type, ack.ReasonCode)
	}
	c.Send(aliased("", 1, 2, "alias only, QoS 1"))
	if ack := c.Next(); ack.FixedHeader.Type != packets.Puback || ack.ReasonCode != 0 {
		t.Fatalf("alias-only QoS 1: got type %d reason %#x", ack.FixedHeader.Type, ack.ReasonCode)
	}
	c.Send(aliased("", 0, 0, "alias only, QoS 0"))
	for _, want := range []string{"named", "alias only, QoS 1", "alias only, QoS 0"} {
		if got := testkit.Next(t, all); got.Topic != "demo/a" || got.Payload != want {
			t.Fatalf("got %+v, want %q on demo/a", got, want)
		}
	}
	// An alias that was never set is a protocol error.
	bad := aliased("", 1, 3, "x")
	bad.Properties.TopicAlias = 2
	c.Send(bad)
	if got := c.WaitClosed(); len(got) != 1 || got[0].FixedHeader.Type != packets.Disconnect || got[0].ReasonCode != packets.ErrTopicAliasInvalid.Code {
		t.Fatalf("unknown alias: got %+v, want DISCONNECT 0x94", got)
	}
}

// TestSysTopicPublishesAreAnswered is attack 7: a user whose ACL is `#`
// publishing to $SYS gets an answer, never silence.
func TestSysTopicPublishesAreAnswered(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "admin", PasswordHash: hash(t, "pw"), Publish: []string{"#"}}}
	b, _ := start(t, cfg)
	sub := testkit.Connect(t, url(b, "tcp", "mqtt"), testkit.ClientOptions{})
	sys := sub.Subscribe("$SYS/x/#", 1)

	for _, tc := range []struct {
		version, qos byte
		ackType      byte
		reason       byte
	}{
		{5, 1, packets.Puback, packets.ErrNotAuthorized.Code},
		{5, 2, packets.Pubrec, packets.ErrNotAuthorized.Code},
		{4, 1, packets.Puback, 0},
		{4, 2, packets.Pubrec, 0},
	} {
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		c.Connect(tc.version, testkit.ConnectOptions{Username: "admin", Password: "pw", Clean: true})
		c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: tc.qos}, PacketID: 7, TopicName: "$SYS/x", Payload: []byte("forged")})
		if ack := c.Next(); ack.FixedHeader.Type != tc.ackType || ack.PacketID != 7 || ack.ReasonCode != tc.reason {
			t.Errorf("v%d QoS %d: got type %d id %d reason %#x, want type %d reason %#x",
				tc.version, tc.qos, ack.FixedHeader.Type, ack.PacketID, ack.ReasonCode, tc.ackType, tc.reason)
		}
		if tc.qos == 2 && tc.version == 4 {
			c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: 7})
			if ack := c.Next(); ack.FixedHeader.Type != packets.Pubcomp {
				t.Errorf("v4 QoS 2: PUBREL answered with type %d", ack.FixedHeader.Type)
			}
		}
	}
	// At QoS 0 an MQTT 5 client is told by DISCONNECT.
	c := testkit.DialRaw(t, b.Addr("mqtt"))
	c.Connect(5, testkit.ConnectOptions{Username: "admin", Password: "pw", Clean: true})
	c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: "$SYS/x", Payload: []byte("forged")})
	if got := c.WaitClosed(); len(got) != 1 || got[0].ReasonCode != packets.ErrNotAuthorized.Code {
		t.Fatalf("QoS 0: got %+v, want DISCONNECT 0x87", got)
	}
	if got := testutil.ToFloat64(b.metrics.publishDenied); got != 5 {
		t.Errorf("publish_denied = %v, want 5", got)
	}
	select {
	case m := <-sys:
		t.Fatalf("a forged $SYS message was delivered: %+v", m)
	default:
	}
	if err := b.Publish(context.Background(), bus.Message{Topic: "$SYS/x/barrier", Payload: []byte("barrier"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Next(t, sys); got.Payload != "barrier" {
		t.Fatalf("a forged $SYS message was delivered: %+v", got)
	}
}

// TestLoginThrottling is attack 5, functionally: failures back off per
// source and per username without a password check, a password that
// passed before still gets in, and the warnings are aggregated.
func TestLoginThrottling(t *testing.T) {
	cfg := testConfig()
	cfg.Users = []credentials.User{{Username: "pub", PasswordHash: hash(t, "right"), Publish: []string{"pub/#"}}}
	cfg.Login = Login{MaxFailures: 3, Backoff: time.Hour, MaxBackoff: time.Hour, BcryptConcurrency: 1}
	var logs testkit.SyncBuffer
	reg := prometheus.NewRegistry()
	b, err := New(cfg, Options{Logger: zerolog.New(&logs), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })

	connect := func(pass string) byte {
		c := testkit.DialRaw(t, b.Addr("mqtt"))
		defer c.Conn.Close()
		return c.Connect(5, testkit.ConnectOptions{Username: "pub", Password: pass, Clean: true}).ReasonCode
	}
	if code := connect("right"); code != 0 {
		t.Fatalf("first login: %#x", code)
	}
	for i := range 20 {
		want := packets.ErrBadUsernameOrPassword.Code
		if i >= 3 {
			want = packets.ErrConnectionRateExceeded.Code
		}
		if code := connect("guess"); code != want {
			t.Fatalf("guess %d: CONNACK %#x, want %#x", i+1, code, want)
		}
	}
	if got := testutil.ToFloat64(b.metrics.refused.WithLabelValues(refusedThrottled)); got != 17 {
		t.Errorf("throttled = %v, want 17", got)
	}
	// The password that passed before still gets in, without a bcrypt.
	if code := connect("right"); code != 0 {
		t.Fatalf("the known password was throttled too: %#x", code)
	}
	if n := strings.Count(logs.String(), "refused connection"); n != 1 {
		t.Errorf("%d warnings for 20 refused logins, want 1 (the rest aggregated):\n%s", n, logs.String())
	}
}
