// Command ansible benchmarks the Ansible path of the bridge, in one run.
//
// Plugin overhead: one playbook (200 tasks × 5 local hosts by default) runs
// with and without the firehose callback plugin, alternating, several times
// each; it prints the ratio of median wall times (target ≤ 1.05).
//
// Intake throughput: batches of 100 task events are POSTed to
// /ansible/v1/events while a real MQTT subscriber receives all of them; it
// prints events/s against the target (20,000/s) and against the same events
// published straight into the broker (the bus's own ceiling).
//
// Usage:
//
//	go run ./bench/ansible
//	go run ./bench/ansible -rounds 3 -skip-intake
//	go run ./bench/ansible -skip-playbook -duration 20s -senders 4
//
// See README.md in this directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// Targets from the issue.
const (
	targetRatio = 1.05
	targetRate  = 20000.0
)

type params struct {
	Playbook     playbookParams
	Intake       intakeParams
	SkipPlaybook bool
	SkipIntake   bool
}

func defaultParams() params {
	return params{
		Playbook: playbookParams{Tasks: 200, Hosts: 5, Rounds: 5, Module: "debug", Ansible: "ansible-playbook",
			Plugins: "adapters/ansible/callback_plugins", Flush: 10 * time.Second},
		Intake: intakeParams{Batch: 100, Senders: 4, Rounds: 3, Duration: 10 * time.Second, Window: 4000},
	}
}

func main() {
	p := defaultParams()
	flag.IntVar(&p.Playbook.Tasks, "tasks", p.Playbook.Tasks, "tasks in the playbook")
	flag.IntVar(&p.Playbook.Hosts, "hosts", p.Playbook.Hosts, "local inventory hosts")
	flag.IntVar(&p.Playbook.Rounds, "rounds", p.Playbook.Rounds, "playbook runs with and without the plugin, each")
	flag.StringVar(&p.Playbook.Module, "module", p.Playbook.Module, "what each task runs: debug or command")
	flag.StringVar(&p.Playbook.Ansible, "ansible-playbook", p.Playbook.Ansible, "the ansible-playbook to run")
	flag.StringVar(&p.Playbook.Plugins, "plugins", p.Playbook.Plugins, "callback_plugins directory (relative to the module root)")
	flag.IntVar(&p.Intake.Batch, "batch", p.Intake.Batch, "events per intake request")
	flag.IntVar(&p.Intake.Senders, "senders", p.Intake.Senders, "concurrent HTTP senders")
	flag.IntVar(&p.Intake.Rounds, "intake-rounds", p.Intake.Rounds, "intake and bus measurements, each")
	flag.DurationVar(&p.Intake.Duration, "duration", p.Intake.Duration, "sending time of one intake measurement")
	flag.IntVar(&p.Intake.Window, "window", p.Intake.Window, "events senders may be ahead of the subscriber (keep it under the broker's max_queued_messages, 8192)")
	flag.BoolVar(&p.SkipPlaybook, "skip-playbook", false, "skip the plugin overhead benchmark")
	flag.BoolVar(&p.SkipIntake, "skip-intake", false, "skip the intake throughput benchmark")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, p, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/ansible:", err)
		os.Exit(1)
	}
}

// report is what one run found.
type report struct {
	Playbook *playbookResult
	Intake   *intakeResult
}

func (p *params) validate() error {
	if p.Playbook.Tasks < 1 || p.Playbook.Hosts < 1 || p.Playbook.Rounds < 1 {
		return errors.New("-tasks, -hosts and -rounds must be at least 1")
	}
	if p.Playbook.Module != "debug" && p.Playbook.Module != "command" {
		return fmt.Errorf("-module %q: use debug or command", p.Playbook.Module)
	}
	if p.Intake.Batch < 1 || p.Intake.Senders < 1 || p.Intake.Rounds < 1 || p.Intake.Duration <= 0 {
		return errors.New("-batch, -senders, -intake-rounds and -duration must be positive")
	}
	if p.Intake.Window < p.Intake.Batch*p.Intake.Senders {
		return errors.New("-window must be at least -batch × -senders")
	}
	return nil
}

