package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/topics"
)

// Access decides what a history request may read, as the broker decides it
// for MQTT subscribers.
type Access interface {
	// Reader authenticates r's credentials (HTTP Basic, as an MQTT username
	// and password; none, as an anonymous client) and returns what they may
	// read: mayRead reports, for a topic filter or a topic name, whether an
	// MQTT subscriber with those credentials may read it. A refusal is an
	// error wrapping ErrUnauthorized. It must be safe for concurrent use and
	// throttle failed logins as the broker does.
	Reader(ctx context.Context, r *http.Request) (mayRead func(string) bool, err error)
}

// ErrUnauthorized is an Access's refusal of a request's credentials.
var ErrUnauthorized = errors.New("unauthorized")

// Bounds of one history request, so that a client costs a fixed amount.
const (
	maxFilters      = 16
	maxFilterLength = 1024
	defaultLimit    = 10_000
	maxLimit        = 1_000_000
	maxReaders      = 64               // history requests open at once
	writeTimeout    = 10 * time.Second // one write; a client that reads slower is cut off
	flushAt         = 64 << 10
)

// Handler serves GET /api/v1/history.
type Handler struct {
	h       *History
	access  Access
	readers chan struct{}
}

// NewHandler serves h's history to those access lets read it.
func NewHandler(h *History, access Access) *Handler {
	return &Handler{h: h, access: access, readers: make(chan struct{}, maxReaders)}
}

// Path is where the handler is served.
const Path = "GET /api/v1/history"

