package intaketest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/testbus"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// Case is one golden case: a directory testdata/<name>/ holding the input
// (input.*), the expected output.txt, and whatever else the adapter reads
// for it (a config.yaml, a query.txt).
type Case struct {
	Name, Dir string
	// Input is the input file's path.
	Input string
}

// Adapter is what the suite runs: an intake adapter's handler.
type Adapter interface {
	Register(interface{ Handle(string, http.Handler) })
}

// Suite is the golden-fixture suite every intake adapter runs, one shape
// for every source: each case's input is POSTed over real HTTP to the
// adapter, which publishes on a real broker, and output.txt holds what it
// published, one message after another as Lines renders them.
type Suite struct {
	// Path is the endpoint the cases are posted to.
	Path string
	// Inputs globs the cases' inputs; empty means testdata/*/input.*.
	Inputs string
	// New makes the adapter for a case from opts (the broker behind
	// opts.Publisher, no tokens, no logs, the Pinned clock). An adapter
	// with a Close(ctx) error method is closed when the case ends.
	New func(t testing.TB, c Case, opts intake.Options) Adapter
	// Request is what a case sends besides its input: a query string
	// (without "?") and headers; nil means none, and Content-Type
	// application/json.
	Request func(t testing.TB, c Case) (query string, header map[string]string)
	// Answer starts output.txt with the answer, "HTTP <code> <body>".
	// Without it a case must be answered 2xx.
	Answer bool
	// Lines renders one published message as output.txt shows it; nil
	// means MessageLine.
	Lines func(t testing.TB, m bus.Message) []string
	// Check, when set, checks a case's answer against what it published,
	// beyond output.txt.
	Check func(t testing.TB, c Case, code int, answer string, published []bus.Message)
	// Update rewrites output.txt instead of comparing (go test -update).
	Update bool
}

// Made is Suite.New for an adapter made by newAdapter from cfg for every
// case: Made(gerrit.New, gerrit.DefaultConfig()).
func Made[C any, A Adapter](newAdapter func(C, intake.Options) (A, error), cfg C) func(testing.TB, Case, intake.Options) Adapter {
	return func(t testing.TB, _ Case, opts intake.Options) Adapter {
		a, err := newAdapter(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
}

// Run runs every case of s as a subtest.
func Run(t *testing.T, s Suite) {
	t.Helper()
	glob := s.Inputs
	if glob == "" {
		glob = "testdata/*/input.*"
	}
	inputs, err := filepath.Glob(glob)
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden cases in %s: %v", glob, err)
	}
	b := testbus.Start(t)
	for _, input := range inputs {
		c := Case{Name: filepath.Base(filepath.Dir(input)), Dir: filepath.Dir(input), Input: input}
		t.Run(c.Name, func(t *testing.T) { s.run(t, b, c) })
	}
}

func (s *Suite) run(t *testing.T, b *testbus.Bus, c Case) {
	body, err := os.ReadFile(c.Input)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: b}
	a := s.New(t, c, Options(rec, nil))
	if cl, ok := a.(interface{ Close(context.Context) error }); ok {
		t.Cleanup(func() { _ = cl.Close(context.Background()) })
	}
	srv := Serve(t, a)
	target, header := srv.URL+s.Path, map[string]string{"Content-Type": "application/json"}
	if s.Request != nil {
		var query string
		if query, header = s.Request(t, c); query != "" {
			target += "?" + query
		}
	}
	code, _, answer := Post(t, target, body, header)
	published := rec.taken()
	var got []string
	if s.Answer {
		got = append(got, fmt.Sprintf("HTTP %d %s", code, answer))
	} else if code/100 != 2 {
		t.Fatalf("answered %d %s", code, answer)
	}
	lines := s.Lines
	if lines == nil {
		lines = func(_ testing.TB, m bus.Message) []string { return []string{MessageLine(m)} }
	}
	for _, m := range published {
		got = append(got, lines(t, m)...)
	}
	if s.Check != nil {
		s.Check(t, c, code, answer, published)
	}
	CheckGolden(t, filepath.Join(c.Dir, "output.txt"), strings.Join(got, "\n")+"\n", s.Update)
}

// recorder publishes on a real broker and keeps what was published.
type recorder struct {
	next bus.Publisher
	mu   sync.Mutex
	msgs []bus.Message
}

func (r *recorder) Publish(ctx context.Context, msgs ...bus.Message) error {
	if err := r.next.Publish(ctx, msgs...); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msgs...)
	return nil
}

func (r *recorder) taken() []bus.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs
}

// MessageLine is GoldenLine for a message as the adapter published it.
func MessageLine(m bus.Message) string {
	return GoldenLine(testkit.Received{Topic: m.Topic, Payload: string(m.Payload), Retained: m.Retain})
}