func run(ctx context.Context, p params, out io.Writer) (report, error) {
	if err := p.validate(); err != nil {
		return report{}, err
	}
	s, err := startStack()
	if err != nil {
		return report{}, err
	}
	defer s.close()
	fmt.Fprintf(out, "bench/ansible on %d CPUs (%s/%s), %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, time.Now().Format(time.RFC3339))
	var rep report
	if !p.SkipPlaybook {
		pp := p.Playbook
		if pp.Ansible, err = exec.LookPath(pp.Ansible); err != nil {
			return rep, fmt.Errorf("%w (install ansible-core, or pass -skip-playbook)", err)
		}
		if pp.Plugins, err = resolvePlugins(pp.Plugins); err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "\nplugin overhead: %d tasks (%s) × %d local hosts, %d runs each, alternating\n", pp.Tasks, pp.Module, pp.Hosts, pp.Rounds)
		res, err := runPlaybooks(ctx, pp, s, out)
		if err != nil {
			return rep, err
		}
		rep.Playbook = &res
		printPlaybook(out, res)
	}
	if !p.SkipIntake {
		ip := p.Intake
		fmt.Fprintf(out, "\nintake throughput: batches of %d task events, %d senders, %v per measurement, a QoS 1 subscriber receiving all\n",
			ip.Batch, ip.Senders, ip.Duration)
		res, err := runIntake(ctx, ip, s, out)
		if err != nil {
			return rep, err
		}
		rep.Intake = &res
		printIntake(out, res)
	}
	return rep, nil
}

// resolvePlugins finds the callback_plugins directory relative to the module
// root (the first directory upwards holding go.mod), unless it is absolute.
func resolvePlugins(dir string) (string, error) {
	if filepath.IsAbs(dir) {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			path := filepath.Join(d, dir)
			if _, err := os.Stat(filepath.Join(path, "firehose.py")); err != nil {
				return "", fmt.Errorf("no firehose.py in %s: %w", path, err)
			}
			return path, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s; pass -plugins as an absolute path", wd)
		}
	}
}

// median of xs; xs is not modified.
func median[T ~int64 | ~float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func verdict(ok bool) string {
	if ok {
		return "target met"
	}
	return "TARGET MISSED"
}

func printPlaybook(out io.Writer, r playbookResult) {
	without, with := median(r.Without), median(r.With)
	ratio := with.Seconds() / without.Seconds()
	var pairs []float64
	for i := range r.With {
		pairs = append(pairs, r.With[i].Seconds()/r.Without[i].Seconds())
	}
	fmt.Fprintf(out, "  median without plugin: %v\n", without.Round(time.Millisecond))
	fmt.Fprintf(out, "  median with plugin:    %v (%d events per run, all received)\n", with.Round(time.Millisecond), r.Events)
	fmt.Fprintf(out, "  ratio of medians:      %.3f (target ≤ %.2f: %s)\n", ratio, targetRatio, verdict(ratio <= targetRatio))
	fmt.Fprintf(out, "  median of per-round ratios: %.3f\n", median(pairs))
	cw, cn := median(r.WithCPU), median(r.WithoutCPU)
	fmt.Fprintf(out, "  CPU time (ansible and its workers), medians: %v without, %v with, ratio %.3f\n",
		cn.Round(time.Millisecond), cw.Round(time.Millisecond), cw.Seconds()/cn.Seconds())
}

func printIntake(out io.Writer, r intakeResult) {
	var intake, bus []float64
	for _, x := range r.Intake {
		intake = append(intake, x.PerSecond())
	}
	for _, x := range r.Bus {
		bus = append(bus, x.PerSecond())
	}
	mi, mb := median(intake), median(bus)
	fmt.Fprintf(out, "  median intake: %.0f events/s = %.2f × the target of %.0f/s (%s)\n", mi, mi/targetRate, targetRate, verdict(mi >= targetRate))
	fmt.Fprintf(out, "  median bus alone (baseline): %.0f events/s; intake/bus = %.2f\n", mb, mi/mb)
}
