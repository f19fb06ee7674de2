package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/backoff"
	"github.com/opsfirehose/firehose/internal/ellipsis"
	"github.com/opsfirehose/firehose/internal/logging"
	"github.com/opsfirehose/firehose/payloads"
	payload "github.com/opsfirehose/firehose/payloads/gerrit"
)

// GerritPath is the bridge's endpoint for Gerrit events.
const GerritPath = "/gerrit/v1/events"

// ndjsonType is the Content-Type of the batches the relay posts.
const ndjsonType = "application/x-ndjson"

// maxRetryAfter caps a server's Retry-After, so that a bad header cannot
// park the relay for hours.
const maxRetryAfter = 5 * time.Minute

// killGrace is how long the command has to exit after SIGTERM before its
// process group gets SIGKILL.
const killGrace = 5 * time.Second

// gerritConfig is the relay's settings, from its flags.
type gerritConfig struct {
	command      string
	buffer       int
	batchMax     int
	batchBytes   int
	maxLine      int
	backoffMin   time.Duration
	backoffMax   time.Duration
	drainTimeout time.Duration
}

// gerritStats counts what the relay did; every field is read with Load.
type gerritStats struct {
	// Lines read from the command, empty ones excepted.
	Lines atomic.Int64
	// Events queued for the bridge.
	Events atomic.Int64
	// BadLines were not Gerrit events the bridge would take; each was logged.
	BadLines atomic.Int64
	// DroppedOutput counts Gerrit's "dropped-output" notices: Gerrit lost
	// events for this stream because it was read too slowly.
	DroppedOutput atomic.Int64
	// Starts and Restarts of the command.
	Starts, Restarts atomic.Int64
	// Posted events were accepted by the bridge.
	Posted atomic.Int64
	// Rejected events were refused by the bridge as bad; each was logged.
	Rejected atomic.Int64
	// FailedPosts got no answer, or a retryable one (429, 503, ...).
	FailedPosts atomic.Int64
	// Lost events were queued but not delivered when the relay stopped.
	Lost atomic.Int64
}

// gerritRelay runs the stream command and posts its events.
type gerritRelay struct {
	cfg    gerritConfig
	client *client
	log    zerolog.Logger
	queue  chan []byte
	stats  gerritStats
}

func newGerritRelay(cfg gerritConfig, cl *client, log zerolog.Logger) *gerritRelay {
	return &gerritRelay{cfg: cfg, client: cl, log: log, queue: make(chan []byte, cfg.buffer)}
}

func runGerrit(ctx context.Context, args []string, e env) int {
	fs := newFlagSet("gerrit", e)
	var cf clientFlags
	cf.register(fs, e)
	var cfg gerritConfig
	var logCfg logging.Config
	fs.StringVar(&cfg.command, "exec", "", "the `command` that prints Gerrit events, one per line, run with /bin/sh -c\n(for example 'ssh -p 29418 user@review.example.org gerrit stream-events')")
	fs.IntVar(&cfg.buffer, "buffer", 10000, "events held in memory while the bridge is unreachable; when full, reading\nstops, and Gerrit's own queue for the stream fills")
	fs.IntVar(&cfg.batchMax, "batch", 100, "most events in one post")
	fs.IntVar(&cfg.batchBytes, "batch-bytes", 1<<20, "most bytes in one post; keep it under the bridge's gerrit.max_body")
	fs.IntVar(&cfg.maxLine, "max-line", 8<<20, "longest line taken, in bytes (the bridge's default gerrit.max_body); a longer one is skipped and counted")
	fs.DurationVar(&cfg.backoffMin, "backoff-min", time.Second, "first wait before restarting the command or retrying a post")
	fs.DurationVar(&cfg.backoffMax, "backoff-max", time.Minute, "longest such wait; a command that ran this long restarts after --backoff-min")
	fs.DurationVar(&cfg.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long to keep posting the events still held")
	fs.StringVar(&logCfg.Level, "log-level", "info", "trace, debug, info, warn or error")
	fs.StringVar(&logCfg.Format, "log-format", logging.FormatAuto, "auto, json or console")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	problems := cfg.check()
	if err := logCfg.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	cl, err := cf.newClient(GerritPath)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(e.stderr, "bridge ingest gerrit: %s\n", p)
		}
		return ExitUsage
	}
	log := logging.New(logCfg, e.stderr).With().Str("component", "ingest-gerrit").Logger()
	if err := newGerritRelay(cfg, cl, log).run(ctx); err != nil {
		log.Error().Err(err).Msg("gerrit relay stopped")
		return ExitFailure
	}
	return ExitOK
}

