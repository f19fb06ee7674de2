package main

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"
)

// Targets, for SQLite on the 2-core reference machine.
const (
	targetSmallRate = 10000.0
	targetLargeP50  = 50 * time.Millisecond
)

func report(w io.Writer, p params, results []result) {
	fmt.Fprintf(w, "ConfigDB effective GETs over HTTP, %d rounds of %v, GOMAXPROCS %d, cache %d MiB (medians)\n\n",
		p.Rounds, p.Duration, runtime.GOMAXPROCS(0), p.CacheSize>>20)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tshape\tclients\tbody\tload\tGETs/s\tp50\tp99\tcache hits\tbaseline GETs/s\tbaseline p50\tratio\ttarget\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%v\t%.0f\t%v\t%v\t%.0f%%\t%.0f\t%v\t%.2f\t%s\t\n",
			r.backend, r.shape, r.clients, size(r.bodyBytes), r.load.Round(time.Millisecond),
			r.ours.rate, r.ours.p50.Round(time.Microsecond), r.ours.p99.Round(time.Microsecond), 100*r.hitRate,
			r.baseline.rate, r.baseline.p50.Round(time.Microsecond), r.ratio, target(r))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nratio: configdb GETs/s over the baseline's (a handler serving a precomputed copy of the same answer), same round.")
	fmt.Fprintf(w, "targets (SQLite): small >= %.0f GETs/s; large p50 <= %v.\n", targetSmallRate, targetLargeP50)
}

func target(r result) string {
	if r.backend != "sqlite" {
		return "-"
	}
	switch r.shape {
	case "small":
		return met(r.ours.rate >= targetSmallRate, fmt.Sprintf(">= %.0f/s", targetSmallRate))
	case "large":
		return met(r.ours.p50 <= targetLargeP50, fmt.Sprintf("p50 <= %v", targetLargeP50))
	}
	return "-"
}

func met(ok bool, what string) string {
	if ok {
		return what + " met"
	}
	return what + " MISSED"
}

func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
