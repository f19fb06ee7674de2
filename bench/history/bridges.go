package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/app"
	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/internal/credentials"
)

// bridgeUnder is a bridge measured: an app.Bridge in this process, beside
// the load (the default), or a process of cmd/bridge of its own
// (-processes), as users run it.
type bridgeUnder struct {
	mqttAddr, httpAddr string
	proc               *benchkit.Proc // nil in this process
	close              func()
}

// cpu is the CPU that the load and the bridge have used: this process's,
// and the bridge's when it runs as a process of its own.
func (b *bridgeUnder) cpu() time.Duration {
	d, _ := benchkit.ProcCPU(b.proc.PID())
	return benchkit.SelfCPU() + d
}

// metrics reads the bridge's /metrics: the value of each series named
// (all of a name's labelled series summed).
func (b *bridgeUnder) metrics(names ...string) (map[string]float64, error) {
	resp, err := http.Get("http://" + b.httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	values := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, name := range names {
			if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
				var v float64
				_, _ = fmt.Sscan(rest[strings.LastIndexByte(rest, ' ')+1:], &v)
				values[name] += v
			}
		}
	}
	return values, nil
}

// gcCycles is how many times the bridge's Go runtime has collected
// garbage. Both bridges in this process share one runtime, and one count.
func (b *bridgeUnder) gcCycles() float64 {
	m, _ := b.metrics("go_gc_duration_seconds_count")
	return m["go_gc_duration_seconds_count"]
}

// startInProcess starts a bridge with the history mode says in this
// process, storing in dir.
func startInProcess(ctx context.Context, mode, dir, hash string) (*bridgeUnder, error) {
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.HTTP.Address = "127.0.0.1:0"
	cfg.Broker.Listeners = []broker.ListenerConfig{{Name: "mqtt", Type: broker.ListenerTCP, Address: "127.0.0.1:0"}}
	cfg.Broker.Users = []credentials.User{{Username: "bench", PasswordHash: hash, Publish: []string{"#"}}}
	cfg.Dashboard.Enabled = false // measured elsewhere (bench/dashboard)
	cfg.History.Enabled = mode == "on"
	// The bridge's goroutines carry the label mode=<mode> (goroutines
	// inherit their creator's labels), so that -cpuprofile tells the two
	// apart: go tool pprof -tagfocus mode=on.
	var (
		b   *app.Bridge
		err error
	)
	pprof.Do(ctx, pprof.Labels("mode", mode), func(ctx context.Context) {
		if b, err = app.New(ctx, cfg, zerolog.Nop()); err == nil {
			err = b.Start(ctx)
		}
	})
	if err != nil {
		return nil, err
	}
	return &bridgeUnder{mqttAddr: b.Broker().Addr("mqtt"), httpAddr: b.HTTPAddr(), close: func() { _ = b.Close(context.Background()) }}, nil
}

// startProcess starts bin (cmd/bridge) with the history mode says, storing
// in dir, and waits until it is ready.
func startProcess(ctx context.Context, mode, bin, dir, hash string) (*bridgeUnder, error) {
	addrs, err := benchkit.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	mqttAddr, httpAddr := addrs[0], addrs[1]
	conf := benchkit.BridgeConfig(mqttAddr, httpAddr, filepath.Join(dir, "data"), "bench", hash, "#") +
		fmt.Sprintf("dashboard: {enabled: false}\nhistory: {enabled: %v}\n", mode == "on")
	confFile := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	proc, err := benchkit.Start("bridge-history-"+mode, dir, nil, bin, "--config", confFile)
	if err != nil {
		return nil, err
	}
	b := &bridgeUnder{mqttAddr: mqttAddr, httpAddr: httpAddr, proc: proc, close: func() { _ = proc.Stop() }}
	ready := func() (bool, error) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
	err = benchkit.PollUntil(ctx, time.Now().Add(time.Minute), 50*time.Millisecond, proc, ready)
	if ok, _ := ready(); err == nil && !ok {
		err = fmt.Errorf("not ready within a minute")
	}
	if err != nil {
		b.close()
		return nil, fmt.Errorf("bridge with history %s: %w\n%s", mode, err, proc.LogTail())
	}
	return b, nil
}
