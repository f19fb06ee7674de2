package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/configdb"
	api "github.com/opsfirehose/firehose/configdb/api"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/pgtemp"
	"github.com/opsfirehose/firehose/topics"
)

// sample is one measurement of one server.
type sample struct {
	rate     float64 // GETs/s
	p50, p99 time.Duration
}

// result is one backend and shape, medians over the rounds.
type result struct {
	backend, shape string
	clients        int
	load           time.Duration
	loadBytes      int64
	ours, baseline sample
	ratio          float64
	hitRate        float64
	bodyBytes      int
}

// discard is a publisher that takes every message, so that the events of the
// load are not what is measured.
type discard struct{}

func (discard) Publish(context.Context, ...bus.Message) error { return nil }

func measureOne(ctx context.Context, p params, backend, shapeName string, progress io.Writer) (result, error) {
	res := result{backend: backend, shape: shapeName, clients: p.Clients[shapeName]}
	sh, err := buildShape(shapeName, p.Scale)
	if err != nil {
		return res, err
	}
	dsn, cleanup, err := database(ctx, backend, p.Postgres)
	if err != nil {
		return res, err
	}
	defer cleanup()
	cfg := api.DefaultConfig()
	cfg.DSN = dsn
	cfg.CacheSize = bytesize.Size(p.CacheSize)
	cfg.MaxBody = 64 * bytesize.MiB
	h, err := api.Open(ctx, cfg, api.Options{Options: intake.Options{Publisher: discard{}, Logger: zerolog.Nop()}})
	if err != nil {
		return res, err
	}
	defer func() { _ = h.Close(context.WithoutCancel(ctx)) }()
	store := h.Store()
	if _, err := store.CreateComponent(ctx, "bench", configdb.NewComponent{Name: "fuel", ResourceDefinitions: []configdb.NewResourceDefinition{{Name: resource}}}); err != nil {
		return res, err
	}
	if _, err := store.CreateEnvironment(ctx, "bench", configdb.NewEnvironment{ID: 1, Components: []configdb.Ref{{Name: "fuel"}}, HierarchyLevels: sh.levels}); err != nil {
		return res, err
	}
	for _, d := range sh.docs {
		res.loadBytes += int64(len(d.Body))
	}
	fmt.Fprintf(progress, "%s/%s: loading %d documents (%.1f MB) in one transaction...\n", backend, shapeName, len(sh.docs), float64(res.loadBytes)/1e6)
	start := time.Now()
	if err := store.PutMany(ctx, "bench", sh.docs); err != nil {
		return res, err
	}
	res.load = time.Since(start)
	// Publish the load's events now, so that the relay's work is not measured.
	// The relay then idles (a poll per outbox.poll_interval) while GETs are
	// measured.
	if err := h.Start(ctx); err != nil {
		return res, err
	}
	for {
		n, err := store.PendingCount(ctx)
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond) // the relay drains in the background
	}

	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	urls := make([]string, len(sh.nodes))
	for i, n := range sh.nodes {
		urls[i] = srv.URL + api.BasePath + path(n) + "?effective"
	}
	// The baseline serves node 0's answer, precomputed.
	body, err := get(http.DefaultClient, urls[0])
	if err != nil {
		return res, err
	}
	res.bodyBytes = len(body)
	static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer static.Close()
	staticURLs := []string{static.URL + "/"}

	var ours, base []sample
	var hits []float64
	for round := range p.Rounds {
		b, err := measure(ctx, staticURLs, res.clients, p.Duration)
		if err != nil {
			return res, fmt.Errorf("baseline: %w", err)
		}
		h0, m0 := store.CacheStats()
		o, err := measure(ctx, urls, res.clients, p.Duration)
		if err != nil {
			return res, err
		}
		h1, m1 := store.CacheStats()
		hit := float64(h1-h0) / max(1, float64(h1-h0+m1-m0))
		fmt.Fprintf(progress, "%s/%s round %d: configdb %.0f GETs/s p50 %v p99 %v (cache hits %.0f%%); baseline %.0f GETs/s p50 %v\n",
			backend, shapeName, round+1, o.rate, o.p50, o.p99, 100*hit, b.rate, b.p50)
		ours, base, hits = append(ours, o), append(base, b), append(hits, hit)
	}
	res.ours, res.baseline = medianSample(ours), medianSample(base)
	res.hitRate = median(hits)
	ratios := make([]float64, len(ours))
	for i := range ours {
		ratios[i] = ours[i].rate / base[i].rate
	}
	res.ratio = median(ratios)
	return res, nil
}

func path(levels []topics.LevelValue) string {
	s := "/environments/1/"
	for _, l := range levels {
		s += url.PathEscape(l.Name) + "/" + url.PathEscape(l.Value) + "/"
	}
	return s + "resources/" + resource + "/values"
}

// database returns a DSN for backend and a function that removes it.
func database(ctx context.Context, backend, postgres string) (string, func(), error) {
	switch backend {
	case "sqlite":
		dir, err := os.MkdirTemp("", "bench-configdb-")
		if err != nil {
			return "", nil, err
		}
		return dir + "/configdb.sqlite", func() { _ = os.RemoveAll(dir) }, nil
	case "postgres":
		if postgres != "" {
			return postgres, func() {}, nil
		}
		c, err := pgtemp.Start(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("starting a throwaway PostgreSQL (or give -postgres): %w", err)
		}
		dsn, err := c.CreateDatabase(ctx, "bench")
		if err != nil {
			c.Stop()
			return "", nil, err
		}
		return dsn, c.Stop, nil
	}
	return "", nil, fmt.Errorf("unknown backend %q: use sqlite or postgres", backend)
}

func get(c *http.Client, u string) ([]byte, error) {
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return b, nil
}

// measure runs clients GETting random urls for d, and returns the rate and
// latency quantiles.
func measure(ctx context.Context, urls []string, clients int, d time.Duration) (sample, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	// Warm up: one request per client opens its connection.
	for range clients {
		if _, err := get(client, urls[0]); err != nil {
			return sample{}, err
		}
	}
	deadline := time.Now().Add(d)
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			var mine []time.Duration
			buf := make([]byte, 64<<10)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				resp, err := client.Get(urls[rng.IntN(len(urls))])
				if err == nil {
					_, err = io.CopyBuffer(io.Discard, resp.Body, buf)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return sample{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}
	slices.Sort(lat)
	return sample{rate: float64(len(lat)) / elapsed.Seconds(), p50: quantile(lat, 0.50), p99: quantile(lat, 0.99)}, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianSample(s []sample) sample {
	rates, p50s, p99s := make([]float64, len(s)), make([]float64, len(s)), make([]float64, len(s))
	for i, x := range s {
		rates[i], p50s[i], p99s[i] = x.rate, float64(x.p50), float64(x.p99)
	}
	return sample{rate: median(rates), p50: time.Duration(median(p50s)), p99: time.Duration(median(p99s))}
}
