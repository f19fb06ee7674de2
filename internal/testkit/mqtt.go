package testkit

import (
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Timeout bounds every wait in tests; generous because CI machines are noisy.
const Timeout = 10 * time.Second

var clientSeq atomic.Int64

// Received is one message a test subscriber got.
type Received struct {
	Topic    string
	Payload  string
	Retained bool
	QoS      byte
}

// Client is a real MQTT client (paho) connected over a real socket.
type Client struct {
	paho.Client
	t testing.TB
}

// ClientOptions configure Connect.
type ClientOptions struct {
	Username, Password string
	TLS                *tls.Config
	// OnLost is told when the broker drops the connection.
	OnLost func(error)
}

// Connect connects a paho client to url (tcp://, ssl://, ws://, wss://) and
// disconnects it when the test ends. It fails the test if the connection is
// refused; use Dial to inspect a refusal.
func Connect(t testing.TB, url string, o ClientOptions) *Client {
	t.Helper()
	c, err := Dial(t, url, o)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	return c
}

// Dial is Connect that returns the connection error instead of failing.
func Dial(t testing.TB, url string, o ClientOptions) (*Client, error) {
	t.Helper()
	opts := paho.NewClientOptions().
		AddBroker(url).
		SetClientID(fmt.Sprintf("test-%d-%d", time.Now().UnixNano()%1e6, clientSeq.Add(1))).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(Timeout).
		SetCleanSession(true).
		SetProtocolVersion(4). // no fallback to 3.1: one refusal is one attempt
		SetUsername(o.Username).
		SetPassword(o.Password)
	if o.TLS != nil {
		opts.SetTLSConfig(o.TLS)
	}
	if o.OnLost != nil {
		opts.SetConnectionLostHandler(func(_ paho.Client, err error) { o.OnLost(err) })
	}
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(Timeout) {
		return nil, fmt.Errorf("connect %s: timed out", url)
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return &Client{Client: c, t: t}, nil
}

// Subscribe subscribes to filter and returns a channel of what arrives. The
// subscription is in place (SUBACK received) when it returns.
func (c *Client) Subscribe(filter string, qos byte) <-chan Received {
	c.t.Helper()
	ch := make(chan Received, 10000)
	tok := c.Client.Subscribe(filter, qos, func(_ paho.Client, m paho.Message) {
		ch <- Received{Topic: m.Topic(), Payload: string(m.Payload()), Retained: m.Retained(), QoS: m.Qos()}
	})
	if !tok.WaitTimeout(Timeout) {
		c.t.Fatalf("subscribe %s: timed out", filter)
	}
	if err := tok.Error(); err != nil {
		c.t.Fatalf("subscribe %s: %v", filter, err)
	}
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for f, code := range st.Result() {
			if code == 0x80 {
				c.t.Fatalf("subscribe %s: refused by the broker", f)
			}
		}
	}
	return ch
}

// Publish publishes and waits for the broker's acknowledgement (QoS 1) or the write (QoS 0).
func (c *Client) Publish(topic string, qos byte, retained bool, payload string) error {
	tok := c.Client.Publish(topic, qos, retained, payload)
	if !tok.WaitTimeout(Timeout) {
		return fmt.Errorf("publish %s: timed out", topic)
	}
	return tok.Error()
}

// Next waits for the next message on ch, failing the test after Timeout.
func Next[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	return NextWithin(t, Timeout, ch)
}

// NextWithin is Next bounded by d, for a destination that may take longer by
// design (a sink reconnecting after an outage).
func NextWithin[T any](t testing.TB, d time.Duration, ch <-chan T) T {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(d):
		t.Fatal("no message arrived")
		var zero T
		return zero
	}
}

// Signal is a one-shot event a test can wait for.
type Signal struct {
	once sync.Once
	ch   chan struct{}
	err  atomic.Value
}

// NewSignal returns an unfired signal.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{})} }

// Fire fires the signal once, keeping the first error.
func (s *Signal) Fire(err error) {
	s.once.Do(func() {
		if err != nil {
			s.err.Store(err)
		}
		close(s.ch)
	})
}

// Wait reports whether the signal fired within Timeout.
func (s *Signal) Wait() bool {
	select {
	case <-s.ch:
		return true
	case <-time.After(Timeout):
		return false
	}
}
