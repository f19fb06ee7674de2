package nats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// jsPublisher publishes to JetStream and collects the streams' acks
// itself, instead of nats.go's PublishMsgAsync, because the routed publish
// path pays for every step of it per message (bench/fanout): a future
// with its channels, a timer and a random reply token per message, the
// ack handed from nats.go's reader to a subscription goroutine and from
// there to the waiting publisher, and encoding/json decoding each
// `{"stream":..,"seq":..}`.
//
// Here a Publish call's messages share one waiter. Their replies go to one
// wildcard inbox subscribed with a channel (nats.go's reader puts each ack
// straight into it), and whichever publisher is waiting takes acks from
// that channel and settles them, its own or another's: an ack is handled
// by the goroutine that waits for it, or with one hand-off. An ack is
// parsed without decoding: it is one when it names its stream and has no
// "error". The guarantee is nats.go's: a message counts as stored only on
// the stream's positive ack; anything else (an error, no answer in time, a
// lost connection) fails it, and the router keeps it in the outbox.
type jsPublisher struct {
	nc     *nats.Conn
	prefix string // replies go to prefix + token
	acks   chan *nats.Msg
	max    int // acks awaited at once, at most (a larger batch alone goes)

	mu      sync.Mutex
	next    uint64
	pending map[uint64]ackSlot
	// room is closed when a pending ack is settled, for those waiting
	// for room (or for none to be pending); nil when nobody waits.
	room chan struct{}

	// timers are the publishes' confirm timeouts, reused: a context with
	// a deadline per Publish cost the routed path more than the ack's
	// parsing.
	timers sync.Pool
}

// ackSlot is where a pending ack's outcome goes: message i of a batch.
type ackSlot struct {
	b *ackBatch
	i int
}

// ackBatch is one Publish call's messages awaiting their acks.
type ackBatch struct {
	n    int
	left int     // unsettled messages; under jsPublisher.mu
	errs []error // per message, once one failed; under jsPublisher.mu
	done chan struct{}
}

func newJSPublisher(nc *nats.Conn, maxPending int) (*jsPublisher, error) {
	p := &jsPublisher{
		nc:      nc,
		prefix:  nats.NewInbox() + ".",
		max:     maxPending,
		pending: make(map[uint64]ackSlot, maxPending),
		// Acks come only for what was published, at most max at once, and
		// late ones for what was given up: room for both. If it ever
		// fills, nats.go drops the ack (a slow consumer error) and the
		// message waits for its confirm timeout, then the outbox.
		acks:   make(chan *nats.Msg, 2*maxPending+256),
		timers: sync.Pool{New: newStoppedTimer},
	}
	if _, err := nc.ChanSubscribe(p.prefix+"*", p.acks); err != nil {
		return nil, fmt.Errorf("subscribe to the ack inbox: %w", err)
	}
	return p, nil
}

// newStoppedTimer makes a timer for the timers pool.
func newStoppedTimer() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// publish sends msgs to JetStream and waits for their acks, at most
// timeout, taking acks from the inbox (its own and others') meanwhile. errs
// holds each message's failure (nil when every message was stored); err is
// set when ctx ended or the timeout passed first, and then the messages not
// yet acked count as failed.
func (p *jsPublisher) publish(ctx context.Context, timeout time.Duration, msgs []bus.Message) (errs []error, err error) {
	n := len(msgs)
	if n == 0 {
		return nil, nil
	}
	timer := p.timers.Get().(*time.Timer)
	timer.Reset(timeout)
	defer func() {
		timer.Stop() // since Go 1.23, no stale tick is left in its channel
		p.timers.Put(timer)
	}()
	expired := func() error { return fmt.Errorf("no ack within %s: %w", timeout, context.DeadlineExceeded) }
	b := &ackBatch{n: n, left: n, done: make(chan struct{})}
	p.mu.Lock()
	for len(p.pending) > 0 && len(p.pending)+n > p.max {
		if err := p.waitLocked(ctx, timer.C); err != nil {
			if err == errExpired {
				err = expired()
			}
			p.mu.Unlock()
			return nil, err
		}
	}
	base := p.next
	p.next += uint64(n)
	for i := range n {
		p.pending[base+uint64(i)] = ackSlot{b: b, i: i}
	}
	p.mu.Unlock()

	// One nats.Msg and header map for all: PublishMsg has written a
	// message into the connection's buffer when it returns.
	nm := &nats.Msg{}
	var hdr nats.Header
	var vals []string
	for i := range msgs {
		m := &msgs[i]
		nm.Subject, nm.Data = m.Topic, m.Payload
		nm.Reply = p.prefix + strconv.FormatUint(base+uint64(i), 36)
		nm.Header = nil
		if len(m.Headers) > 0 {
			if hdr == nil {
				hdr = make(nats.Header, len(m.Headers))
			}
			clear(hdr)
			vals = vals[:0]
			for k, v := range m.Headers {
				vals = append(vals, v)
				hdr[k] = vals[len(vals)-1 : len(vals) : len(vals)]
			}
			nm.Header = hdr
		}
		if perr := p.nc.PublishMsg(nm); perr != nil {
			p.settle(base+uint64(i), perr)
			if errors.Is(classify(perr), bus.ErrInvalid) {
				continue // the others still go
			}
			// The connection cannot take more now: the rest fail alike.
			for j := i + 1; j < n; j++ {
				p.settle(base+uint64(j), perr)
			}
			break
		}
	}

	for {
		select {
		case <-b.done:
			return b.errs, nil
		case m := <-p.acks:
			p.dispatch(m)
		case <-ctx.Done():
			p.abandon(base, n)
			return nil, ctx.Err()
		case <-timer.C:
			p.abandon(base, n)
			return nil, expired()
		}
	}
}

