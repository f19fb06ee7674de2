package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// What the routed bridge's config names; the stream is the issue's: one
// route of everything to a JetStream stream with file storage.
const (
	routeName     = "all"
	sinkName      = "js"
	streamName    = "FIREHOSE"
	streamSubject = "firehose.>"
)

// bridgeConfig renders cmd/bridge's YAML for one measurement: benchkit's
// shared bridge config (loopback listeners, a publisher account, a data dir)
// and in routed mode a JetStream sink and a route of "#" to it (every other
// setting is the bridge's default, e.g. a required route with max_pending
// 4096 and confirm_timeout 5s). natsURL is empty for the baseline.
func bridgeConfig(mqttAddr, httpAddr, dataDir, user, passwordHash, natsURL string) string {
	var b strings.Builder
	b.WriteString(benchkit.BridgeConfig(mqttAddr, httpAddr, dataDir, user, passwordHash, "#"))
	if natsURL != "" {
		fmt.Fprintf(&b, `sinks:
  %s:
    type: jetstream
    urls: [%q]
    stream:
      name: %s
      create: true
      subjects: [%q]
      storage: file
routes:
  - name: %s
    filters: ["#"]
    sink: %s
`, sinkName, natsURL, streamName, streamSubject, routeName, sinkName)
	}
	return b.String()
}

// bridge is one started cmd/bridge.
type bridge struct {
	proc     *benchkit.Proc
	mqttAddr string
	httpAddr string
}

// startBridge writes the config into dir and starts bin on free loopback ports.
func startBridge(bin, dir string, env []string, user, passwordHash, natsURL string) (*bridge, error) {
	addrs, err := benchkit.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	mqttAddr, httpAddr := addrs[0], addrs[1]
	conf := bridgeConfig(mqttAddr, httpAddr, filepath.Join(dir, "data"), user, passwordHash, natsURL)
	confFile := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	proc, err := benchkit.Start("bridge", dir, env, bin, "--config", confFile)
	if err != nil {
		return nil, err
	}
	return &bridge{proc: proc, mqttAddr: mqttAddr, httpAddr: httpAddr}, nil
}

// waitReadyz polls /readyz until it answers 200: the broker is running and
// every required route's sink is connected (for JetStream with create: true,
// the stream exists).
func (b *bridge) waitReadyz(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + b.httpAddr + "/readyz"
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		if err := b.proc.Alive(); err != nil {
			return err
		}
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("bridge %s not ready after %v: %v\nlog tail:\n%s", url, timeout, lastErr, b.proc.LogTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // poll interval
		}
	}
}

// routeCounts are the routed bridge's own counts for the route, from /metrics.
type routeCounts struct {
	Delivered float64 // confirmed by the sink directly
	Outboxed  float64 // put in the outbox because the sink did not confirm in time
	Refused   float64 // the outbox was full; the publisher was told to resend
	InOutbox  float64 // waiting in the outbox now
}

// routeCounts scrapes /metrics.
func (b *bridge) routeCounts(ctx context.Context) (routeCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.httpAddr+"/metrics", nil)
	if err != nil {
		return routeCounts{}, err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return routeCounts{}, fmt.Errorf("scraping the bridge's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return routeCounts{}, fmt.Errorf("scraping the bridge's metrics: %s", resp.Status)
	}
	var c routeCounts
	found := false
	route := `route="` + routeName + `"`
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !strings.Contains(rest, route) {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case name == "firehose_route_messages_total" && strings.Contains(rest, `result="delivered"`):
			c.Delivered, found = v, true
		case name == "firehose_route_messages_total" && strings.Contains(rest, `result="outboxed"`):
			c.Outboxed = v
		case name == "firehose_route_messages_total" && strings.Contains(rest, `result="refused"`):
			c.Refused = v
		case name == "firehose_outbox_messages":
			c.InOutbox = v
		}
	}
	if err := sc.Err(); err != nil {
		return routeCounts{}, fmt.Errorf("scraping the bridge's metrics: %w", err)
	}
	if !found {
		return routeCounts{}, errors.New("the bridge's /metrics has no firehose_route_messages_total for the route; has the metric been renamed?")
	}
	return c, nil
}
