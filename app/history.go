package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/history"
)

// openHistory opens the bus's history and has the embedded broker hand it
// every message it delivers.
// In external mode there is no broker of the bridge's to record from: the
// history stays off, and says so.
func (b *Bridge) openHistory(ctx context.Context) error {
	if !b.cfg.History.Enabled {
		return nil
	}
	if b.broker == nil {
		b.log.Warn().Msg("history is not kept in external broker mode (broker.mode: external): replay from the external broker's own store, or route to JetStream")
		return nil
	}
	h, err := history.Open(ctx, b.cfg.History, history.Options{
		DataDir: b.cfg.DataDir, Sinks: b.cfg.Sinks, Registerer: b.registry, Logger: b.log,
	})
	if err != nil {
		return err
	}
	b.history = h
	if err := b.broker.SetRecorder(&historyRecorder{history: h}); err != nil {
		return err
	}
	b.http.Handle(history.Path, history.NewHandler(h, brokerAccess{b.broker}))
	return nil
}

// historyRecorder hands the history every message the embedded broker
// delivers, the bridge's own (with their headers, as MQTT v5 user
// properties) and its clients'. It never blocks: History.Record does not.
// Each MQTT client's messages go through a history.Stage of its own, so
// that publishers do not contend for the history's lock; the bridge's own,
// published on many goroutines through mochi's inline client, go to the
// history directly.
type historyRecorder struct {
	history *history.History
	stages  sync.Map // *mqtt.Client: *history.Stage
}

var _ broker.Recorder = (*historyRecorder)(nil)

// Published hands the history a message of cl's, through cl's stage.
func (h *historyRecorder) Published(cl *mqtt.Client, topic string, payload []byte, user []packets.UserProperty) {
	var id, source, received string
	for _, p := range user {
		switch p.Key {
		case bus.HeaderMsgID:
			id = p.Val
		case bus.HeaderSource:
			source = p.Val
		case bus.HeaderReceivedAt:
			received = p.Val
		}
	}
	if s := h.stage(cl); s != nil {
		s.RecordFields(topic, payload, id, source, received)
		return
	}
	h.history.RecordFields(topic, payload, id, source, received)
}

// stage is cl's stage, made on its first message; nil for the inline
// client, and for a client that is gone: the router's pipeline releases
// cl's publishes on a goroutine of its own (mqttin), and goes on after
// cl has disconnected.
func (h *historyRecorder) stage(cl *mqtt.Client) *history.Stage {
	if cl == nil || cl.Net.Inline {
		return nil
	}
	if s, ok := h.stages.Load(cl); ok {
		return s.(*history.Stage)
	}
	if cl.Closed() {
		return nil
	}
	s := h.history.NewStage()
	if was, loaded := h.stages.LoadOrStore(cl, s); loaded {
		s.Close() // cl's reading goroutine and the pipeline both made one
		return was.(*history.Stage)
	}
	// mochi closes cl before it reports the disconnect: had Disconnected
	// come since the check above, it found no stage to close, and this one
	// would be kept (with cl) forever.
	if cl.Closed() {
		if h.stages.CompareAndDelete(cl, s) {
			s.Close()
		}
		return nil
	}
	return s
}

// Disconnected hands over what cl's stage holds, and forgets it.
func (h *historyRecorder) Disconnected(cl *mqtt.Client) {
	if s, ok := h.stages.LoadAndDelete(cl); ok {
		s.(*history.Stage).Close()
	}
}

// brokerAccess lets a history request read what an MQTT subscriber with
// the same credentials (HTTP Basic) may read from the embedded broker.
type brokerAccess struct{ broker *broker.Broker }

func (a brokerAccess) Reader(_ context.Context, r *http.Request) (func(string) bool, error) {
	username, password, _ := r.BasicAuth()
	mayRead, err := a.broker.Reader(r.RemoteAddr, username, []byte(password))
	if errors.Is(err, broker.ErrRefused) {
		return nil, fmt.Errorf("%w: %w (give a broker user's name and password with HTTP Basic authentication)", history.ErrUnauthorized, err)
	}
	return mayRead, err
}

// dashboardHistory is the history as the dashboard follows it: best
// effort, as a live view would rather lose the past than the present.
type dashboardHistory struct {
	h    *history.History
	sync *history.Sync
}

func (d dashboardHistory) Follow(ctx context.Context, filters []string, since time.Time, last int, fn func(bus.Message, time.Time, bool), replayed func(error)) error {
	_, err := d.h.Follow(ctx, history.Query{Filters: filters, Since: since, Last: last, BestEffort: true, Sync: d.sync}, func(r history.Record) error {
		fn(bus.Message{Topic: r.Topic, Payload: r.Payload}, r.Time, !r.Live)
		return nil
	}, func(res history.Result) error {
		replayed(res.ReplayErr)
		return nil
	})
	return err
}

// Settle waits for Follow's fn to catch up with what was published.
func (d dashboardHistory) Settle(ctx context.Context) { _ = d.sync.Wait(ctx) }