func (c gerritConfig) check() []string {
	var p []string
	if c.command == "" {
		p = append(p, "--exec is required, for example --exec 'ssh -p 29418 user@review.example.org gerrit stream-events'")
	}
	if c.buffer < 1 || c.batchMax < 1 || c.batchBytes < 1 || c.maxLine < 1 {
		p = append(p, "--buffer, --batch, --batch-bytes and --max-line must be positive")
	}
	if c.backoffMin <= 0 || c.backoffMax < c.backoffMin {
		p = append(p, "--backoff-min must be positive and at most --backoff-max")
	}
	if c.drainTimeout < 0 {
		p = append(p, "--drain-timeout must not be negative")
	}
	return p
}

// run relays until ctx ends, then stops the command and keeps posting what
// it holds for up to drainTimeout. It returns an error when events were lost.
func (g *gerritRelay) run(ctx context.Context) error {
	g.log.Info().Str("url", g.client.endpoint).Int("buffer", g.cfg.buffer).Msg("gerrit relay starting")
	sendCtx, stopSending := context.WithCancel(context.Background())
	defer stopSending()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		g.send(sendCtx)
	}()
	g.readLoop(ctx)
	close(g.queue)
	drain := time.NewTimer(g.cfg.drainTimeout)
	defer drain.Stop()
	select {
	case <-sent:
	case <-drain.C:
		stopSending()
		<-sent
	}
	s := &g.stats
	g.log.Info().Int64("posted", s.Posted.Load()).Int64("bad_lines", s.BadLines.Load()).
		Int64("rejected", s.Rejected.Load()).Int64("restarts", s.Restarts.Load()).
		Int64("dropped_output", s.DroppedOutput.Load()).Int64("lost", s.Lost.Load()).Msg("gerrit relay stopped")
	if lost := s.Lost.Load(); lost > 0 {
		return fmt.Errorf("%d events were not delivered before the drain timeout", lost)
	}
	return nil
}

// readLoop runs the command until ctx ends, restarting it whenever it exits.
func (g *gerritRelay) readLoop(ctx context.Context) {
	retry := backoff.Backoff{Min: g.cfg.backoffMin, Max: g.cfg.backoffMax}
	for {
		start := time.Now()
		err := g.runCommand(ctx)
		if ctx.Err() != nil {
			return
		}
		ranFor := time.Since(start)
		if ranFor >= g.cfg.backoffMax {
			// A stream that ran for a while and dropped (a Gerrit restart,
			// a network blip) comes back quickly.
			retry.Reset()
		}
		wait := retry.Next()
		restarts := g.stats.Restarts.Add(1)
		ev := g.log.Warn()
		if err != nil {
			ev = ev.Err(err)
		}
		ev.Int64("ran_for_ms", ranFor.Milliseconds()).Int64("restart_in_ms", wait.Milliseconds()).Int64("restarts", restarts).
			Msg("gerrit stream command exited; restarting")
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

// runCommand runs the command once and reads its stdout to the end. It
// returns the command's exit error, if any.
func (g *gerritRelay) runCommand(ctx context.Context) error {
	cmd := exec.Command("/bin/sh", "-c", g.cfg.command)
	ownProcessGroup(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the command: %w", err)
	}
	g.log.Info().Int("pid", cmd.Process.Pid).Int64("start", g.stats.Starts.Add(1)).Msg("gerrit stream command started")
	exited := make(chan struct{})
	stderrDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { g.stopOnCancel(ctx, cmd, exited) })
	wg.Go(func() { defer close(stderrDone); g.logStderr(stderr) })
	g.readEvents(ctx, stdout)
	// Wait closes the pipes, so it must not run before the command's last
	// words on stderr (ssh's "Permission denied", say) are read and logged;
	// a process the command left behind may hold stderr open, hence the bound.
	select {
	case <-stderrDone:
	case <-time.After(stderrDrain):
	}
	err = cmd.Wait()
	close(exited)
	wg.Wait()
	return err
}

// stderrDrain bounds the wait for a command's stderr to end once its stdout has.
const stderrDrain = time.Second

// stopOnCancel ends the command's whole process group (sh, ssh, ...) when
// ctx ends: SIGTERM, then SIGKILL after killGrace.
func (g *gerritRelay) stopOnCancel(ctx context.Context, cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	case <-ctx.Done():
	}
	signalGroup(cmd, sigTerm)
	grace := time.NewTimer(killGrace)
	defer grace.Stop()
	select {
	case <-exited:
	case <-grace.C:
		g.log.Warn().Int("pid", cmd.Process.Pid).Msg("gerrit stream command ignored SIGTERM; killing it")
		signalGroup(cmd, sigKill)
	}
}

