// Command retained benchmarks the fleet's retained state (issue 25): every
// Chef node's retained chef/<org>/<node>/status, held by the bridge
// (cmd/bridge, default config) and by Debian's mosquitto (its defaults, with
// persistence on in a temporary directory as Debian's package has it),
// measured in one run with the same payload: the bridge's own status message
// for a real converge. It prints, for a fleet of -nodes nodes:
//
//   - the retained publish rate (QoS 1, -inflight in flight);
//
//   - RSS per retained node;
//
//   - idle CPU with the fleet held;
//
//   - a late subscriber to chef/+/+/status at QoS 0 and at QoS 1 (acking):
//     how many of the fleet it got, and how long it took;
//
//   - RSS added by two late subscribers at once;
//
//   - how much of the fleet is there after a clean restart, and after a
//     kill -9 right after the last PUBACK;
//
//   - the bridge's CPU per Chef converge (POSTed to the data collector)
//     with the fleet held, against a bridge with no fleet.
//
//     go run ./bench/retained                   # 100,000 nodes (a few minutes)
//     go run ./bench/retained -nodes 20000      # a smaller fleet
//     go run ./bench/retained -brokers ours     # the bridge only
//     go run ./bench/retained -json > result.json
//
// See the table in bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

const (
	nameOurs      = "ours"
	nameMosquitto = "mosquitto"
)

// params are the command-line settings of one benchmark run.
type params struct {
	Brokers []string `json:"brokers"`
	Nodes   int      `json:"nodes"`
	// Inflight bounds the fleet publisher's unacknowledged QoS 1 messages.
	Inflight int `json:"inflight"`
	// Idle is how long idle CPU is measured with the fleet held.
	Idle time.Duration `json:"idle_ns"`
	// Stall ends a late subscriber's wait when nothing came for this long;
	// LateTimeout ends it in any case.
	Stall       time.Duration `json:"stall_ns"`
	LateTimeout time.Duration `json:"late_timeout_ns"`

	// The Chef converges: ConvergeNodes nodes of the fleet (the empty
	// bridge's too), each converging once to warm up, then
	// ConvergeRounds rounds of Converges POSTs cycling over them.
	Fixture        string `json:"fixture"`
	ConvergeNodes  int    `json:"converge_nodes"`
	Converges      int    `json:"converges"`
	ConvergeRounds int    `json:"converge_rounds"`
	Clients        int    `json:"clients"`

	User string `json:"user"`
	Pass string `json:"-"`

	BridgePkg    string        `json:"bridge_pkg,omitempty"`
	BridgeBin    string        `json:"bridge_bin,omitempty"`
	BridgeEnv    []string      `json:"bridge_env,omitempty"`
	NoHistory    bool          `json:"no_history,omitempty"`
	MemoryStore  bool          `json:"memory_store,omitempty"`
	MosqBin      string        `json:"mosquitto_bin,omitempty"`
	MosqPasswd   string        `json:"mosquitto_passwd,omitempty"`
	PerfDir      string        `json:"perf_dir,omitempty"`
	ReadyTimeout time.Duration `json:"-"`
}

func defaultParams() params {
	return params{
		Brokers:        []string{nameMosquitto, nameOurs},
		Nodes:          100_000,
		Inflight:       100,
		Idle:           5 * time.Second,
		Stall:          5 * time.Second,
		LateTimeout:    3 * time.Minute,
		Fixture:        filepath.Join("adapters", "chef", "testdata", "02_run_converge_success_chef12_ubuntu", "input.json"),
		ConvergeNodes:  100,
		Converges:      500,
		ConvergeRounds: 5,
		Clients:        4,
		User:           "bench",
		Pass:           "bench-secret",
		BridgePkg:      "./cmd/bridge",
		MosqBin:        "/usr/sbin/mosquitto",
		MosqPasswd:     "mosquitto_passwd",
		ReadyTimeout:   60 * time.Second,
	}
}

func main() { os.Exit(realMain()) }

