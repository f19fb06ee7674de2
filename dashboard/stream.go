package dashboard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/topics"
)

// Bounds of one stream request, so that a client costs a fixed amount.
const (
	maxFilters      = 16
	maxFilterLength = 1024
	maxReplay       = 100_000          // retained messages replayed to one stream
	maxReplayBytes  = 64 << 20         // and their payloads' bytes
	maxQueuedBytes  = 8 << 20          // payload bytes waiting for one stream; beyond, messages are dropped for it
	statsInterval   = time.Second      // how often a stream reports its rate
	writeTimeout    = 10 * time.Second // one write to a stream; a client that reads slower is cut off
	// maxStreamHistory bounds history=N, the past messages a stream shows
	// first; they are taken from the last streamHistoryWindow at most.
	maxStreamHistory    = 1000
	streamHistoryWindow = time.Hour
)

// streamMsg is one message waiting for a stream.
type streamMsg struct {
	topic    string
	payload  []byte
	qos      byte
	retained bool
	received time.Time
}

// stream answers GET /api/v1/stream?filter=F[&filter=G...][&retained=1] with
// Server-Sent Events: a "message" event per matching message, and a "stats"
// event every second with the rate and the drops.
func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filters := q["filter"]
	if len(filters) == 0 {
		filters = []string{"#"}
	}
	if len(filters) > maxFilters {
		httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("at most %d filters", maxFilters), "filter")
		return
	}
	for _, f := range filters {
		if len(f) > maxFilterLength {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("a filter is at most %d bytes", maxFilterLength), "filter")
			return
		}
		if err := topics.ValidFilter(f); err != nil {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("filter %q: %v", f, err), "filter")
			return
		}
		if _, _, shared := topics.SplitShared(f); shared {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("filter %q: shared subscriptions are not offered here", f), "filter")
			return
		}
	}
	retained, ok := boolParam(w, q.Get("retained"), "retained", false)
	if !ok {
		return
	}
	withPayload, ok := boolParam(w, q.Get("payload"), "payload", true)
	if !ok {
		return
	}
	last := 0
	if v := q.Get("history"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxStreamHistory {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("history %q: the number of past messages to show first, 0 to %d", v, maxStreamHistory), "history")
			return
		}
		if n > 0 && retained {
			httpserver.WriteError(w, http.StatusBadRequest, "history and retained=1 exclude each other: the history holds the retained messages as they were published", "history")
			return
		}
		last = n
	}
	if !d.available(w) {
		return
	}
	select {
	case d.streams <- struct{}{}:
		defer func() { <-d.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		httpserver.WriteError(w, http.StatusServiceUnavailable,
			fmt.Sprintf("%d streams are open, the most dashboard.max_streams allows; retry later", d.cfg.MaxStreams), "")
		return
	}
	d.streamsOpen.Inc()
	defer d.streamsOpen.Dec()

	ch := make(chan streamMsg, d.cfg.StreamBuffer)
	var (
		mu          sync.Mutex
		replay      []streamMsg
		replayBytes int
		truncated   bool
		dropped     int64
		queued      atomic.Int64 // payload bytes in ch
	)
	drop := func() {
		mu.Lock()
		dropped++
		mu.Unlock()
		d.dropped.WithLabelValues("stream").Inc()
	}
	offer := func(m bus.Message) { // live, on the publisher's goroutine: never blocks
		size := 0
		if withPayload {
			size = len(m.Payload)
		}
		if queued.Add(int64(size)) > maxQueuedBytes {
			queued.Add(-int64(size))
			drop()
			return
		}
		select {
		case ch <- streamMsg{topic: m.Topic, payload: append([]byte(nil), m.Payload[:size]...), qos: m.QoS, received: time.Now()}:
		default:
			queued.Add(-int64(size))
			drop()
		}
	}
	var (
		fromHistory <-chan []streamMsg // the past messages, once read
		followEnded <-chan struct{}
	)
	if last > 0 && d.opts.History != nil && d.cfg.History > 0 {
		fromHistory, followEnded = d.followStream(r.Context(), filters, last, withPayload, offer)
	} else {
		// Live messages on the topics the aggregator reads come through
		// deliver, after the aggregator has them (so a snapshot asked for
		// on seeing one holds it); the stream's own subscriptions bring the
		// rest. Registered before those subscribe, so that nothing
		// published meanwhile is lost.
		defer d.addReader(&reader{filters: filters, offer: offer})()
	}
	for i, f := range filters {
		if fromHistory != nil {
			break // the history brings the past and the live messages alike
		}
		earlier := filters[:i]
		unsub, err := d.opts.Source.Subscribe(int(d.ids.Add(1)), f, func(m bus.Message) {
			for _, e := range earlier { // overlapping filters: deliver once
				if topics.Match(e, m.Topic) {
					return
				}
			}
			if !m.Retain {
				if !d.aggregates(m.Topic) {
					offer(m)
				}
				return
			}
			// Replayed on this goroutine, inside Subscribe.
			if !retained {
				return
			}
			size := 0
			if withPayload {
				size = len(m.Payload)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(replay) >= maxReplay || replayBytes+size > maxReplayBytes {
				truncated = true
				return
			}
			sm := streamMsg{topic: m.Topic, payload: append([]byte(nil), m.Payload[:size]...), qos: m.QoS, retained: true, received: time.Now()}
			replay, replayBytes = append(replay, sm), replayBytes+size
		})
		if err != nil {
			httpserver.WriteError(w, http.StatusInternalServerError, "subscribe: "+err.Error(), "filter")
			return
		}
		defer unsub()
	}

	rc := http.NewResponseController(w)
	// http.read_timeout and write_timeout bound a request, not a stream that
	// stays open for hours: clear the read deadline, and give each write its
	// own deadline below.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell a proxy in front not to buffer
	w.WriteHeader(http.StatusOK)

	var buf bytes.Buffer
	flush := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		buf.Reset()
		return rc.Flush() == nil
	}
	mu.Lock()
	replayed, cut := replay, truncated
	replay = nil
	mu.Unlock()
	open := map[string]any{"filters": filters, "retained": len(replayed)}
	if fromHistory != nil {
		select {
		case replayed = <-fromHistory:
		case <-r.Context().Done():
			return
		case <-followEnded:
			return
		}
		open["history"], open["retained"] = len(replayed), 0
	}
	buf.WriteString("retry: 2000\n\n")
	if cut {
		open["truncated"] = true // more retained messages match than one stream replays
	}
	opened, _ := json.Marshal(open)
	fmt.Fprintf(&buf, "event: open\ndata: %s\n\n", opened)
	for i := range replayed {
		writeEvent(&buf, replayed[i], withPayload)
		replayed[i].payload = nil
		if buf.Len() > 256<<10 && !flush() {
			return
		}
	}
	replayed = nil
	if !flush() {
		return
	}

	ticker := time.NewTicker(statsInterval)
	defer ticker.Stop()
	var sent, sentAtTick int64
	lastTick := time.Now()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-d.ctx.Done():
			return
		case <-followEnded: // fell behind: the client reconnects
			return
		case m := <-ch:
			queued.Add(-int64(len(m.payload)))
			writeEvent(&buf, m, withPayload)
			sent++
			for n := 1; n < 256; n++ { // batch what is waiting into one write
				select {
				case m := <-ch:
					queued.Add(-int64(len(m.payload)))
					writeEvent(&buf, m, withPayload)
					sent++
					continue
				default:
				}
				break
			}
			if !flush() {
				return
			}
		case now := <-ticker.C:
			mu.Lock()
			dr := dropped
			mu.Unlock()
			rate := float64(sent-sentAtTick) / now.Sub(lastTick).Seconds()
			sentAtTick, lastTick = sent, now
			fmt.Fprintf(&buf, "event: stats\ndata: {\"rate\":%.1f,\"sent\":%d,\"dropped\":%d}\n\n", rate, sent, dr)
			if !flush() {
				return
			}
		}
	}
}

