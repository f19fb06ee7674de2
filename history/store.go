package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/ellipsis"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
)

// storeTimeout bounds one request to the store: making the stream, reading
// its state, a batch's acks.
const storeTimeout = 5 * time.Second

// store is the history's JetStream stream, on the embedded nats-server or on
// a sink's servers, and the connection to it.
type store struct {
	cfg    Config
	server *server.Server // the embedded server; nil on a sink
	nc     *nats.Conn
	js     jetstream.JetStream
	acks   *acks
	// numbers are the numbers of the packs at the stream's ends.
	numbers packNumbers
}

// openEmbedded starts nats-server in the process, with JetStream storing in
// dir and no listening socket (the bridge connects in process), and makes
// the stream.
func openEmbedded(ctx context.Context, cfg Config, dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("history: store directory: %w (data_dir must be writable)", err)
	}
	opts := &server.Options{
		ServerName: "firehose-history",
		DontListen: true,
		JetStream:  true,
		StoreDir:   dir,
		// The account's limit leaves the stream's max_bytes room: the
		// stream, not the account, drops the oldest messages.
		JetStreamMaxStore:  int64(cfg.MaxBytes) + int64(cfg.MaxBytes)/4 + 64<<20,
		JetStreamMaxMemory: 64 << 20,
		NoSigs:             true,
		NoLog:              true,
		MaxPayload:         64 << 20,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("history: embedded nats-server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("history: embedded nats-server did not start within 30s (is %s on a slow or full disk?)", dir)
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns), nats.Name("firehose-history"), nats.MaxReconnects(-1))
	if err != nil {
		ns.Shutdown()
		return nil, fmt.Errorf("history: connect to the embedded nats-server: %w", err)
	}
	s := &store{cfg: cfg, server: ns, nc: nc}
	if err := s.init(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// openSink connects to the servers of the JetStream sink sc, in the
// background as the sinks do: the bridge starts when they are down, and the
// stream is made once they are up (ensure).
func openSink(cfg Config, sc sinkconfig.Config, log zerolog.Logger) (*store, error) {
	opts, err := natssink.NATSCredentials(*sc.NATS)
	if err != nil {
		return nil, fmt.Errorf("history.sink %s: %w", cfg.Sink, err)
	}
	s := &store{cfg: cfg}
	// The stream is made (or its limits set) on each connection: a
	// cluster that lost it, or a new one, has it again.
	made := make(chan struct{}) // s.js is set
	connected := func(*nats.Conn) {
		go func() {
			<-made
			if err := s.ensure(context.Background()); err != nil {
				log.Error().Err(err).Str("sink", cfg.Sink).Msg("history: cannot make the stream on the sink's servers; messages are left out of the history until it is made")
				return
			}
			log.Info().Str("sink", cfg.Sink).Str("stream", cfg.Stream).Msg("history stream ready on the sink's servers")
		}()
	}
	opts = append(opts,
		nats.ConnectHandler(connected),
		nats.ReconnectHandler(connected),
		nats.Name("firehose-history"),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.IgnoreAuthErrorAbort(),
		// No reconnect buffer: while the cluster is away, a write fails at
		// once and is counted, instead of piling up in memory.
		nats.ReconnectBufSize(-1),
	)
	nc, err := nats.Connect(strings.Join(sc.NATS.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("history.sink %s: %w", cfg.Sink, err)
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		nc.Close()
		return nil, fmt.Errorf("history.sink %s: jetstream: %w", cfg.Sink, err)
	}
	close(made)
	if err := s.listen(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("history.sink %s: %w", cfg.Sink, err)
	}
	return s, nil
}

// init makes the JetStream context and the stream.
func (s *store) init(ctx context.Context) (err error) {
	if err := s.listen(); err != nil {
		return err
	}
	if s.js == nil {
		if s.js, err = jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
			return fmt.Errorf("history: jetstream: %w", err)
		}
	}
	return s.ensure(ctx)
}

// ensure makes the stream, or updates its limits to the config's.
func (s *store) ensure(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	sc := jetstream.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "firehose: the bus's history (history.* in the bridge's config)",
		Subjects:    []string{s.cfg.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		MaxBytes:    int64(s.cfg.MaxBytes),
		MaxAge:      s.cfg.MaxAge,
		Discard:     jetstream.DiscardOld,
		// The writer sends each message once: nothing to de-duplicate
		// (the shortest window JetStream takes, and no longer than max_age).
		Duplicates: min(time.Second, s.cfg.MaxAge),
	}
	if s.server != nil {
		// On the embedded server, writes reach the disk in batches, not one
		// write(2) each: the history is a record, and a machine's crash may
		// lose its last moments. A sink's stream keeps its cluster's ways.
		sc.PersistMode = jetstream.AsyncPersistMode
	}
	_, err := s.js.CreateOrUpdateStream(ctx, sc)
	if err != nil {
		return fmt.Errorf("history: stream %s: %w", s.cfg.Stream, err)
	}
	return nil
}

// state reads the stream's state.
func (s *store) state(ctx context.Context) (jetstream.StreamState, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return jetstream.StreamState{}, err
	}
	return st.CachedInfo().State, nil
}