func realMain() int {
	p := defaultParams()
	var brokers string
	var jsonOut bool
	flag.StringVar(&brokers, "brokers", "mosquitto,ours", "brokers to measure, in order: mosquitto, ours (the bridge)")
	flag.IntVar(&p.Nodes, "nodes", p.Nodes, "nodes in the fleet: retained chef/chef/<node>/status messages")
	flag.IntVar(&p.Inflight, "inflight", p.Inflight, "max unacknowledged QoS 1 publishes of the fleet publisher")
	flag.DurationVar(&p.Idle, "idle", p.Idle, "how long idle CPU is measured with the fleet held")
	flag.DurationVar(&p.Stall, "stall", p.Stall, "a late subscriber is done when nothing came for this long")
	flag.DurationVar(&p.LateTimeout, "late-timeout", p.LateTimeout, "max wait for a late subscriber")
	flag.StringVar(&p.Fixture, "fixture", p.Fixture, "the converge POSTed to the bridge (relative to the repository root); its node_name is replaced by fleet nodes'")
	flag.IntVar(&p.ConvergeNodes, "converge-nodes", p.ConvergeNodes, "fleet nodes that converge in the Chef CPU row")
	flag.IntVar(&p.Converges, "converges", p.Converges, "converges POSTed per round of the Chef CPU row")
	flag.IntVar(&p.ConvergeRounds, "converge-rounds", p.ConvergeRounds, "rounds of the Chef CPU row; the report shows the median")
	flag.IntVar(&p.Clients, "clients", p.Clients, "concurrent HTTP clients POSTing converges")
	flag.StringVar(&p.User, "user", p.User, "MQTT username of the publisher account the generated configs define")
	flag.StringVar(&p.Pass, "pass", p.Pass, "its password")
	flag.StringVar(&p.BridgePkg, "bridge-pkg", p.BridgePkg, "package to build for the bridge")
	flag.StringVar(&p.BridgeBin, "bridge-bin", "", "prebuilt bridge binary to start instead of building -bridge-pkg")
	flag.Var((*benchkit.ListFlag)(&p.BridgeEnv), "bridge-env", "extra `KEY=VALUE` environment for the bridges (repeatable)")
	flag.BoolVar(&p.NoHistory, "no-history", false, "run the bridge with history.enabled: false (what the bus's history costs)")
	flag.BoolVar(&p.MemoryStore, "memory-store", false, "run the bridge with broker.persistence.memory: true (what keeping retained messages on disk, synced before each PUBACK, costs)")
	flag.StringVar(&p.MosqBin, "mosquitto-bin", p.MosqBin, "mosquitto binary")
	flag.StringVar(&p.MosqPasswd, "mosquitto-passwd", p.MosqPasswd, "mosquitto_passwd binary")
	flag.StringVar(&p.PerfDir, "perf-dir", "", "record a CPU profile (perf record -g) of the bridge while it takes the fleet's retained publishes and converges, into `DIR`/publish-ours.perf.data and converge-<fleet|empty>.perf.data")
	flag.BoolVar(&jsonOut, "json", false, "print results as JSON instead of a table")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the load generator itself to this file")
	flag.Parse()

	prog := benchkit.Program{Name: "retained", Stopped: "brokers", CPUProfile: *cpuProfile, JSON: jsonOut}
	var err error
	if p.Brokers, err = benchkit.ParseChoices("brokers", brokers, nameMosquitto, nameOurs); err != nil {
		return prog.Fail(err)
	}
	if err := p.validate(); err != nil {
		return prog.Fail(err)
	}
	return prog.Run(func(ctx context.Context) (benchkit.Report, error) { return run(ctx, p, os.Stderr) })
}

func (p params) validate() error {
	switch {
	case p.Nodes < 1 || p.Nodes > maxNodes:
		return fmt.Errorf("-nodes must be in 1..%d", maxNodes)
	case p.Inflight < 1 || p.Inflight > 65535:
		return errors.New("-inflight must be in 1..65535")
	case p.Idle <= 0 || p.Stall <= 0 || p.LateTimeout <= 0:
		return errors.New("-idle, -stall and -late-timeout must be > 0")
	case p.ConvergeNodes < 1 || p.ConvergeNodes > p.Nodes:
		return errors.New("-converge-nodes must be in 1..-nodes")
	case p.Converges < 1 || p.ConvergeRounds < 1 || p.Clients < 1:
		return errors.New("-converges, -converge-rounds and -clients must be >= 1")
	case p.User == "" || p.Pass == "":
		return errors.New("-user and -pass must not be empty")
	}
	return benchkit.CheckEnv("bridge-env", p.BridgeEnv)
}
