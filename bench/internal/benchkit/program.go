package benchkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Report is a benchmark's result: printed as text, or encoded as JSON.
type Report interface {
	WriteText(w io.Writer) error
}

// Program is the part of a benchmark's main that every benchmark shares,
// after its flags are parsed and validated.
type Program struct {
	// Name is the benchmark's directory: messages start with "bench/<Name>: ".
	Name string
	// Stopped names what an interrupt stops, e.g. "brokers".
	Stopped string
	// CPUProfile, when set, is a file for a CPU profile of the benchmark
	// process itself (the load generator).
	CPUProfile string
	// JSON prints the report as JSON instead of text.
	JSON bool
}

// Run profiles the benchmark process if asked to, calls run with a context
// that SIGINT and SIGTERM cancel, and prints its report to stdout (progress
// is run's business, on stderr). It returns the exit code: 0, 1 on an error,
// 130 when interrupted.
func (p Program) Run(run func(ctx context.Context) (Report, error)) int {
	if p.CPUProfile != "" {
		f, err := os.Create(p.CPUProfile)
		if err != nil {
			return p.Fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return p.Fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	rep, err := run(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "interrupted; %s stopped\n", p.Stopped)
			return 130
		}
		return p.Fail(err)
	}
	if p.JSON {
		err = WriteJSON(os.Stdout, rep)
	} else {
		err = rep.WriteText(os.Stdout)
	}
	if err != nil {
		return p.Fail(err)
	}
	return 0
}

// Fail prints err to stderr and returns exit code 1.
func (p Program) Fail(err error) int {
	fmt.Fprintf(os.Stderr, "bench/%s: %v\n", p.Name, err)
	return 1
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ListFlag is a repeatable string flag: flag.Var((*ListFlag)(&slice), ...).
type ListFlag []string

func (l *ListFlag) String() string { return strings.Join(*l, " ") }

// Set appends v.
func (l *ListFlag) Set(v string) error { *l = append(*l, v); return nil }

// ParseChoices parses a comma-separated list of the flag -name whose
// entries must each be one of allowed; the list keeps the order given.
func ParseChoices(name, s string, allowed ...string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(allowed, f) {
			return nil, fmt.Errorf("-%s: unknown value %q (want %s)", name, f, strings.Join(allowed, ", "))
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s: nothing selected", name)
	}
	return out, nil
}

// CheckEnv checks that each entry is KEY=VALUE, for a flag named flagName.
func CheckEnv(flagName string, env []string) error {
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("-%s %q: want KEY=VALUE", flagName, kv)
		}
	}
	return nil
}

// PollUntil calls done every interval until it reports true or deadline
// passes (both return nil), done fails, proc (nil for none) exits, or ctx
// is cancelled.
func PollUntil(ctx context.Context, deadline time.Time, interval time.Duration, proc *Proc, done func() (bool, error)) error {
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok || !time.Now().Before(deadline) {
			return nil
		}
		if err := proc.Alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
