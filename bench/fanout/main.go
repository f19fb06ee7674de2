// Command fanout benchmarks the bridge's publish path with a route to
// JetStream: MQTT clients publish at QoS 1 into the embedded broker of
// cmd/bridge with one route of everything to a JetStream stream (file
// storage, on an in-process nats-server), beside two baselines measured in
// the same run: the same bridge with no routes, and nats-server's own MQTT
// listener publishing into a stream that captures the same messages. Two
// shapes of load: publishers with in-flight windows, and mqtt-benchmark's
// clients that each wait for every PUBACK. It prints the ratios of PUBACKed
// msgs/s, the publish-to-PUBACK latency, and checks that the streams stored
// exactly the messages that were PUBACKed.
//
//	go run ./bench/fanout                       # both shapes, 3 rounds per mode
//	go run ./bench/fanout -shapes windowed -pubs 16 -inflight 32 -rounds 5
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

// The modes measured in every round, in this order.
const (
	modeBaseline = "baseline"  // the bridge with no routes
	modeRouted   = "routed"    // the bridge with a required route to JetStream
	modeNATSMQTT = "nats-mqtt" // nats-server's MQTT listener, a stream capturing the subjects
)

var modes = []string{modeBaseline, modeRouted, modeNATSMQTT}

// The shapes of load.
const (
	shapeWindowed = "windowed" // publishers with an in-flight window, for a fixed time
	shapeWaits    = "waits"    // mqtt-benchmark's: a fixed count per client, each waiting for every PUBACK
)

// params are the command-line settings of one benchmark run.
type params struct {
	Shapes []string `json:"shapes"`

	// The waits shape (mqtt-benchmark's).
	WaitsClients int           `json:"waits_clients"`
	WaitsCount   int           `json:"waits_count"`
	WaitsSize    int           `json:"waits_size"`
	WaitsTimeout time.Duration `json:"waits_timeout_ns"`

	// The windowed shape.
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
		Shapes:       []string{shapeWindowed, shapeWaits},
		WaitsClients: 10,
		WaitsCount:   20000,
		WaitsSize:    100,
		WaitsTimeout: 2 * time.Minute,
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
	var shapes string
	flag.StringVar(&shapes, "shapes", "windowed,waits", "shapes of load to measure, in order: windowed (publishers with in-flight windows), waits (mqtt-benchmark's: each client waits for every PUBACK)")
	flag.IntVar(&p.WaitsClients, "waits-clients", p.WaitsClients, "waits shape: number of QoS 1 clients (client i publishes to bench/<i>)")
	flag.IntVar(&p.WaitsCount, "waits-count", p.WaitsCount, "waits shape: messages per client")
	flag.IntVar(&p.WaitsSize, "waits-size", p.WaitsSize, fmt.Sprintf("waits shape: payload bytes (min %d)", mqttload.MinPayload))
	flag.DurationVar(&p.WaitsTimeout, "waits-timeout", p.WaitsTimeout, "waits shape: max publishing time of one measurement; clients not done by then are reported as incomplete")
	flag.IntVar(&p.Pubs, "pubs", p.Pubs, "windowed shape: number of QoS 1 publishers (publisher i publishes to bench/<i>)")
	flag.IntVar(&p.Size, "size", p.Size, fmt.Sprintf("windowed shape: payload bytes (min %d)", mqttload.MinPayload))
	flag.IntVar(&p.Inflight, "inflight", p.Inflight, "windowed shape: max unacknowledged publishes per publisher")
	flag.DurationVar(&p.Duration, "duration", p.Duration, "windowed shape: publish phase per measurement")
	flag.DurationVar(&p.Drain, "drain", p.Drain, "max wait after publishing for outstanding PUBACKs (and for the outbox to empty, or the stream to store everything)")
	flag.IntVar(&p.Rounds, "rounds", p.Rounds, "rounds per shape, each measuring baseline, routed, nats-mqtt; the report shows medians over rounds")
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
	var err error
	if p.Shapes, err = parseShapes(shapes); err != nil {
		return prog.Fail(err)
	}
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
	case p.WaitsClients < 1 || p.WaitsCount < 1:
		return errors.New("-waits-clients and -waits-count must be >= 1")
	case p.WaitsSize < mqttload.MinPayload || p.WaitsSize > 1<<20:
		return fmt.Errorf("-waits-size must be in %d..1 MiB", mqttload.MinPayload)
	case p.WaitsTimeout <= 0:
		return errors.New("-waits-timeout must be > 0")
	}
	return benchkit.CheckEnv("bridge-env", p.BridgeEnv)
}

func parseShapes(s string) ([]string, error) {
	return benchkit.ParseChoices("shapes", s, shapeWindowed, shapeWaits)
}