// abandon stops awaiting the acks of n messages from token base on.
func (p *jsPublisher) abandon(base uint64, n int) {
	p.mu.Lock()
	for i := range n {
		delete(p.pending, base+uint64(i)) // a late ack finds nothing
	}
	p.wakeLocked()
	p.mu.Unlock()
}

// errExpired is waitLocked's timeout.
var errExpired = errors.New("expired")

// waitLocked waits, with p.mu held (and released meanwhile), until an ack
// is settled, settling acks from the inbox itself, or ctx ends, or expired
// ticks (errExpired).
func (p *jsPublisher) waitLocked(ctx context.Context, expired <-chan time.Time) error {
	if p.room == nil {
		p.room = make(chan struct{})
	}
	room := p.room
	p.mu.Unlock()
	defer p.mu.Lock()
	select {
	case <-room:
	case m := <-p.acks:
		p.dispatch(m)
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return errExpired
	}
	return nil
}

// wakeLocked tells those waiting for room that some was made.
func (p *jsPublisher) wakeLocked() {
	if p.room != nil {
		close(p.room)
		p.room = nil
	}
}

// dispatch settles the message an ack answers.
func (p *jsPublisher) dispatch(m *nats.Msg) {
	if len(m.Subject) <= len(p.prefix) {
		return
	}
	token, err := strconv.ParseUint(m.Subject[len(p.prefix):], 36, 64)
	if err != nil {
		return // not a reply to this publisher
	}
	p.settle(token, ackError(m))
}

// settle records the outcome of the message with the reply token, if it is
// still awaited.
func (p *jsPublisher) settle(token uint64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.pending[token]
	if !ok {
		return
	}
	delete(p.pending, token)
	if err != nil {
		if s.b.errs == nil {
			s.b.errs = make([]error, s.b.n)
		}
		s.b.errs[s.i] = err
	}
	if s.b.left--; s.b.left == 0 {
		close(s.b.done)
	}
	p.wakeLocked()
}

// failAll fails every awaited ack with err: the connection that would
// bring them was lost, and nats.go does not resend what it had written.
func (p *jsPublisher) failAll(err error) {
	p.mu.Lock()
	tokens := make([]uint64, 0, len(p.pending))
	for t := range p.pending {
		tokens = append(tokens, t)
	}
	p.mu.Unlock()
	for _, t := range tokens {
		p.settle(t, err)
	}
}

// idle waits until no ack is awaited, or ctx ends.
func (p *jsPublisher) idle(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.pending) > 0 {
		if err := p.waitLocked(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// ackError reads a JetStream publish's answer: nil for an ack (an object
// naming its stream, without "error"), the server's *jetstream.APIError,
// jetstream.ErrNoStreamResponse when no stream takes the subject, or
// jetstream.ErrInvalidJSAck.
func ackError(m *nats.Msg) error {
	if len(m.Data) == 0 {
		if m.Header.Get("Status") == "503" {
			return jetstream.ErrNoStreamResponse
		}
		return jetstream.ErrInvalidJSAck
	}
	// What nats-server sends for almost every message, checked without
	// walking it: an object that names a stream first and has no "error"
	// anywhere. Anything else is read member by member below.
	if len(m.Data) > len(ackPrefix)+1 && string(m.Data[:len(ackPrefix)]) == ackPrefix &&
		m.Data[len(ackPrefix)] != '"' && m.Data[len(m.Data)-1] == '}' && !bytes.Contains(m.Data, errorKey) {
		return nil
	}
	var stream []byte
	it := jsonscan.Members(m.Data)
	for it.Next() {
		switch {
		case jsonscan.KeyIs(it.Key(), "error"):
			return apiError(it.Value())
		case jsonscan.KeyIs(it.Key(), "stream"):
			stream = it.Value()
		}
	}
	if it.Err() != nil {
		return jetstream.ErrInvalidJSAck
	}
	if s, ok := jsonscan.Str(stream); !ok || s == "" {
		return jetstream.ErrInvalidJSAck
	}
	return nil
}

var errorKey = []byte(`"error"`)

const ackPrefix = `{"stream":"`

// apiError reads JetStream's `{"code":..,"err_code":..,"description":..}`.
func apiError(v []byte) error {
	e := &jetstream.APIError{}
	it := jsonscan.Members(v)
	for it.Next() {
		switch {
		case jsonscan.KeyIs(it.Key(), "code"):
			e.Code, _ = strconv.Atoi(string(jsonscan.Trim(it.Value())))
		case jsonscan.KeyIs(it.Key(), "err_code"):
			c, _ := strconv.Atoi(string(jsonscan.Trim(it.Value())))
			e.ErrorCode = jetstream.ErrorCode(c)
		case jsonscan.KeyIs(it.Key(), "description"):
			e.Description, _ = jsonscan.Str(it.Value())
		}
	}
	if it.Err() != nil || e.Code == 0 && e.ErrorCode == 0 && e.Description == "" {
		return jetstream.ErrInvalidJSAck
	}
	return e
}
