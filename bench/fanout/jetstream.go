package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServer is an in-process nats-server with JetStream, file storage in
// storeDir, on a free loopback port, and this benchmark's own connection to
// it for counting and removing the stream.
type natsServer struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startNATS(storeDir string) (*natsServer, error) {
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  storeDir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats-server did not become ready within 10s")
	}
	n := &natsServer{srv: srv}
	if n.nc, err = nats.Connect(srv.ClientURL(), nats.Name("bench-fanout")); err != nil {
		n.stop()
		return nil, fmt.Errorf("connecting to the in-process nats-server: %w", err)
	}
	if n.js, err = jetstream.New(n.nc); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

func (n *natsServer) url() string { return n.srv.ClientURL() }

func (n *natsServer) stop() {
	if n.nc != nil {
		n.nc.Close()
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// storedMsgs is the number of messages in the stream, from Stream.Info.
func (n *natsServer) storedMsgs(ctx context.Context) (int64, error) {
	st, err := n.js.Stream(ctx, streamName)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", streamName, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s info: %w", streamName, err)
	}
	return int64(info.State.Msgs), nil
}

// deleteStream removes the stream, if there is one, so that the next routed
// bridge creates it empty and counts are per round.
func (n *natsServer) deleteStream(ctx context.Context) error {
	err := n.js.DeleteStream(ctx, streamName)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("deleting stream %s: %w", streamName, err)
	}
	return nil
}
