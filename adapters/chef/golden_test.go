package chef

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/strictyaml"
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
// payload when it is short and printable, else its sha256.
func goldenLines(msgs []bus.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Topic + "\t" + strconv.FormatBool(m.Retain) + "\t" + payloadOrDigest(m.Payload) + "\n")
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
	h, err := New(cfg, Options{Publisher: pub, Logger: zerolog.Nop(), Now: func() time.Time { return fixedNow }})
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

func TestGolden(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			h := newTestHandler(t, c.cfg, nil)
			_, msgs, err := h.messages(c.input)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			got := goldenLines(msgs)
			path := filepath.Join(c.dir, "output.txt")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./adapters/chef/ -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (review, then -update):\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}
