// Package testnats runs real nats-server instances in-process for tests:
// one server with JetStream, restartable on the same port and store, or a
// three-node JetStream cluster. It is imported only by tests.
package testnats

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opsfirehose/firehose/internal/testkit"
)

// Server is one nats-server that can be stopped and started again on the
// same port with the same JetStream store.
type Server struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
}

// Start runs a server with JetStream (file store in a temporary directory) on
// a free loopback port, and shuts it down when the test ends. Options, when
// given, change the server's options before it starts (max_payload, say).
func Start(t testing.TB, options ...func(*server.Options)) *Server {
	t.Helper()
	s := newServer(t, options...)
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// newServer prepares, without starting it, a server with JetStream (file
// store in a temporary directory) on a free loopback port, changed by options.
func newServer(t testing.TB, options ...func(*server.Options)) *Server {
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      testkit.FreePortNumber(t),
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	for _, o := range options {
		o(&s.opts)
	}
	return s
}

// URL is the client URL, stable across restarts.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port) }

// Stop shuts the server down (idempotent), as a crash of NATS would look to clients.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart starts the server again (or for the first time) and waits until it
// accepts connections.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(testkit.WaitTimeout) {
		s.t.Fatal("nats-server did not become ready")
	}
	s.srv = srv
}

// Cluster is three JetStream servers routed together.
type Cluster struct {
	Servers []*Server
}

// StartCluster runs a three-node JetStream cluster and waits until it has a
// meta leader.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	clusterPorts := []int{testkit.FreePortNumber(t), testkit.FreePortNumber(t), testkit.FreePortNumber(t)}
	var routes []*url.URL
	for _, p := range clusterPorts {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &Cluster{}
	for i, p := range clusterPorts {
		s := newServer(t, func(o *server.Options) {
			o.ServerName = fmt.Sprintf("n%d", i+1)
			o.Cluster = server.ClusterOpts{Name: "firehose-test", Host: "127.0.0.1", Port: p}
			o.Routes = routes
		})
		opts := s.opts
		srv, err := server.NewServer(&opts)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start()
		s.srv = srv
		c.Servers = append(c.Servers, s)
		t.Cleanup(s.Stop)
	}
	for _, s := range c.Servers {
		if !s.srv.ReadyForConnections(testkit.WaitTimeout) {
			t.Fatal("cluster node did not become ready")
		}
	}
	// An election on a busy machine may take longer than Eventually's bound.
	testkit.EventuallyWithin(t, 4*testkit.WaitTimeout, c.hasMetaLeader, "the JetStream cluster to elect a meta leader")
	return c
}

func (c *Cluster) hasMetaLeader() bool {
	for _, s := range c.Servers {
		if s.srv != nil && s.srv.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

// URLs are every node's client URL.
func (c *Cluster) URLs() []string {
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, s.URL())
	}
	return urls
}

// JetStream connects a client to the server(s) at url (a comma-separated
// list, as nats.Connect takes) and returns its JetStream context; the
// connection closes when the test ends.
func JetStream(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
