package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// The nats-mqtt baseline's stream: it captures the subjects nats-server's
// MQTT listener maps the publishers' topics to (bench/<i> -> bench.<i>).
const (
	mqttStreamName    = "MQTTBENCH"
	mqttStreamSubject = "bench.>"
)

// natsServer is an in-process nats-server with JetStream, file storage in
// storeDir, on a free loopback port, and this benchmark's own connection to
// it for counting and removing the streams. It also serves MQTT on its own
// listener (the nats-mqtt baseline), where the benchmark's user logs in
// with its password (a bcrypt hash in the server's config, as for the
// bridge); other NATS clients, such as the bridge's sink, need no login.
type natsServer struct {
	srv      *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	mqttAddr string
}

func startNATS(storeDir, mqttUser, mqttPassword, mqttPasswordHash string) (*natsServer, error) {
	mqttAddr, err := benchkit.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(mqttAddr)
	mqttPort, _ := strconv.Atoi(port)
	srv, err := server.NewServer(&server.Options{
		ServerName: "bench-fanout", // nats-server's MQTT needs one
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   storeDir,
		NoLog:      true,
		NoSigs:     true,
		MQTT: server.MQTTOpts{
			Host:     "127.0.0.1",
			Port:     mqttPort,
			Username: mqttUser,
			Password: mqttPasswordHash,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats-server did not become ready within 10s")
	}
	n := &natsServer{srv: srv, mqttAddr: mqttAddr}
	// The first MQTT client of an account makes nats-server create its
	// MQTT streams, which can take seconds on a busy machine (and longer
	// than a readiness probe's per-attempt timeout): do it once, now.
	if err := n.warmUpMQTT(mqttUser, mqttPassword); err != nil {
		n.stop()
		return nil, err
	}
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

// warmUpMQTT connects one MQTT client and waits up to a minute for its CONNACK.
func (n *natsServer) warmUpMQTT(user, pass string) error {
	c, err := mqttload.Dial(mqttload.Options{Addr: n.mqttAddr, ClientID: "bench-warm-up", Username: user, Password: pass, Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("nats-server's MQTT listener: %w", err)
	}
	c.Start() // Close waits for the reader and writer
	c.Close()
	return nil
}

func (n *natsServer) stop() {
	if n.nc != nil {
		n.nc.Close()
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// storedMsgs is the number of messages in the stream, from Stream.Info.
func (n *natsServer) storedMsgs(ctx context.Context, name string) (int64, error) {
	st, err := n.js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s info: %w", name, err)
	}
	return int64(info.State.Msgs), nil
}

// deleteStream removes a stream, if there is one, so that the next routed
// bridge creates it empty and counts are per round.
func (n *natsServer) deleteStream(ctx context.Context, name string) error {
	err := n.js.DeleteStream(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("deleting stream %s: %w", name, err)
	}
	return nil
}

// resetMQTTStream makes the nats-mqtt baseline's stream anew and empty,
// with file storage like the routed stream.
func (n *natsServer) resetMQTTStream(ctx context.Context) error {
	if err := n.deleteStream(ctx, mqttStreamName); err != nil {
		return err
	}
	_, err := n.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     mqttStreamName,
		Subjects: []string{mqttStreamSubject},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("creating stream %s: %w", mqttStreamName, err)
	}
	return nil
}
