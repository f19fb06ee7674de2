// Command fanout benchmarks the bridge's publish path with a route to
// JetStream: N MQTT clients publish at QoS 1 into the embedded broker of
// cmd/bridge, once with one route of everything to a JetStream stream (file
// storage, on an in-process nats-server) and once with no routes (the
// baseline), in the same run. It prints the ratio of PUBACKed msgs/s, the
// publish-to-PUBACK latency, and checks that the stream stored exactly the
// messages that were PUBACKed.
//
//	go run ./bench/fanout                       # 3 rounds of 10 s per mode, 8 publishers
//	go run ./bench/fanout -pubs 16 -inflight 32 -rounds 5
//	go run ./bench/fanout -json > result.json
//
// See README.md in this directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// The two modes measured in every round, in this order.
const (
	modeBaseline = "baseline"
	modeRouted   = "routed"
)

// ratioTarget is the target for routed/baseline PUBACKed msgs/s.
const ratioTarget = 0.5

// params are the command-line settings of one benchmark run.
type params struct {
	Pubs     int           `json:"pubs"`
	Size     int           `json:"size"`
	Inflight int           `json:"inflight"`
	Duration time.Duration `json:"duration_ns"`
	Drain    time.Duration `json:"drain_ns"`
	Rounds   int           `json:"rounds"`

	User string `json:"user"`
	Pass string `json:"-"`

	BridgePkg    string        `json:"bridge_pkg,omitempty"`
	BridgeBin    string        `json:"bridge_bin,omitempty"`
	BridgeEnv    []string      `json:"bridge_env,omitempty"`
	PerfDir      string        `json:"perf_dir,omitempty"`
	ReadyTimeout time.Duration `json:"-"`
}

func defaultParams() params {
	return params{
		Pubs:         8,
		Size:         256,
		Inflight:     64,
		Duration:     10 * time.Second,
		Drain:        10 * time.Second,
		Rounds:       3,
		User:         "bench",
		Pass:         "bench-secret",
		BridgePkg:    "./cmd/bridge",
		ReadyTimeout: 30 * time.Second,
	}
}

func main() { os.Exit(realMain()) }

func realMain() int {
	p := defaultParams()
	var jsonOut bool
	flag.IntVar(&p.Pubs, "pubs", p.Pubs, "number of QoS 1 publishers (publisher i publishes to bench/<i>)")
	flag.IntVar(&p.Size, "size", p.Size, fmt.Sprintf("payload bytes (min %d)", mqttload.MinPayload))
	flag.IntVar(&p.Inflight, "inflight", p.Inflight, "max unacknowledged publishes per publisher")
	flag.DurationVar(&p.Duration, "duration", p.Duration, "publish phase per measurement")
	flag.DurationVar(&p.Drain, "drain", p.Drain, "max wait after publishing for outstanding PUBACKs (and, routed, for the outbox to empty)")
	flag.IntVar(&p.Rounds, "rounds", p.Rounds, "rounds, each measuring baseline then routed; the report shows medians over rounds")
	flag.StringVar(&p.User, "user", p.User, "MQTT username of the publisher account the generated configs define")
	flag.StringVar(&p.Pass, "pass", p.Pass, "its password")
	flag.StringVar(&p.BridgePkg, "bridge-pkg", p.BridgePkg, "package to build for the bridge")
	flag.StringVar(&p.BridgeBin, "bridge-bin", "", "prebuilt bridge binary to start instead of building -bridge-pkg")
	flag.Var((*benchkit.ListFlag)(&p.BridgeEnv), "bridge-env", "extra `KEY=VALUE` environment for the bridges (repeatable; e.g. GOGC=800 for tuning experiments)")
	flag.StringVar(&p.PerfDir, "perf-dir", "", "record a CPU profile (perf record -g) of each bridge during its publish window into `DIR`/<mode>-r<round>.perf.data")
	flag.BoolVar(&jsonOut, "json", false, "print results as JSON instead of tables")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (load generator and the in-process nats-server) to this file")
	flag.Parse()
	prog := benchkit.Program{Name: "fanout", Stopped: "bridges", CPUProfile: *cpuProfile, JSON: jsonOut}
	if err := p.validate(); err != nil {
		return prog.Fail(err)
	}
	return prog.Run(func(ctx context.Context) (benchkit.Report, error) { return run(ctx, p, os.Stderr) })
}

func (p params) validate() error {
	switch {
	case p.Pubs < 1:
		return errors.New("-pubs must be >= 1")
	case p.Size < mqttload.MinPayload:
		return fmt.Errorf("-size must be >= %d (timestamp, sequence, publisher, run id)", mqttload.MinPayload)
	case p.Size > 1<<20:
		return errors.New("-size must be <= 1 MiB")
	case p.Duration <= 0 || p.Drain < 0:
		return errors.New("-duration must be > 0 and -drain >= 0")
	case p.Rounds < 1:
		return errors.New("-rounds must be >= 1")
	case p.Inflight < 1 || p.Inflight > 65535:
		return errors.New("-inflight must be in 1..65535")
	case p.User == "" || p.Pass == "":
		return errors.New("-user and -pass must not be empty")
	}
	return benchkit.CheckEnv("bridge-env", p.BridgeEnv)
}