// logStderr logs what the command says on stderr (ssh's errors, say).
func (g *gerritRelay) logStderr(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 4096), 64<<10)
	for s.Scan() {
		g.log.Warn().Str("stderr", s.Text()).Msg("gerrit stream command")
	}
}

// readEvents reads lines until EOF, queueing each Gerrit event. It returns
// early when ctx ends while the queue is full.
func (g *gerritRelay) readEvents(ctx context.Context, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for n := 1; ; n++ {
		var tooLong bool
		var err error
		line, tooLong, err = readLine(br, line[:0], g.cfg.maxLine)
		if len(line) > 0 || tooLong {
			g.stats.Lines.Add(1)
			if ev := g.event(n, line, tooLong); ev != nil && !g.enqueue(ctx, ev) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				g.log.Warn().Err(err).Msg("reading the gerrit stream command's output")
			}
			return
		}
	}
}

// event checks one line; it returns a copy of the event to queue, or nil
// when the line was skipped (and logged and counted).
func (g *gerritRelay) event(n int, line []byte, tooLong bool) []byte {
	trimmed := bytes.Trim(line, " \t\r\n")
	if len(trimmed) == 0 && !tooLong {
		return nil
	}
	if tooLong {
		bad := g.stats.BadLines.Add(1)
		g.log.Warn().Int("line", n).Int("max_line", g.cfg.maxLine).Int64("bad_lines", bad).
			Msg("skipping a line longer than --max-line")
		return nil
	}
	if _, err := payload.ParseEvent(trimmed); err != nil {
		var head struct{ Type string }
		if json.Unmarshal(trimmed, &head) == nil && head.Type == payload.TypeDroppedOutput {
			dropped := g.stats.DroppedOutput.Add(1)
			g.log.Warn().Int64("dropped_output", dropped).
				Msg("Gerrit dropped events for this stream because it was read too slowly")
			return nil
		}
		bad := g.stats.BadLines.Add(1)
		// "line" is the line of the command's output; the parser's own
		// error counts lines of the one event it was given, so only its
		// field and message are logged.
		warn := g.log.Warn().Int("line", n).Int("bytes", len(trimmed)).Int64("bad_lines", bad)
		var pe *payloads.FieldError
		if errors.As(err, &pe) {
			if pe.Field != "" {
				warn = warn.Str("field", pe.Field)
			}
			warn = warn.Str("error", pe.Msg)
		} else {
			warn = warn.Err(err)
		}
		if !json.Valid(trimmed) {
			// Not an event: likely a message from the command itself, so it
			// is shown, shortened.
			warn = warn.Str("text", ellipsis.Cut(string(trimmed), 120))
		}
		warn.Msg("skipping a line that is not a Gerrit event")
		g.log.Debug().Int("line", n).Bytes("event", trimmed).Msg("skipped line")
		return nil
	}
	return bytes.Clone(trimmed)
}