// boolParam reads an optional 1/0 query parameter, answering 400 for anything else.
func boolParam(w http.ResponseWriter, v, name string, def bool) (bool, bool) {
	switch v {
	case "":
		return def, true
	case "1", "true", "yes":
		return true, true
	case "0", "false", "no":
		return false, true
	}
	httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("%s=%q: use 1 or 0", name, v), name)
	return false, false
}

// writeEvent appends one "message" event: the payload as JSON when it is
// JSON (compacted, as SSE data is one line), else as text or base64.
func writeEvent(buf *bytes.Buffer, m streamMsg, withPayload bool) {
	buf.WriteString("event: message\ndata: {\"time\":\"")
	buf.WriteString(m.received.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	buf.WriteString("\",\"topic\":")
	t, _ := json.Marshal(m.topic)
	buf.Write(t)
	fmt.Fprintf(buf, ",\"qos\":%d,\"retained\":%t", m.qos, m.retained)
	if !withPayload {
		buf.WriteString("}\n\n")
		return
	}
	buf.WriteByte(',')
	mark := buf.Len()
	buf.WriteString("\"payload\":")
	if len(m.payload) > 0 && json.Compact(buf, m.payload) == nil {
		buf.WriteString("}\n\n")
		return
	}
	buf.Truncate(mark)
	if utf8.Valid(m.payload) {
		buf.WriteString("\"text\":")
		s, _ := json.Marshal(string(m.payload))
		buf.Write(s)
	} else {
		buf.WriteString("\"base64\":\"")
		buf.WriteString(base64.StdEncoding.EncodeToString(m.payload))
		buf.WriteByte('"')
	}
	buf.WriteString("}\n\n")
}

// available answers 403 when the dashboard may show no bus data.
func (d *Dashboard) available(w http.ResponseWriter) bool {
	if d.opts.Source != nil {
		return true
	}
	httpserver.WriteError(w, http.StatusForbidden, d.opts.Unavailable, "")
	return false
}

// followStream brings a stream its filters' last messages from the
// history (at most last, from the last streamHistoryWindow or
// dashboard.history), sent on the first channel once read, then each live
// one through offer, until ctx or the dashboard is done. The second
// channel closes if the history lets the stream go (it fell behind).
func (d *Dashboard) followStream(ctx context.Context, filters []string, last int, withPayload bool, offer func(bus.Message)) (<-chan []streamMsg, <-chan struct{}) {
	past := make(chan []streamMsg, 1)
	ended := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.ctx, cancel)
	var replay []streamMsg
	go func() {
		defer close(ended)
		defer stop()
		defer cancel()
		since := time.Now().Add(-min(d.cfg.History, streamHistoryWindow))
		_ = d.opts.History.Follow(ctx, filters, since, last, func(m bus.Message, received time.Time, replayed bool) {
			if !replayed {
				offer(m)
				return
			}
			size := 0
			if withPayload {
				size = len(m.Payload)
			}
			replay = append(replay, streamMsg{topic: m.Topic, payload: append([]byte(nil), m.Payload[:size]...), qos: 1, received: received})
		}, func(err error) {
			if err != nil {
				d.log.Debug().Err(err).Msg("a stream starts without the bus's history")
			}
			past <- replay
		})
	}()
	return past, ended
}
