package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/connstate"
	"github.com/opsfirehose/firehose/sinks"
	"github.com/opsfirehose/firehose/topics"
)

// NATS is a NATS core or JetStream sink. Core publishes are confirmed by a
// flush round trip (the server has processed them); JetStream publishes by
// the stream's ack, sent asynchronously with a bounded window so that many
// messages are in flight at once, and de-duplicated by Nats-Msg-Id.
type NATS struct {
	name    string
	cfg     Config
	log     zerolog.Logger
	nc      *nats.Conn
	js      jetstream.JetStream // nil for core
	pub     *jsPublisher        // JetStream's publishes; nil for core
	timeout time.Duration

	constructed chan struct{} // closed once js is set; nats.go calls back before NewNATS returns
	state       *connstate.State
	streamMu    sync.Mutex
	// streamMadeIn is 1 + the connection's reconnect count when the stream
	// was last made (or found); 0 after loseStream. The stream is known to
	// be there only on the connection it was made on: nats.go says it is
	// connected again before onConnect runs, and in between the server may
	// have come back without it (see streamReady).
	streamMadeIn atomic.Uint64
	streamErr    atomic.Pointer[string] // why the stream could not be made, last time
	// streamLost wakes keepStream to make the stream again. Nothing else
	// would: the router publishes only to a ready sink, and the sink is not
	// ready until the stream is made.
	streamLost chan struct{}
	closed     atomic.Bool
	closeOnce  sync.Once
	done       chan struct{} // closed by Close; ends keepStream

	// configured is the limit until the server's is known; streamLimit
	// says where a stream's limit comes from. Both are made once, as Limit
	// runs for every routed message.
	configured  sinks.Limit
	streamLimit string
	// streamMaxMsg is the stream's max_msg_size, once read from the
	// server; 0 while unknown or unlimited.
	streamMaxMsg atomic.Int64
	limitKnown   chan struct{} // closed once the server's limits were read
	limitOnce    sync.Once
}

var _ sinks.Sink = (*NATS)(nil)

// NewNATS connects to NATS in the background: the bridge starts even when
// NATS is down, and the sink reconnects forever.
func NewNATS(name string, cfg Config, log zerolog.Logger) (*NATS, error) {
	s := &NATS{
		name:        name,
		cfg:         cfg,
		log:         log.With().Str("sink", name).Logger(),
		timeout:     cfg.ConfirmTimeout,
		constructed: make(chan struct{}),
		streamLost:  make(chan struct{}, 1),
		done:        make(chan struct{}),
		limitKnown:  make(chan struct{}),
		configured:  cfg.ConfiguredLimit(name),
	}
	if cfg.Stream != nil {
		s.streamLimit = "the max_msg_size of JetStream stream " + cfg.Stream.Name
	}
	s.state = connstate.New(s.log, "NATS sink "+name)
	defer close(s.constructed)
	connected := func(msg string) {
		ev := s.log.Info()
		if n := s.state.Connected(); n > 0 {
			ev = ev.Int("failed_attempts", n)
		}
		ev.Msg(msg)
		s.onConnect()
	}
	opts := []nats.Option{
		nats.Name(cfg.ConnectionName),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		// nats.go gives up for good after the same authorization error
		// twice; the sink keeps trying, as it does for any other failure,
		// so that fixing the credentials on the server is enough.
		nats.IgnoreAuthErrorAbort(),
		// Called before each new round of attempts: the moment to report
		// why the last one failed, which nats.go keeps (LastError) but
		// reports nowhere until the connection was once up.
		nats.CustomReconnectDelay(func(int) time.Duration {
			s.reportFailedAttempt()
			return time.Second + rand.N(500*time.Millisecond) // spread the bridges' reconnects
		}),
		// No reconnect buffer: a publish while disconnected fails at once,
		// and the router keeps the message in the outbox instead of memory.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(func(*nats.Conn) { connected("NATS connected") }),
		nats.ReconnectHandler(func(*nats.Conn) { connected("NATS reconnected") }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			<-s.constructed // s.pub is set
			if s.pub != nil {
				// The acks awaited will not come on this connection: the
				// messages go to the outbox now, not at their timeout.
				s.pub.failAll(fmt.Errorf("%w: %w", nats.ErrDisconnected, bus.ErrUnavailable))
			}
			if !s.closed.Load() {
				s.state.Lost(err)
				s.log.Warn().Err(err).Msg("NATS disconnected; messages for required routes wait in their outbox (senders get 503 once it is full)")
			}
		}),
		// A dial that failed (an authorization error is reported by
		// reportFailedAttempt).
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if !s.closed.Load() {
				s.state.Failed(err, "cannot connect")
			}
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			if sub == nil && !nc.IsConnected() {
				return // an attempt to reconnect that failed: reportFailedAttempt logs it
			}
			s.log.Warn().Err(err).Msg("NATS error")
		}),
	}
	creds, err := NATSCredentials(cfg)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", name, err)
	}
	opts = append(opts, creds...)
	nc, err := nats.Connect(strings.Join(cfg.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", name, err)
	}
	s.nc = nc
	if cfg.Type == TypeJetStream {
		s.js, err = jetstream.New(nc)
		if err == nil {
			s.pub, err = newJSPublisher(nc, cfg.MaxPending)
		}
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("sink %s: jetstream: %w", name, err)
		}
		if cfg.Stream != nil && cfg.Stream.Create {
			go s.keepStream()
		}
	}
	return s, nil
}

