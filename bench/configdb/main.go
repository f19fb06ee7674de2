// Command configdb benchmarks ConfigDB's effective-value GETs, the request
// every Hiera lookup makes, over real HTTP against the real handler and
// storage, for SQLite and PostgreSQL, and prints GETs/s with p50 and p99.
//
// Two shapes: "small", 50 keys at each of 3 levels (root, 10 racks, 100
// nodes); "large", tuning-box's own load test: 10,000 root keys, 100 level-1
// values × 15,000 keys and 100 level-2 values × 20,000 keys. Each round also
// measures a baseline, a handler that serves a precomputed copy of the same
// answer on the same kind of server, and the report gives ConfigDB's rate as
// a ratio of it. Medians over the rounds.
//
//	go run ./bench/configdb                                  # both shapes, sqlite and postgres
//	go run ./bench/configdb -backends sqlite -shapes small -rounds 5
//	go run ./bench/configdb -postgres postgres://u:p@host/db # an existing server, not a throwaway cluster
//	go run ./bench/configdb -shapes large -cache 0 -cpuprofile /tmp/cpu.prof  # the merge itself, profiled
//
// Targets (SQLite, this 2-core machine): small ≥ 10,000 GETs/s; large p50 ≤ 50 ms.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// params are one run's settings.
type params struct {
	Backends []string
	Shapes   []string
	Rounds   int
	Duration time.Duration
	// Clients are the concurrent HTTP clients per shape.
	Clients   map[string]int
	CacheSize int64
	Postgres  string
	// Scale shrinks the shapes, for the smoke test.
	Scale float64
}

func defaultParams() params {
	return params{
		Backends:  []string{"sqlite", "postgres"},
		Shapes:    []string{"small", "large"},
		Rounds:    3,
		Duration:  3 * time.Second,
		Clients:   map[string]int{"small": 8, "large": 2},
		CacheSize: 64 << 20,
		Scale:     1,
	}
}

func main() {
	p := defaultParams()
	backends := flag.String("backends", strings.Join(p.Backends, ","), "databases to measure: sqlite, postgres")
	shapes := flag.String("shapes", strings.Join(p.Shapes, ","), "shapes to measure: small, large")
	flag.IntVar(&p.Rounds, "rounds", p.Rounds, "measurement rounds; the report gives medians")
	flag.DurationVar(&p.Duration, "duration", p.Duration, "length of each measurement")
	small := flag.Int("clients-small", p.Clients["small"], "concurrent clients for the small shape")
	large := flag.Int("clients-large", p.Clients["large"], "concurrent clients for the large shape")
	flag.Int64Var(&p.CacheSize, "cache", p.CacheSize, "configdb.cache_size in bytes (0: no cache)")
	flag.StringVar(&p.Postgres, "postgres", "", "a postgres:// URL to use instead of a throwaway cluster")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	flag.Parse()
	p.Backends, p.Shapes = strings.Split(*backends, ","), strings.Split(*shapes, ",")
	p.Clients = map[string]int{"small": *small, "large": *large}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/configdb:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	results, err := run(ctx, p, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/configdb:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	report(os.Stdout, p, results)
}

// run measures every backend and shape.
func run(ctx context.Context, p params, progress io.Writer) ([]result, error) {
	var results []result
	for _, backend := range p.Backends {
		for _, shape := range p.Shapes {
			r, err := measureOne(ctx, p, backend, shape, progress)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", backend, shape, err)
			}
			results = append(results, r)
		}
	}
	return results, nil
}
