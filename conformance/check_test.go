package conformance

import (
	"fmt"

	"github.com/mochi-mqtt/server/v2/packets"
	"runtime"
	"strings"
	"sync"
	"time"
)

// T is what a behaviour's check gets instead of *testing.T: it records a
// failure instead of failing the Go test, so that the suite can hold the
// outcome against the known deviations (deviations_test.go) before it
// decides. Fatalf and NotApplicable end the check (runtime.Goexit), so they
// must be called from the check's own goroutine, as with testing.T.
type T struct {
	name   string
	target *target

	mu       sync.Mutex
	failures []string
	na       string
	logs     []string
	cleanups []func()
	clients  []*Client
	seq      int
}

// outcome is what one behaviour did on one target.
type outcome int

const (
	pass outcome = iota
	fail
	notApplicable
)

func (o outcome) String() string {
	return [...]string{"pass", "FAIL", "n.a."}[o]
}

// run runs check on its own goroutine and returns the outcome, the
// failures and the log; cleanups run afterwards, last registered first.
// Every 3.1.1 client is finally checked for packets the server must not
// send it (a DISCONNECT).
func (t *T) run(check func(*T)) (outcome, string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { // also after Fatalf, which ends the goroutine
			for _, c := range t.clients {
				for _, u := range c.Unexpected() {
					t.Errorf("the server sent %s", u)
				}
			}
		}()
		check(t)
	}()
	<-done
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	detail := strings.Join(append(append([]string(nil), t.failures...), t.logs...), "\n")
	switch {
	case len(t.failures) > 0:
		return fail, detail
	case t.na != "":
		return notApplicable, t.na
	}
	return pass, detail
}

// Helper is there so that check helpers read like testing helpers.
func (t *T) Helper() {}

// Errorf records a failure and lets the check go on.
func (t *T) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures = append(t.failures, fmt.Sprintf(format, args...))
}

// Fatalf records a failure and ends the check.
func (t *T) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

// Logf records a note, shown with the outcome.
func (t *T) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs = append(t.logs, fmt.Sprintf(format, args...))
}

// NotApplicable ends the check: the target does not offer what it checks
// (an optional feature of the protocol), which is not a failure.
func (t *T) NotApplicable(format string, args ...any) {
	t.mu.Lock()
	t.na = fmt.Sprintf(format, args...)
	t.mu.Unlock()
	runtime.Goexit()
}

// Cleanup registers f to run when the check has ended.
func (t *T) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// ID returns a client id unique to this check on this target.
func (t *T) ID(what string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	return fmt.Sprintf("conf-%s-%s-%d-%d", t.target.name, what, time.Now().UnixNano()%1e9, t.seq)
}

// Topic returns a topic under this check's own prefix, so that checks on
// one target can run side by side: conf/<check>/<levels...>.
func (t *T) Topic(levels ...string) string {
	return strings.Join(append([]string{"conf", t.name}, levels...), "/")
}

// Dial connects a client to the check's target; a refusal fails the check.
func (t *T) Dial(o Options) (*Client, packets.Packet) {
	t.Helper()
	c, connack, err := t.DialErr(o)
	if err != nil {
		t.Fatalf("connect %q (MQTT %s): %v", o.ClientID, versionName(o.Version), err)
	}
	return c, connack
}

// DialErr is Dial returning the error, with the CONNACK when it was a
// refusal.
func (t *T) DialErr(o Options) (*Client, packets.Packet, error) {
	c, connack, err := dial(t, t.target, o)
	if err == nil {
		t.mu.Lock()
		t.clients = append(t.clients, c)
		t.mu.Unlock()
	}
	return c, connack, err
}