// enqueue waits for room in the buffer; a full buffer stops reading, which
// makes the command (and ssh, and Gerrit) wait in turn.
func (g *gerritRelay) enqueue(ctx context.Context, ev []byte) bool {
	select {
	case g.queue <- ev:
		g.stats.Events.Add(1)
		return true
	default:
	}
	g.log.Warn().Int("buffer", g.cfg.buffer).Msg("event buffer full; reading paused until the bridge takes events")
	select {
	case g.queue <- ev:
		g.stats.Events.Add(1)
		return true
	case <-ctx.Done():
		g.stats.Lost.Add(1)
		return false
	}
}

// readLine reads one line into buf, without its '\n'. A line longer than
// limit is discarded up to its end and reported as tooLong.
func readLine(br *bufio.Reader, buf []byte, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > limit+1 {
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 && buf[len(buf)-1] == '\n' {
			buf = buf[:len(buf)-1]
		}
		return buf, tooLong, err
	}
}

// send posts batches from the queue until it is closed and empty, or ctx
// ends; what is left then is counted as lost.
func (g *gerritRelay) send(ctx context.Context) {
	for first := range g.queue {
		batch, size := [][]byte{first}, len(first)+1
	fill:
		for len(batch) < g.cfg.batchMax && size < g.cfg.batchBytes {
			select {
			case ev, ok := <-g.queue:
				if !ok {
					break fill
				}
				batch, size = append(batch, ev), size+len(ev)+1
			default:
				break fill
			}
		}
		if left := g.deliver(ctx, batch); left > 0 {
			for range g.queue {
				left++
			}
			g.stats.Lost.Add(int64(left))
			g.log.Error().Int("lost", left).Msg("stopped with events the bridge did not take")
			return
		}
	}
}

// deliver posts batch until the bridge takes it, retrying with backoff (or
// the server's Retry-After) while the bridge is unreachable or busy. A batch
// the bridge refuses as bad is split until the bad events are alone; those
// are logged, counted and dropped. It returns how many events were not
// delivered because ctx ended.
func (g *gerritRelay) deliver(ctx context.Context, batch [][]byte) int {
	retry := backoff.Backoff{Min: g.cfg.backoffMin, Max: g.cfg.backoffMax}
	body := bytes.Join(batch, []byte{'\n'})
	for {
		a, err := g.client.post(ctx, ndjsonType, body)
		switch {
		case err == nil && a.ok():
			g.stats.Posted.Add(int64(len(batch)))
			g.log.Debug().Int("events", len(batch)).Msg("posted")
			return 0
		case err == nil && a.refused():
			if len(batch) > 1 {
				half := len(batch) / 2
				if left := g.deliver(ctx, batch[:half]); left > 0 {
					return left + len(batch) - half
				}
				return g.deliver(ctx, batch[half:])
			}
			rejected := g.stats.Rejected.Add(1)
			g.log.Warn().Int("status", a.code).Str("error", a.message).Int("bytes", len(body)).Int64("rejected", rejected).
				Msg("the bridge refused an event; dropping it")
			return 0
		}
		if ctx.Err() != nil {
			return len(batch)
		}
		g.stats.FailedPosts.Add(1)
		var wait time.Duration
		if err == nil && a.retryAfter > 0 {
			wait = min(a.retryAfter, maxRetryAfter)
		} else {
			wait = retry.Next()
		}
		g.logRetry(a, err, wait, len(batch))
		if !backoff.Sleep(ctx, wait) {
			return len(batch)
		}
	}
}

func (g *gerritRelay) logRetry(a answer, err error, wait time.Duration, events int) {
	ev := g.log.Warn()
	msg := "the bridge did not take the events; retrying"
	switch {
	case err != nil:
		ev = ev.Err(err)
		msg = "the bridge is unreachable; retrying"
	case a.code == 401 || a.code == 403:
		ev = g.log.Error()
		msg = "the bridge refused the token; fix --token or --token-file; retrying"
		if rerr := g.client.reloadToken(); rerr != nil {
			ev = ev.AnErr("token_file", rerr)
		}
	}
	if err == nil {
		ev = ev.Str("status", strconv.Itoa(a.code)).Str("error", a.message)
	}
	ev.Int("events", events).Int64("retry_in_ms", wait.Milliseconds()).Msg(msg)
}
