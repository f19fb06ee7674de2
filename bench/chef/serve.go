package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	chefadapter "github.com/opsfirehose/firehose/adapters/chef"
	"github.com/opsfirehose/firehose/adapters/intake"
	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/httpserver"
	"github.com/opsfirehose/firehose/strictyaml"
)

// serveEnv selects a server mode in a child process: the benchmark re-runs
// its own binary with it, so that each server's memory and CPU are its own.
const serveEnv = "FIREHOSE_BENCH_CHEF_SERVE"

// profileEnv, when set to a path prefix, makes each server write a CPU
// profile to <prefix>.<mode>.<pid>; heapProfileEnv a heap profile, when it
// stops.
const (
	profileEnv     = "FIREHOSE_BENCH_CHEF_CPUPROFILE"
	heapProfileEnv = "FIREHOSE_BENCH_CHEF_HEAPPROFILE"
)

// Server modes.
const (
	modeBridge   = "bridge"
	modeBaseline = "baseline"
	// modeTeams is the bridge with teams owning cookbooks (one of them
	// through Policyfile lock files) and the rollout store in the data
	// directory dataEnv names.
	modeTeams = "teams"
)

// dataEnv is the data directory of a teams server.
const dataEnv = "FIREHOSE_BENCH_CHEF_DATA"

// teamsSection is the owners section of the teams server.
const teamsSection = `
owners:
  teams:
    ops: {cookbooks: ["opscode-*", omnibus, "chef-*"]}
    platform: {cookbooks: [apt, yum, "windows*", build-essential]}
    core: {policies: [base]}
  policy_locks: adapters/chef/testdata/teams/locks
`

// serve runs a server until stdin closes (the parent exits or stops it) and
// prints "READY <http addr> <mqtt addr>" once it accepts connections.
func serve(mode string) error {
	var httpAddr, mqttAddr string
	var stop func()
	switch mode {
	case modeBridge, modeTeams:
		b, err := broker.New(brokerConfig(), broker.Options{Logger: zerolog.Nop()})
		if err != nil {
			return err
		}
		if err := b.Start(context.Background()); err != nil {
			return err
		}
		cfg, opts := chefadapter.DefaultConfig(), chefadapter.Options{Options: intake.Options{Publisher: b, Logger: zerolog.Nop()}}
		if mode == modeTeams {
			if err := strictyaml.Decode([]byte(teamsSection), &cfg, strictyaml.Options{}); err != nil {
				return err
			}
			cfg.Owners.PolicyLocks = fixturePath(cfg.Owners.PolicyLocks)
			opts.DataDir = os.Getenv(dataEnv)
		}
		h, err := chefadapter.New(cfg, opts)
		if err != nil {
			return err
		}
		hcfg := httpserver.DefaultConfig()
		hcfg.Address = "127.0.0.1:0"
		srv, err := httpserver.New(hcfg, httpserver.Options{Logger: zerolog.Nop()})
		if err != nil {
			return err
		}
		if err := h.Start(context.Background()); err != nil {
			return err
		}
		h.Register(srv)
		if err := srv.Start(context.Background()); err != nil {
			return err
		}
		httpAddr, mqttAddr = srv.Addr(), b.Addr("mqtt")
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Close(ctx)
			_ = h.Close(ctx)
			_ = b.Close(ctx)
		}
	case modeBaseline:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: http.HandlerFunc(baseline), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		httpAddr, mqttAddr = ln.Addr().String(), "-"
		stop = func() { _ = srv.Close() }
	default:
		return fmt.Errorf("unknown server mode %q", mode)
	}
	if path := os.Getenv(profileEnv); path != "" {
		f, err := os.Create(path + "." + mode + "." + strconv.Itoa(os.Getpid()))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("READY %s %s\n", httpAddr, mqttAddr)
	_, _ = io.Copy(io.Discard, os.Stdin) // returns when the parent closes our stdin
	if path := os.Getenv(heapProfileEnv); path != "" {
		f, err := os.Create(path + "." + mode + "." + strconv.Itoa(os.Getpid()))
		if err != nil {
			return err
		}
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			return err
		}
		_ = f.Close()
	}
	stop()
	return nil
}

// baseline is the minimal receiver the bridge is compared with: it decodes
// the whole body into a map, as a naive data-collector receiver would, and
// answers 204.
func baseline(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// brokerConfig is the embedded broker as the bridge runs it by default, on
// one loopback TCP listener.
func brokerConfig() broker.Config {
	cfg := broker.DefaultConfig()
	cfg.Listeners = []broker.ListenerConfig{{Name: "mqtt", Type: broker.ListenerTCP, Address: "127.0.0.1:0"}}
	return cfg
}