// Name is the sink's configured name.
func (s *NATS) Name() string { return s.name }

// Ready reports whether the connection is up (and, for JetStream with
// stream.create, the stream exists).
func (s *NATS) Ready() bool {
	if s.closed.Load() || !s.nc.IsConnected() {
		return false
	}
	return s.js == nil || s.cfg.Stream == nil || !s.cfg.Stream.Create || s.streamReady()
}

// streamReady reports whether the stream was made on this connection, and
// not lost since.
func (s *NATS) streamReady() bool {
	made := s.streamMadeIn.Load()
	return made != 0 && made-1 == s.nc.Stats().Reconnects
}

// reportFailedAttempt records and logs why the last connection attempt
// failed, when the server refused it (an authorization violation, say).
func (s *NATS) reportFailedAttempt() {
	<-s.constructed // s.nc is set
	if s.nc == nil || s.closed.Load() {
		return
	}
	if err := s.nc.LastError(); err != nil && !s.nc.IsConnected() {
		s.state.Failed(err, "cannot connect")
	}
}

// NotReadyReason is why the sink is not ready: why its connection is not
// up, as nats.go reported it, or why the JetStream stream it creates is
// not there.
func (s *NATS) NotReadyReason() string {
	switch {
	case s.closed.Load():
		return "closed"
	case !s.nc.IsConnected():
		return s.state.Why("not connected yet")
	case s.Ready():
		return ""
	}
	why := "not created yet"
	if err := s.streamErr.Load(); err != nil {
		why = *err
	}
	return "JetStream stream " + s.cfg.Stream.Name + ": " + why
}

// onConnect creates or updates the stream when configured to, after every
// (re)connection: the server may have come back without it (memory
// storage, a lost volume), and the sink is not ready until the stream is
// there again. Otherwise it reads the stream's max_msg_size, for Limit.
// It runs on nats.go's callback goroutine, so it must not take long.
func (s *NATS) onConnect() {
	if s.cfg.Type != TypeJetStream || s.cfg.Stream == nil {
		s.limitOnce.Do(func() { close(s.limitKnown) })
		return
	}
	if s.cfg.Stream.Create {
		s.loseStream() // keepStream makes it, and reads the limit
		return
	}
	go func() {
		defer s.limitOnce.Do(func() { close(s.limitKnown) })
		<-s.constructed
		if s.js == nil { // construction failed
			return
		}
		s.readStreamLimit()
	}()
}

