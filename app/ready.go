package app

import (
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// readyPoll is how often watchReady looks at readiness.
const readyPoll = 250 * time.Millisecond

// readyGrace is how long a starting bridge may take to become ready
// (sinks connect in the background) before it says what keeps it.
const readyGrace = time.Second

// watchReady logs "bridge ready" when every check of /readyz passes, and
// "bridge not ready" with what fails (a sink's wrong password, say) when
// they do not: at start once readyGrace has passed, and then on every
// change, until the bridge stops.
func (b *Bridge) watchReady(poll time.Duration) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	start := time.Now()
	logged := "" // "ready", or the failures last logged
	for {
		checks, ready := b.readiness()
		switch {
		case ready && logged != "ready":
			b.log.Info().Int("routes", len(b.cfg.Routes)).Msg("bridge ready")
			logged = "ready"
		case !ready && (logged != "" || time.Since(start) >= readyGrace):
			if failing := failures(checks); failing != logged {
				d := zerolog.Dict()
				for k, v := range checks {
					if v != "ok" {
						d = d.Str(k, v)
					}
				}
				b.log.Warn().Dict("failing", d).Msg("bridge not ready: " + failing)
				logged = failing
			}
		}
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
	}
}

// failures lists the checks that fail, in name order.
func failures(checks map[string]string) string {
	var out []string
	for k, v := range checks {
		if v != "ok" {
			out = append(out, k+": "+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
