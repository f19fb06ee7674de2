package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/ansible"
	"github.com/opsfirehose/firehose/broker"
)

// stack is the bridge's Ansible path in one process: the real broker on a
// loopback port, the real intake behind a real HTTP server, and one real
// MQTT subscriber on ansible/# that counts what it receives.
type stack struct {
	broker  *broker.Broker
	handler *ansible.Handler
	srv     *http.Server
	url     string
	sub     paho.Client

	received atomic.Int64
	// credit, when set, gets one value back per message received: senders
	// take credit before sending, so they can never run further ahead of
	// the subscriber than its capacity (and the broker never has to drop).
	credit atomic.Pointer[chan struct{}]
}

func startStack() (_ *stack, err error) {
	cfg := broker.DefaultConfig()
	cfg.Listeners = []broker.ListenerConfig{{Name: "mqtt", Type: broker.ListenerTCP, Address: "127.0.0.1:0"}}
	b, err := broker.New(cfg, broker.Options{Logger: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	s := &stack{broker: b}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := b.Start(context.Background()); err != nil {
		return nil, err
	}
	acfg := ansible.DefaultConfig()
	acfg.MaxBatch = 10000
	s.handler, err = ansible.New(acfg, ansible.Options{Publisher: b, Logger: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	s.handler.Register(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	s.url = "http://" + ln.Addr().String() + ansible.Path

	opts := paho.NewClientOptions().
		AddBroker("tcp://" + b.Addr("mqtt")).
		SetClientID(fmt.Sprintf("bench-sub-%d", time.Now().UnixNano())).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetOrderMatters(false).
		SetProtocolVersion(4)
	s.sub = paho.NewClient(opts)
	if tok := s.sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("subscriber connect: %v", tok.Error())
	}
	tok := s.sub.Subscribe("ansible/#", 1, func(paho.Client, paho.Message) {
		s.received.Add(1)
		if c := s.credit.Load(); c != nil {
			select {
			case <-*c:
			default:
			}
		}
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("subscribe: %v", tok.Error())
	}
	return s, nil
}

// waitReceived waits until the subscriber has received n messages in all.
func (s *stack) waitReceived(ctx context.Context, n int64, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		if s.received.Load() >= n {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the subscriber received %d of %d messages within %v", s.received.Load(), n, timeout)
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		time.Sleep(time.Millisecond) // polling a counter, not synchronising a test
	}
}

func (s *stack) close() {
	if s.sub != nil && s.sub.IsConnected() {
		s.sub.Disconnect(100)
	}
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = s.srv.Close()
		}
	}
	if s.broker != nil {
		_ = s.broker.Close(context.Background())
	}
}