// loseStream makes the sink not ready until keepStream has made (or
// found) the stream again.
func (s *NATS) loseStream() {
	s.streamMadeIn.Store(0)
	select {
	case s.streamLost <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// keepStream makes the stream whenever loseStream says it may be gone,
// retrying until that succeeds: after a node of a cluster is lost, the
// meta or stream leader is being elected and creating fails for a while,
// and no publish or reconnection comes to try again, since the sink is
// not ready meanwhile. It runs from construction until Close.
func (s *NATS) keepStream() {
	const maxDelay = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	for {
		select {
		case <-s.done:
			return
		case <-s.streamLost:
		}
		delay := 100 * time.Millisecond
		var (
			logged       string
			failingSince time.Time
		)
		for !s.streamReady() {
			if s.nc.IsConnected() {
				err := s.ensureStream(ctx)
				// Known as far as it can be: the warnings that wait for
				// it go on with the configured limit.
				s.limitOnce.Do(func() { close(s.limitKnown) })
				if err == nil {
					break
				}
				if failingSince.IsZero() {
					failingSince = time.Now()
				}
				// An unanswered request is what bridges racing to make the
				// stream, and a cluster electing a leader, get for a few
				// seconds: the stream is there at a later look. Anything
				// else (a refused config) is told at once.
				passing := errors.Is(err, context.DeadlineExceeded) && time.Since(failingSince) < streamGrace
				if why := err.Error(); !passing && why != logged && ctx.Err() == nil {
					s.log.Error().Err(err).Str("stream", s.cfg.Stream.Name).Msg("cannot create the JetStream stream; retrying")
					logged = why
				}
			}
			select {
			case <-s.done:
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, maxDelay)
		}
	}
}

// streamGrace is how long keepStream retries unanswered requests to make
// the stream before it logs them as an error.
const streamGrace = 10 * time.Second

// readStreamLimit reads the max_msg_size of a stream the sink does not
// create. A stream that cannot be read leaves the limit as it was: the
// server still refuses a message over it, and the router drops that one.
func (s *NATS) readStreamLimit() {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	st, err := s.js.Stream(ctx, s.cfg.Stream.Name)
	if err != nil {
		s.log.Warn().Err(err).Str("stream", s.cfg.Stream.Name).Msg("cannot read the stream's max_msg_size; messages over it will be refused by the server, after their sender's 2xx")
		return
	}
	s.streamMaxMsg.Store(int64(max(st.CachedInfo().Config.MaxMsgSize, 0)))
}

func (s *NATS) ensureStream(ctx context.Context) error {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	if s.streamReady() {
		return nil
	}
	conn := s.nc.Stats().Reconnects // before the stream is made: a reconnection meanwhile makes it again
	st := s.cfg.Stream
	storage := jetstream.FileStorage
	if st.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	stream, err := s.makeStream(ctx, jetstream.StreamConfig{
		Name:       st.Name,
		Subjects:   st.Subjects,
		Storage:    storage,
		Replicas:   st.Replicas,
		MaxAge:     st.MaxAge,
		Duplicates: st.DuplicateWindow,
	})
	if err != nil {
		why := err.Error()
		s.streamErr.Store(&why)
		return fmt.Errorf("stream %s: %w", st.Name, err)
	}
	s.streamErr.Store(nil)
	// An existing stream keeps a max_msg_size the bridge does not set.
	s.streamMaxMsg.Store(int64(max(stream.CachedInfo().Config.MaxMsgSize, 0)))
	s.streamMadeIn.Store(conn + 1)
	s.log.Info().Str("stream", st.Name).Msg("JetStream stream ready")
	return nil
}

// attemptWait bounds one request of makeStream. Bridges of a fleet start
// together, and of several requests about one stream that race in a
// cluster, to create it or to update it while it is being created, some
// are left unanswered; the stream is made all the same, by one of them.
const attemptWait = 2 * time.Second

// makeStream makes the stream with cfg, or finds it made, whoever made it,
// and updates it to cfg when it differs. Another bridge of the fleet
// starting at the same time may win the race to create it, and its create
// is as good as ours: makeStream looks the stream up (a read, answered
// while a create is in flight) before creating it, and again when a
// create fails or goes unanswered.
func (s *NATS) makeStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	lookup := func() (jetstream.Stream, error) {
		ctx, cancel := context.WithTimeout(ctx, min(s.timeout, attemptWait))
		defer cancel()
		return s.js.Stream(ctx, cfg.Name)
	}
	found := func(stream jetstream.Stream) (jetstream.Stream, error) {
		if sameStream(stream.CachedInfo().Config, cfg) {
			return stream, nil
		}
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return s.js.UpdateStream(ctx, cfg)
	}
	stream, err := lookup()
	if err == nil {
		return found(stream)
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, min(s.timeout, attemptWait))
	stream, err = s.js.CreateStream(cctx, cfg)
	cancel()
	if err == nil {
		return stream, nil
	}
	// Refused as already in use, or unanswered: another bridge's create
	// may have won.
	if stream, lerr := lookup(); lerr == nil {
		s.log.Debug().Err(err).Str("stream", cfg.Name).Msg("another client made the JetStream stream first")
		return found(stream)
	}
	return nil, err
}

// sameStream reports whether a stream's config has every setting the sink
// makes it with; a setting the sink leaves at zero is the server's default.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) &&
		have.Storage == want.Storage &&
		have.Replicas == max(want.Replicas, 1) &&
		have.MaxAge == want.MaxAge &&
		(want.Duplicates == 0 || have.Duplicates == want.Duplicates)
}

