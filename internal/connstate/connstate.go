// Package connstate follows a client connection as its client library
// reports it; the NATS and MQTT sinks and the router's subscriber to an
// external broker share it.
package connstate

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// State follows a sink's connection as its client library reports it,
// so that an operator learns why a sink is down (a wrong password, a
// refused connection) from the log and from /readyz, not only that it is.
// A failure is logged at warn when its reason is new, and while the same
// reason repeats (the client retries every second or so) at most once per
// repeat, with the number of attempts.
type State struct {
	log  zerolog.Logger
	what string // "MQTT sink out", "NATS sink all"

	mu       sync.Mutex
	reason   string // why the connection is not up; "" while it is, or before any news
	logged   string // the reason last logged
	loggedAt time.Time
	failures int // attempts that failed since the last line, or since connecting
	total    int // attempts that failed since the connection was last up
}

// repeat is how often a failure that does not change is logged again.
const repeat = time.Minute

// New is the state of the connection of what ("MQTT sink out"), logging to log.
func New(log zerolog.Logger, what string) *State { return &State{log: log, what: what} }

// Failed records a connection attempt that failed, and logs it if its
// reason is new or was last logged a while ago.
func (c *State) Failed(err error, msg string) {
	if err == nil {
		return
	}
	reason := err.Error()
	c.mu.Lock()
	c.reason = reason
	c.failures++
	c.total++
	now := time.Now()
	if reason == c.logged && now.Sub(c.loggedAt) < repeat {
		c.mu.Unlock()
		return
	}
	attempts := c.failures
	c.logged, c.loggedAt, c.failures = reason, now, 0
	c.mu.Unlock()
	c.log.Warn().Str("reason", reason).Int("attempts", attempts).Msg(c.what + " " + msg + ": " + reason)
}

// Lost records a connection that went down, for Why; the caller logs it.
func (c *State) Lost(err error) {
	reason := "connection lost"
	if err != nil {
		reason = "connection lost: " + err.Error()
	}
	c.mu.Lock()
	c.reason, c.logged = reason, ""
	c.mu.Unlock()
}

// Connected records that the connection is up, and returns how many
// attempts failed before, for the caller's log line.
func (c *State) Connected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.total
	c.reason, c.logged, c.failures, c.total = "", "", 0, 0
	return n
}

// Why is the last reason recorded, or fallback when there is none.
func (c *State) Why(fallback string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == "" {
		return fallback
	}
	return c.reason
}