// bounds reads the stream's state and the numbers of its messages (pack.go):
// first, the number of the oldest message kept, and end, the number after
// the newest. numbered is false for an empty stream (first and end are
// then 0), and for one whose packs carry no numbers.
func (s *store) bounds(ctx context.Context) (st jetstream.StreamState, first, end uint64, numbered bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	stream, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return st, 0, 0, false, err
	}
	st = stream.CachedInfo().State
	if st.Msgs == 0 {
		return st, 0, 0, false, nil
	}
	first, _, ok1, err := s.numbers.at(ctx, stream, 0, st.FirstSeq)
	if err != nil {
		return st, 0, 0, false, err
	}
	lastFirst, lastCount, ok2, err := s.numbers.at(ctx, stream, 1, st.LastSeq)
	if err != nil {
		return st, 0, 0, false, err
	}
	if !ok1 || !ok2 || lastFirst+lastCount < first {
		return st, 0, 0, false, nil
	}
	return st, first, lastFirst + lastCount, true, nil
}

// packNumbers reads the numbers of the packs at the stream's ends (bounds),
// and keeps them by sequence: a pack's numbers never change, and reading a
// pack reads it whole (up to 1 MiB, in JSON), which a scrape of the metrics
// every few seconds should not.
type packNumbers struct {
	mu      sync.Mutex
	created time.Time // the stream's: one made again numbers its packs anew
	seq     [2]uint64 // of the oldest pack read, and of the newest; 0 for none
	nums    [2][2]uint64
	ok      [2]bool
}

// at is the numbers of the pack at seq (slot 0: the oldest end, 1: the
// newest), or of the next one when it was dropped since seq was read.
func (p *packNumbers) at(ctx context.Context, stream jetstream.Stream, slot int, seq uint64) (first, count uint64, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if created := stream.CachedInfo().Created; !created.Equal(p.created) {
		p.created, p.seq = created, [2]uint64{}
	}
	if p.seq[slot] == seq {
		return p.nums[slot][0], p.nums[slot][1], p.ok[slot], nil
	}
	m, err := stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) && slot == 0 {
		// Dropped since the state was read: the next one is the oldest.
		m, err = stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
	}
	if err != nil {
		return 0, 0, false, err
	}
	first, count, ok = packBounds(m.Header.Get)
	p.seq[slot], p.nums[slot], p.ok[slot] = m.Sequence, [2]uint64{first, count}, ok
	return first, count, ok, nil
}

// storedEnd is the number after the stream's newest message: where the
// writer numbers on from.
func (s *store) storedEnd(ctx context.Context) (uint64, error) {
	_, _, end, _, err := s.bounds(ctx)
	return max(end, 1), err // numbers start at 1: 0 is "not read yet" to the metrics
}

// up reports whether the connection to the store is up.
func (s *store) up() bool { return s.nc.IsConnected() }

// close disconnects and stops the embedded server.
func (s *store) close() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.server != nil {
		s.server.Shutdown()
		s.server.WaitForShutdown()
	}
}

// errStreamMissing tells ensure is needed: a sink's server came back without
// the stream, or never had it.
func isStreamMissing(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoResponders)
}

// storeDir is where the embedded server keeps the history under dataDir.
func storeDir(dataDir string) string { return filepath.Join(dataDir, "history") }

// listen subscribes to the acks of the writer's publishes.
func (s *store) listen() error {
	s.acks = &acks{prefix: s.nc.NewInbox() + "."}
	if _, err := s.nc.Subscribe(s.acks.prefix+"*", s.acks.receive); err != nil {
		return fmt.Errorf("history: subscribe to the store's acks: %w", err)
	}
	return nil
}

// acks counts the store's answers to the writer's current batch, which
// come to a reply subject of the batch's own: an answer to an earlier batch
// (that timed out) is not counted for this one.
type acks struct {
	prefix string

	mu      sync.Mutex
	batch   string // the current batch's reply subject
	want    int    // answers awaited; -1 until the batch is sent
	ok, bad int
	why     error // the last refusal
	done    chan struct{}
}

// expect starts batch n: its reply subject, and a channel closed once all
// its answers are in.
func (a *acks) expect(n uint64) (reply string, done <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batch = a.prefix + strconv.FormatUint(n, 36)
	a.want, a.ok, a.bad, a.why = -1, 0, 0, nil
	a.done = make(chan struct{})
	return a.batch, a.done
}

// receive counts one answer: a PubAck, or an error (a JSON error, or a
// status such as 503, no responders, when the stream is missing).
func (a *acks) receive(m *nats.Msg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m.Subject != a.batch {
		return
	}
	switch status := m.Header.Get("Status"); {
	case status == "503":
		a.bad, a.why = a.bad+1, fmt.Errorf("the stream is missing: %w", nats.ErrNoResponders)
	case status != "":
		a.bad, a.why = a.bad+1, fmt.Errorf("the store answered status %s %s", status, m.Header.Get("Description"))
	case bytes.Contains(m.Data, []byte(`"error"`)):
		a.bad, a.why = a.bad+1, fmt.Errorf("the store refused a message: %s", ellipsis.Cut(string(m.Data), 200))
	default:
		a.ok++
	}
	if a.want >= 0 && a.ok+a.bad >= a.want {
		close(a.done)
		a.want = -2 // closed
	}
}

// wait waits, at most timeout, for sent answers to the current batch, and
// returns how many were acks and how many refusals (those missing count as
// refused), with why.
func (a *acks) wait(sent int, done <-chan struct{}, timeout time.Duration) (stored, refused int, why error) {
	a.mu.Lock()
	if a.ok+a.bad >= sent {
		a.want = -2
		close(a.done)
	} else {
		a.want = sent
	}
	a.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batch = "" // late answers are not this batch's
	stored, refused, why = a.ok, sent-a.ok, a.why
	if refused > 0 && why == nil {
		why = fmt.Errorf("%d of %d messages had no ack within %v", refused, sent, timeout)
	}
	return stored, refused, why
}
