package app

import (
	"context"
	"strconv"
	"sync"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/history"
)

// TestHistoryRecorderLeavesNoStageBehindADisconnect: mochi calls OnPublished
// for a client not only on the client's reading goroutine but, for the
// publishes the router's pipeline holds, on the pipeline's (mqttin's
// Release), which goes on after the client disconnected. A client whose
// first publish the pipeline releases while the client disconnects must
// not keep a stage (and itself, as the stage's key) forever: each round
// here runs the two at once, as a client that sends a burst and goes does.
func TestHistoryRecorderLeavesNoStageBehindADisconnect(t *testing.T) {
	h, err := history.Open(t.Context(), history.DefaultConfig(), history.Options{DataDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	hook := &historyRecorder{history: h}
	server := mqtt.New(nil)
	pk := packets.Packet{TopicName: "burst/x", Payload: []byte("x")}
	for i := range 3000 {
		cl := server.NewClient(nil, "t", "burst-"+strconv.Itoa(i), false)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // the router's pipeline, releasing cl's first publish
			defer wg.Done()
			hook.Published(cl, pk.TopicName, pk.Payload, nil)
		}()
		go func() { // cl's reading goroutine, ending
			defer wg.Done()
			cl.Stop(packets.CodeDisconnect)
			hook.Disconnected(cl)
		}()
		wg.Wait()
		if _, ok := hook.stages.Load(cl); ok {
			t.Fatalf("round %d: a stage outlived its client's disconnect", i)
		}
	}
}