// ServeHTTP answers GET /api/v1/history?filter=F[&filter=G...]&since=&until=&limit=
// with the matching messages in the order they were stored (Replay): JSON lines,
// one object per message (id, time, topic, source, and payload as JSON, or
// text or base64 when it is not JSON), ending after the replay unless
// follow=1; or, with Accept: text/event-stream, Server-Sent Events
// ("message" events, an "live" event after the replay, then live messages
// unless until is given). since and until are a duration back from now
// ("2h") or an RFC 3339 time.
func (a *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, follow, ok := parseQuery(w, r)
	if !ok {
		return
	}
	mayRead, err := a.access.Reader(r.Context(), r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="firehose"`)
		httpserver.WriteError(w, http.StatusUnauthorized, err.Error(), "")
		return
	}
	for _, f := range q.Filters {
		if !mayRead(f) {
			httpserver.WriteError(w, http.StatusForbidden, fmt.Sprintf("filter %q: these credentials may not read it, as an MQTT subscriber could not", f), "filter")
			return
		}
	}
	select {
	case a.readers <- struct{}{}:
		defer func() { <-a.readers }()
	default:
		httpserver.WriteRetry(w, http.StatusServiceUnavailable, 5*time.Second, fmt.Sprintf("%d history requests are open, the most one bridge serves; retry later", maxReaders))
		return
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if sse {
		follow = q.Until.IsZero()
	}

	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // a followed stream stays open for hours
	bw := bufio.NewWriterSize(w, flushAt+4096)
	started := false
	start := func() {
		if started {
			return
		}
		started = true
		h := w.Header()
		if sse {
			h.Set("Content-Type", "text/event-stream; charset=utf-8")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
		} else {
			h.Set("Content-Type", "application/x-ndjson")
		}
		w.WriteHeader(http.StatusOK)
		if sse {
			bw.WriteString("retry: 2000\n\n")
		}
	}
	flush := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	var line []byte
	emit := func(rec Record) error {
		if !mayRead(rec.Topic) {
			return nil
		}
		start()
		line = AppendJSON(line[:0], &rec)
		if sse {
			bw.WriteString("event: message\nid: ")
			bw.WriteString(strings.NewReplacer("\n", "", "\r", "").Replace(rec.ID))
			bw.WriteString("\ndata: ")
		}
		bw.Write(line)
		if sse {
			bw.WriteString("\n\n")
		} else {
			bw.WriteByte('\n')
		}
		if rec.Live || bw.Buffered() >= flushAt {
			return flush()
		}
		return nil
	}
	replayed := func(res Result) error {
		start()
		switch {
		case sse && res.Truncated:
			fmt.Fprintf(bw, "event: truncated\ndata: {\"replayed\":%d}\n\n", res.Replayed)
		case sse && follow:
			fmt.Fprintf(bw, "event: live\ndata: {\"replayed\":%d}\n\n", res.Replayed)
		case sse:
			fmt.Fprintf(bw, "event: end\ndata: {\"replayed\":%d}\n\n", res.Replayed)
		case res.Truncated:
			fmt.Fprintf(bw, "{\"truncated\":true,\"replayed\":%d}\n", res.Replayed)
		}
		return flush()
	}
	if follow {
		_, err = a.h.Follow(r.Context(), q, emit, replayed)
	} else {
		var res Result
		res, err = a.h.Replay(r.Context(), q, emit)
		if err == nil {
			err = replayed(res)
		}
	}
	if err == nil || r.Context().Err() != nil {
		return
	}
	if !started {
		w.Header().Set("Retry-After", "5")
		httpserver.WriteError(w, http.StatusServiceUnavailable, err.Error(), "")
		return
	}
	msg, _ := json.Marshal(err.Error())
	if sse {
		fmt.Fprintf(bw, "event: error\ndata: {\"error\":%s}\n\n", msg)
	} else {
		fmt.Fprintf(bw, "{\"error\":%s}\n", msg)
	}
	_ = flush()
}

// parseQuery reads the request's parameters, answering 400 for a bad one.
func parseQuery(w http.ResponseWriter, r *http.Request) (q Query, follow, ok bool) {
	v := r.URL.Query()
	q.Filters = v["filter"]
	if len(q.Filters) == 0 {
		q.Filters = []string{"#"}
	}
	if len(q.Filters) > maxFilters {
		httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("at most %d filters", maxFilters), "filter")
		return q, false, false
	}
	for _, f := range q.Filters {
		if len(f) > maxFilterLength {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("a filter is at most %d bytes", maxFilterLength), "filter")
			return q, false, false
		}
		if err := topics.ValidFilter(f); err != nil {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("filter %q: %v", f, err), "filter")
			return q, false, false
		}
		if _, _, shared := topics.SplitShared(f); shared {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("filter %q: a shared subscription has no history", f), "filter")
			return q, false, false
		}
	}
	now := time.Now()
	var err error
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(p.name); s != "" {
			if *p.t, err = ParseTime(s, now); err != nil {
				httpserver.WriteError(w, http.StatusBadRequest, err.Error(), p.name)
				return q, false, false
			}
		}
	}
	if !q.Until.IsZero() && q.Until.Before(q.Since) {
		httpserver.WriteError(w, http.StatusBadRequest, "until is before since", "until")
		return q, false, false
	}
	q.Limit = defaultLimit
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			httpserver.WriteError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: a number from 1 to %d", s, maxLimit), "limit")
			return q, false, false
		}
		q.Limit = n
	}
	switch v.Get("follow") {
	case "", "0":
	case "1":
		follow = q.Until.IsZero()
	default:
		httpserver.WriteError(w, http.StatusBadRequest, "follow: 1 or 0", "follow")
		return q, false, false
	}
	return q, follow, true
}

// ParseTime reads a time as --since and since= take it: a duration back
// from now ("90m", "2h", "3d") or an RFC 3339 time.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q: give a duration back from now (90m, 2h, 3d) or an RFC 3339 time (2026-11-27T22:00:00Z)", s)
	}
	return now.Add(-d), nil
}

// AppendJSON appends rec as one JSON object: id, time, topic, source, and
// the payload as JSON when it is, as "text" when it is other UTF-8, as
// "base64" otherwise.
func AppendJSON(b []byte, rec *Record) []byte {
	b = append(b, `{"id":`...)
	b, _ = appendJSONString(b, rec.ID)
	b = append(b, `,"time":"`...)
	b = rec.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","topic":`...)
	b, _ = appendJSONString(b, rec.Topic)
	if rec.Source != "" {
		b = append(b, `,"source":`...)
		b, _ = appendJSONString(b, rec.Source)
	}
	if rec.Live {
		b = append(b, `,"live":true`...)
	}
	switch {
	case len(rec.Payload) > 0 && json.Valid(rec.Payload):
		b = append(b, `,"payload":`...)
		b = appendCompact(b, rec.Payload)
	case utf8.Valid(rec.Payload):
		b = append(b, `,"text":`...)
		b, _ = appendJSONString(b, string(rec.Payload))
	default:
		enc, _ := json.Marshal(rec.Payload)
		b = append(b, `,"base64":`...)
		b = append(b, enc...)
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) ([]byte, error) {
	enc, err := json.Marshal(s)
	return append(b, enc...), err
}

// appendCompact appends valid JSON without its insignificant whitespace,
// so that one message is one line.
func appendCompact(b, js []byte) []byte {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, js); err != nil {
		return append(b, js...)
	}
	return buf.Bytes()
}
