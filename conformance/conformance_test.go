package conformance

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
)

var tableFile = flag.String("table", "", "also write the conformance table to this file")

// results collects the table while the targets run side by side; TestMain
// prints it once every test has finished.
type results struct {
	mu    sync.Mutex
	cells map[string]map[string]string // row key -> target -> cell
	notes []string
}

var table = &results{cells: map[string]map[string]string{}}

func (r *results) set(row, target, cell string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cells[row] == nil {
		r.cells[row] = map[string]string{}
	}
	r.cells[row][target] = cell
}

func (r *results) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// write prints the table: one row per behaviour and protocol version, one
// column per target.
func (r *results) write(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cells) == 0 {
		return
	}
	fmt.Fprintln(w, "\nMQTT conformance (conformance/README.md): pass, FAIL, known (a recorded deviation: deviations_test.go), n.a. (an optional feature the target lacks), - (not run)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "behaviour\t%s\tchecks (Paho interoperability suites unless said)\n", strings.Join(targetNames, "\t"))
	for _, b := range behaviours {
		for _, v := range b.versions {
			row := key(b.id, v)
			cells := r.cells[row]
			if cells == nil {
				continue
			}
			fmt.Fprintf(tw, "%s", row)
			for _, tg := range targetNames {
				c := cells[tg]
				if c == "" {
					c = "-"
				}
				fmt.Fprintf(tw, "\t%s", c)
			}
			fmt.Fprintf(tw, "\t%s\n", b.paho)
		}
	}
	tw.Flush()
	notes := append([]string(nil), r.notes...)
	sort.Strings(notes)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	table.write(os.Stdout)
	if *tableFile != "" {
		f, err := os.Create(*tableFile)
		if err == nil {
			table.write(f)
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestConformance runs every behaviour against every target, the targets
// side by side, and holds each outcome against the known deviations: an
// unrecorded failure fails, and so does a recorded deviation that passes
// (the table of deviations cannot go stale).
func TestConformance(t *testing.T) {
	if err := checkDeviations(); err != nil {
		t.Fatal(err)
	}
	for _, name := range targetNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tg := startTarget(t, name)
			for _, b := range behaviours {
				for _, v := range b.versions {
					row := key(b.id, v)
					t.Run(strings.ReplaceAll(row, " ", "_"), func(t *testing.T) {
						t.Parallel()
						runBehaviour(t, tg, b, v)
					})
				}
			}
		})
	}
}

func runBehaviour(t *testing.T, tg *target, b behaviour, v byte) {
	row := key(b.id, v)
	ct := &T{name: fmt.Sprintf("%s-v%d", b.id, v), target: tg}
	out, detail := ct.run(func(ct *T) { b.check(ct, v) })
	known, isKnown := deviations[tg.name][row]
	cell := out.String()
	switch {
	case out == fail && isKnown:
		cell = "known"
		t.Logf("known deviation (%s):\n%s", known, detail)
		table.note("known  %-14s %-32s %s", tg.name, row, known)
	case out == fail:
		t.Errorf("%s on %s:\n%s", row, tg.name, detail)
	case isKnown:
		cell = "XPASS"
		t.Errorf("%s on %s: recorded as a known deviation (%s), but it %s now: remove it from deviations_test.go", row, tg.name, known, out)
	case out == notApplicable:
		t.Logf("not applicable: %s", detail)
		table.note("n.a.   %-14s %-32s %s", tg.name, row, detail)
	default:
		if detail != "" {
			t.Log(detail)
		}
	}
	table.set(row, tg.name, cell)
}

// checkDeviations checks that every recorded deviation names a target and
// a behaviour of the suite.
func checkDeviations() error {
	rows := map[string]bool{}
	for _, b := range behaviours {
		for _, v := range b.versions {
			rows[key(b.id, v)] = true
		}
	}
	var bad []string
	for tg, devs := range deviations {
		known := false
		for _, n := range targetNames {
			known = known || n == tg
		}
		if !known {
			bad = append(bad, fmt.Sprintf("unknown target %q", tg))
		}
		for row := range devs {
			if !rows[row] {
				bad = append(bad, fmt.Sprintf("%s: unknown behaviour %q", tg, row))
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("deviations_test.go: %s", strings.Join(bad, "; "))
	}
	return nil
}
