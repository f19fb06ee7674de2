package chef

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/adapters/intake/intaketest"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/jsonscan"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
)

var update = flag.Bool("update", false, "rewrite testdata/*/output.txt from the current code")

// fixedNow pins Firehose-Received-At in tests.
var fixedNow = time.Date(2024, 3, 5, 10, 31, 0, 0, time.UTC)

// goldenCase is one testdata directory: input.json, optionally config.yaml
// (the chef: section), and output.txt.
type goldenCase struct {
	name, dir string
	input     []byte
	cfg       Config
}

func goldenCases(t testing.TB) []goldenCase {
	t.Helper()
	dirs, err := filepath.Glob("testdata/*/input.json")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	var cases []goldenCase
	for _, in := range dirs {
		dir := filepath.Dir(in)
		input, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		if y, err := os.ReadFile(filepath.Join(dir, "config.yaml")); err == nil {
			if err := strictyaml.Decode(y, &cfg, strictyaml.Options{}); err != nil {
				t.Fatalf("%s/config.yaml: %v", dir, err)
			}
		}
		cases = append(cases, goldenCase{name: filepath.Base(dir), dir: dir, input: input, cfg: cfg})
	}
	return cases
}

// goldenLines renders messages as output.txt does: topic, retained, and the
// payload when it is short and printable, else its sha256 and, for a
// compliance report, the summary the bridge added.
func goldenLines(msgs []bus.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		shown := payloadOrDigest(m.Payload)
		b.WriteString(m.Topic + "\t" + strconv.FormatBool(m.Retain) + "\t" + shown)
		if strings.HasPrefix(shown, "sha256:") {
			if sum, ok := jsonscan.Get(m.Payload, chefpayload.SummaryKey); ok {
				b.WriteString("\t" + chefpayload.SummaryKey + "=" + string(sum))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// warningLines renders warnings as warnings.txt does: field, reason, message.
func warningLines(ws []chefpayload.Warning) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.Field + "\t" + w.Reason + "\t" + w.Msg + "\n")
	}
	return b.String()
}

func payloadOrDigest(p []byte) string {
	if len(p) <= 2048 && utf8.Valid(p) && !bytes.ContainsAny(p, "\n\t") {
		return string(p)
	}
	sum := sha256.Sum256(p)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func newTestHandler(t testing.TB, cfg Config, pub bus.Publisher) *Handler {
	t.Helper()
	if pub == nil {
		pub = refusingPublisher{}
	}
	h, err := New(cfg, Options{Options: intake.Options{Publisher: pub, Logger: zerolog.Nop(), Now: func() time.Time { return fixedNow }}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// refusingPublisher stands in where a test only builds messages and must
// never publish: any call is a test bug.
type refusingPublisher struct{}

func (refusingPublisher) Publish(context.Context, ...bus.Message) error {
	return errors.New("this test must not publish")
}

// TestGolden runs the intake suite on every case: its input posted as
// chef-client does, under its config.yaml, what it published in output.txt.
func TestGolden(t *testing.T) {
	cases := map[string]goldenCase{}
	for _, c := range goldenCases(t) {
		cases[c.dir] = c
	}
	intaketest.Run(t, intaketest.Suite{
		Path: Path, Inputs: "testdata/*/input.json", Update: *update,
		New: func(t testing.TB, c intaketest.Case, opts intake.Options) intaketest.Adapter {
			opts.Now = func() time.Time { return fixedNow }
			h, err := New(cases[c.Dir].cfg, Options{Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		Lines: func(_ testing.TB, m bus.Message) []string {
			return []string{strings.TrimSuffix(goldenLines([]bus.Message{m}), "\n")}
		},
	})
}

// TestGoldenWarnings compares each case's warnings, all of them (an answer
// lists the first 20), with its warnings.txt.
func TestGoldenWarnings(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			h := newTestHandler(t, c.cfg, nil)
			msg, _, err := h.messages(c.input)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			golden(t, filepath.Join(c.dir, "warnings.txt"), warningLines(msg.Warnings()))
		})
	}
}

// golden compares got with the file at path, which holds nothing when got
// is empty; with -update it writes the file first (or removes it).
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		var err error
		if got == "" {
			err = os.Remove(path)
			if errors.Is(err, os.ErrNotExist) {
				err = nil
			}
		} else {
			err = os.WriteFile(path, []byte(got), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil && !(got == "" && errors.Is(err, os.ErrNotExist)) {
		t.Fatalf("%v (run go test ./adapters/chef/ -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (review, then -update):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestAutomateVerdicts: every golden input taken from chef/automate that
// Automate accepts is accepted, and every compliance report gets Automate's
// verdict and counts (testdata/automate.tsv), on its topic and in its
// published summary.
func TestAutomateVerdicts(t *testing.T) {
	h := newTestHandler(t, DefaultConfig(), nil)
	reports := 0
	for _, f := range readTSV(t, "testdata/automate.tsv", 6) {
		dir, accepted, verdict, summary := f[0], f[2], f[4], f[5]
		input, err := os.ReadFile(filepath.Join("testdata", dir, "input.json"))
		if err != nil {
			t.Fatal(err)
		}
		msg, msgs, err := h.messages(input)
		if err != nil {
			if accepted != "no" {
				t.Errorf("%s: Automate accepts it (%s), the bridge refused: %v", dir, accepted, err)
			}
			continue
		}
		if verdict == "" {
			continue
		}
		reports++
		c, ok := msg.(*chefpayload.Compliance)
		if !ok || !strings.HasSuffix(msgs[0].Topic, "/compliance/"+verdict) {
			t.Errorf("%s: published on %s, Automate's verdict is %s", dir, msgs[0].Topic, verdict)
			continue
		}
		var want, got map[string]any
		published, _ := jsonscan.Get(msgs[0].Payload, chefpayload.SummaryKey)
		if err := json.Unmarshal([]byte(summary), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(published, &got); err != nil {
			t.Fatalf("%s: summary %q: %v", dir, published, err)
		}
		delete(got, "status_message")
		if !reflect.DeepEqual(got, want) || c.Summary.Status != verdict {
			t.Errorf("%s: summary\n %s\nAutomate's\n %s", dir, published, summary)
		}
	}
	if reports < 10 {
		t.Fatalf("only %d compliance reports compared", reports)
	}
}

// readTSV reads the rows of a tab-separated file with n columns, skipping
// lines that start with "#".
func readTSV(t *testing.T, path string, n int) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != n {
			t.Fatalf("%s: %q has %d columns, not %d", path, line, len(f), n)
		}
		rows = append(rows, f)
	}
	return rows
}