// Limit is the server's max_payload (from its INFO) once the sink has
// connected, and until then max_payload from the config (nats-server's
// default when not set); for JetStream, the stream's max_msg_size when it is
// smaller. A message over max_payload is refused by nats.go before it is
// sent, and one over max_msg_size by the stream: both for good.
func (s *NATS) Limit() sinks.Limit {
	lim := s.configured
	if mp := s.nc.MaxPayload(); mp > 0 {
		lim = sinks.Limit{Bytes: int(mp), From: "the NATS server's max_payload"}
	}
	if mm := s.streamMaxMsg.Load(); mm > 0 && mm < int64(lim.Bytes) {
		lim = sinks.Limit{Bytes: int(mm), From: s.streamLimit}
	}
	return lim
}

// LimitKnown is closed once the sink has read its limits from the server
// (after its first connection), for warnings that need them.
func (s *NATS) LimitKnown() <-chan struct{} { return s.limitKnown }

// Address is topic's NATS subject under subjectPrefix, mapped as
// nats-server's MQTT bridge maps topics (topics.SubjectOf). As the Sink
// contract says, both are already checked.
func (s *NATS) Address(subjectPrefix, topic string) (string, error) {
	return topics.SubjectOf(subjectPrefix, topic), nil
}

// MessageSize is the payload and the NATS headers the sink sends, counted
// as nats.go and nats-server count them against max_payload: a
// "NATS/1.0\r\n" line, "Key: value\r\n" per header, the value trimmed of
// spaces, and a final "\r\n".
func (s *NATS) MessageSize(m *bus.Message) int {
	n := len(m.Payload)
	if len(m.Headers) > 0 {
		n += len("NATS/1.0\r\n") + len("\r\n")
		for k, v := range m.Headers {
			n += len(k) + len(": ") + len(textproto.TrimString(v)) + len("\r\n")
		}
	}
	return n
}

