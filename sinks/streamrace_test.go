package sinks_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/testkit"
	"github.com/opsfirehose/firehose/internal/testnats"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
)

// TestJetStreamSinksStartingTogetherMakeTheStreamOnce starts several
// JetStream sinks with stream.create at the same moment, as bridges of one
// fleet started together do, on one server and on a three-node cluster
// with an R3 stream. Each must find the stream made, by itself or by
// another, without a failed attempt: a create that lost the race ("already
// in use", or a proposal that timed out while the other one's was applied)
// is the stream being there, not an outage, and a failed attempt is a
// bridge that answers 503 for seconds.
func TestJetStreamSinksStartingTogetherMakeTheStreamOnce(t *testing.T) {
	const bridges = 4
	t.Run("server", func(t *testing.T) {
		srv := testnats.Start(t)
		startTogether(t, bridges, natsConfig(natssink.TypeJetStream, srv.URL()))
	})
	t.Run("cluster", func(t *testing.T) {
		c := testnats.StartCluster(t)
		cfg := natsConfig(natssink.TypeJetStream, c.URLs()...)
		cfg.Stream.Replicas = 3
		startTogether(t, bridges, cfg)
	})
}

func startTogether(t *testing.T, n int, cfg natssink.Config) {
	t.Helper()
	logs := make([]testkit.SyncBuffer, n)
	made := make([]*natssink.NATS, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := natssink.NewNATS("js", cfg, zerolog.New(&logs[i]))
			if err != nil {
				t.Error(err)
				return
			}
			made[i] = s
		}()
	}
	close(start)
	wg.Wait()
	for _, s := range made {
		if s != nil {
			t.Cleanup(func() { _ = s.Close(context.Background()) })
		}
	}
	if t.Failed() {
		return
	}
	for i, s := range made {
		testkit.EventuallyWithin(t, 4*testkit.WaitTimeout, s.Ready, "sink %d to be ready; its log:\n%s", i, &logs[i])
	}
	for i := range made {
		if log := logs[i].String(); strings.Contains(log, `"level":"error"`) {
			t.Errorf("sink %d failed to make the stream before it was ready:\n%s", i, log)
		}
	}
	st, err := sinktestStream(t, cfg.URLs[0])
	if err != nil {
		t.Fatalf("no stream: %v", err)
	}
	if r := st.CachedInfo().Config.Replicas; r != max(cfg.Stream.Replicas, 1) {
		t.Errorf("the stream has %d replicas, want %d", r, cfg.Stream.Replicas)
	}
}
