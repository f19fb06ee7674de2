package broker

import (
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/ellipsis"
)

// rateLimitedLog writes at most one line per interval for events a client
// can repeat at will (refused logins, oversized packets, dropped messages),
// so that a misbehaving client cannot flood the logs. The first event of an
// interval is logged in full, by the caller's function; the ones after it
// are counted, and the count is logged when the interval ends, so that a
// burst that stops is still reported, not only when the next event comes.
type rateLimitedLog struct {
	log  zerolog.Logger
	what string // the events, plural, for the count's line: "refused connections"
	logInterval
	last       time.Time // when the last full line was written
	suppressed int       // events counted since then, not logged yet
}

// logInterval is what both logs keep to write their counts when an
// interval ends. Its mutex guards the state of the log that embeds it too.
type logInterval struct {
	interval time.Duration // zero means 10s
	mu       sync.Mutex
	timer    *time.Timer
	stopped  bool
}

func (w *logInterval) every() time.Duration {
	if w.interval == 0 {
		return 10 * time.Second
	}
	return w.interval
}

// stopWith ends the log, as the broker closes: it stops the timer, and
// writes with logCounts what was counted and not written yet.
func (w *logInterval) stopWith(logCounts func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	logCounts()
}

// elapsedSince is the time since t, rounded for a count's line.
func elapsedSince(t time.Time) time.Duration {
	if d := time.Since(t).Round(time.Second); d > 0 {
		return d
	}
	return time.Since(t).Round(time.Millisecond)
}

// do runs log, or counts the event when a line was written less than an
// interval ago.
func (r *rateLimitedLog) do(log func()) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every() {
		r.suppressed++
		if r.timer == nil {
			r.timer = time.AfterFunc(r.last.Add(r.every()).Sub(now), r.flush)
		}
		r.mu.Unlock()
		return
	}
	r.logCount() // the timer's, when this event came first
	r.last = now
	r.mu.Unlock()
	log()
}

// flush logs the count of the interval that ended. The next event is then
// logged in full again.
func (r *rateLimitedLog) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if !r.stopped {
		r.logCount()
	}
}

// logCount writes the count, if any; r.mu is held, which keeps the line in
// order with the next full one.
func (r *rateLimitedLog) logCount() {
	if r.suppressed == 0 {
		return
	}
	r.log.Warn().Int("suppressed", r.suppressed).Msg(fmt.Sprintf("%d more %s in the last %s", r.suppressed, r.what, elapsedSince(r.last)))
	r.suppressed = 0
}

// stop logs the count not logged yet and ends the log: the broker is closing.
func (r *rateLimitedLog) stop() { r.stopWith(r.logCount) }

// denialLog logs every denied publish without letting a client flood the
// log: the first denial of a client, user and topic at once, then, while
// they go on, one line per interval with their count ("49 more denials in
// the last 10s"). A key quiet for a whole interval is forgotten, so its
// next denial is logged at once again. At most maxDenialKeys keys are
// followed per interval; denials beyond them are counted together.
type denialLog struct {
	log zerolog.Logger
	logInterval
	pending map[denialKey]*denialCount
	others  int       // denials of keys past maxDenialKeys
	since   time.Time // when the current interval began
}

type denialKey struct{ client, username, remote, topic string }

type denialCount struct {
	n   int    // denials since the last line
	why string // why the first was refused
}

// maxDenialKeys bounds what a storm of distinct topics or client ids costs.
// maxLoggedField bounds each field a client gives (client id, username,
// topic) that is kept and logged: MQTT allows 64 KiB.
const (
	maxDenialKeys  = 256
	maxLoggedField = 256
)

// denied logs or counts one denied publish.
func (l *denialLog) denied(client, username, remote, topic, why string) {
	k := denialKey{ellipsis.Cut(client, maxLoggedField), ellipsis.Cut(username, maxLoggedField), remote, ellipsis.Cut(topic, maxLoggedField)}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	if c, ok := l.pending[k]; ok {
		c.n++
		l.mu.Unlock()
		return
	}
	if len(l.pending) >= maxDenialKeys {
		l.others++
		l.mu.Unlock()
		return
	}
	if l.pending == nil {
		l.pending = map[denialKey]*denialCount{}
	}
	l.pending[k] = &denialCount{why: why}
	if l.timer == nil {
		l.since = time.Now()
		l.timer = time.AfterFunc(l.every(), l.flush)
	}
	l.mu.Unlock()
	l.event(k).Msg("refused publish: " + why)
}

func (l *denialLog) event(k denialKey) *zerolog.Event {
	return l.log.Warn().Str("client", k.client).Str("username", k.username).Str("remote", k.remote).Str("topic", k.topic)
}

// flush logs the counts of the interval that ended, and starts the next
// one while any key is still followed.
func (l *denialLog) flush() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.timer = nil
	l.logCounts()
	if len(l.pending) > 0 {
		l.since = time.Now()
		l.timer = time.AfterFunc(l.every(), l.flush)
	}
	l.mu.Unlock()
}

// logCounts writes one line per key denied again since its last line, and
// forgets the keys that were quiet. l.mu is held: the lines are few, and
// holding it keeps them in order with the next interval's.
func (l *denialLog) logCounts() {
	elapsed := elapsedSince(l.since)
	for k, c := range l.pending {
		if c.n == 0 {
			delete(l.pending, k)
			continue
		}
		l.event(k).Int("denials", c.n).Msg(fmt.Sprintf("%d more denials in the last %s: %s", c.n, elapsed, c.why))
		c.n = 0
	}
	if l.others > 0 {
		l.log.Warn().Int("denials", l.others).Msg(fmt.Sprintf("%d more denials in the last %s, of clients and topics past the %d followed", l.others, elapsed, maxDenialKeys))
		l.others = 0
	}
}

// stop logs the counts not logged yet and ends the log: the broker is closing.
func (l *denialLog) stop() { l.stopWith(l.logCounts) }