// Publish sends every message and waits for the confirmations.
func (s *NATS) Publish(ctx context.Context, msgs ...bus.Message) error {
	if s.closed.Load() {
		return fmt.Errorf("sink %s: closed: %w", s.name, bus.ErrUnavailable)
	}
	if !s.nc.IsConnected() {
		return fmt.Errorf("sink %s: not connected: %w", s.name, bus.ErrUnavailable)
	}
	if s.js != nil {
		return s.publishJetStream(ctx, msgs)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var refused sinks.Refusals
	for i := range msgs {
		if err := s.nc.PublishMsg(natsMsg(&msgs[i])); err != nil {
			err = fmt.Errorf("sink %s: publish %s: %w: %w", s.name, msgs[i].Topic, classify(err), err)
			if !errors.Is(err, bus.ErrInvalid) {
				return err
			}
			refused.Add(err) // the others still go
		}
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("sink %s: flush: %w: %w", s.name, bus.ErrUnavailable, err)
	}
	return refused.Err()
}

func (s *NATS) publishJetStream(ctx context.Context, msgs []bus.Message) error {
	if s.cfg.Stream != nil && s.cfg.Stream.Create && !s.streamReady() {
		if err := s.ensureStream(ctx); err != nil {
			return fmt.Errorf("sink %s: %w: %w", s.name, bus.ErrUnavailable, err)
		}
	}
	errs, err := s.pub.publish(ctx, s.timeout, msgs)
	if err != nil {
		return fmt.Errorf("sink %s: waiting for acks: %w: %w", s.name, bus.ErrUnavailable, err)
	}
	// A transient failure anywhere makes the whole batch retried, and a
	// refusal for good is reported only if all the other messages are
	// stored.
	var (
		refused   sinks.Refusals
		transient error
	)
	for i, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) && s.cfg.Stream != nil && s.cfg.Stream.Create {
			s.loseStream() // the stream may be gone, or its leader: make it again before the next publish
		}
		if errors.Is(classify(err), bus.ErrInvalid) {
			err = fmt.Errorf("sink %s: publish %s: %w: %w", s.name, msgs[i].Topic, bus.ErrInvalid, err)
		} else {
			err = fmt.Errorf("sink %s: publish %s: %w", s.name, msgs[i].Topic, classifyAck(err))
		}
		if errors.Is(err, bus.ErrInvalid) {
			refused.Add(err)
		} else if transient == nil {
			transient = err
		}
	}
	if transient != nil {
		return transient
	}
	return refused.Err()
}

// classify tells a message NATS can never take (too large, a bad subject),
// which retrying cannot fix, from a passing outage.
func classify(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return bus.ErrInvalid
	}
	return bus.ErrUnavailable
}

// classifyAck tells a JetStream ack error that no retry can fix (the
// message exceeds the stream's max_msg_size) from one that may pass (a
// timeout, a leader election, a stream that is full for now). No answer
// from any stream is taken as passing too, since a stream being created or
// recovered gives it, but the error says what else it may mean.
func classifyAck(err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return fmt.Errorf("%w: %w", bus.ErrInvalid, err)
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w: %w (is the subject inside the stream's subjects?)", bus.ErrUnavailable, err)
	default:
		return fmt.Errorf("%w: %w", bus.ErrUnavailable, err)
	}
}

// natsMsg carries the message's headers as NATS headers; Nats-Msg-Id among
// them makes JetStream store a retried message once.
func natsMsg(m *bus.Message) *nats.Msg {
	nm := &nats.Msg{Subject: m.Topic, Data: m.Payload}
	if len(m.Headers) > 0 {
		nm.Header = make(nats.Header, len(m.Headers))
		vals := make([]string, 0, len(m.Headers)) // one allocation for every header's value
		for k, v := range m.Headers {
			vals = append(vals, v)
			nm.Header[k] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
	}
	return nm
}

// Close drains what is in flight, bounded by ctx, and disconnects.
func (s *NATS) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.done)
		if s.js != nil {
			if perr := s.pub.idle(ctx); perr != nil {
				err = fmt.Errorf("sink %s: acks still pending at shutdown: %w", s.name, perr)
			}
		}
		if s.nc.IsConnected() {
			fctx, cancel := context.WithTimeout(ctx, s.timeout) // nats.go insists on a deadline
			if ferr := s.nc.FlushWithContext(fctx); ferr != nil {
				err = errors.Join(err, fmt.Errorf("sink %s: flush at shutdown: %w", s.name, ferr))
			}
			cancel()
		}
		s.nc.Close()
	})
	return err
}
