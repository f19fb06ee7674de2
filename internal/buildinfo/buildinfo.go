// Package buildinfo says which firehose a binary is: its version, the
// commit it was built from and the Go that built it, for `bridge version`,
// the start-up log, the firehose_build_info metric and $SYS/broker/version.
//
// The release scripts and the Dockerfile stamp the version with
//
//	go build -ldflags "-X github.com/opsfirehose/firehose/internal/buildinfo.version=v1.2.3 \
//	                   -X github.com/opsfirehose/firehose/internal/buildinfo.commit=abc123"
//
// A build without those flags takes what the Go toolchain recorded: the
// module version for `go install github.com/opsfirehose/firehose/cmd/bridge@v1.2.3`,
// or the VCS revision for a build in a checkout (then "devel-<revision>",
// with "-dirty" for uncommitted changes). Only a build with neither, such as
// `go run` or `-buildvcs=false`, says plain "devel".
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Set by the linker (-X); empty otherwise.
var (
	version string
	commit  string
)

// Info describes one build.
type Info struct {
	// Version is a release version ("v1.2.3"), a module pseudo-version, or
	// "devel" with the revision when one is known.
	Version string
	// Commit is the VCS revision, or "" when unknown.
	Commit string
	// Modified reports uncommitted changes in the tree it was built from.
	Modified bool
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

var (
	once sync.Once
	info Info
)

// Get returns this binary's build information.
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		info = resolve(version, commit, bi)
	})
	return info
}

// Version is Get().Version.
func Version() string { return Get().Version }

// resolve prefers the linker's values, then the module version, then the
// VCS settings the toolchain recorded.
func resolve(ldVersion, ldCommit string, bi *debug.BuildInfo) Info {
	in := Info{Version: ldVersion, Commit: ldCommit, GoVersion: runtime.Version()}
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
	}
	if in.Version == "" {
		in.Version = "devel"
		if in.Commit != "" {
			in.Version += "-" + short(in.Commit)
			if in.Modified {
				in.Version += "-dirty"
			}
		}
	}
	in.Version = strings.TrimSpace(in.Version)
	return in
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// String is "<version> (commit <rev>, <go version>)", as `version` prints it.
func (in Info) String() string {
	s := in.Version + " ("
	if in.Commit != "" {
		s += "commit " + short(in.Commit)
		if in.Modified {
			s += ", modified"
		}
		s += ", "
	}
	return s + in.GoVersion + ")"
}

// Collector is the firehose_build_info gauge, always 1, labelled with the
// version, the commit and the Go version, as Prometheus' own build_info
// metrics are: dashboards join on it to show what runs where.
func Collector() prometheus.Collector {
	in := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "firehose_build_info",
		Help:        "A metric with a constant 1 value labelled by the version, commit and Go version firehose was built with.",
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.Commit, "goversion": in.GoVersion},
	})
	g.Set(1)
	return g
}

// NewRegistry is a Prometheus registry with the Go runtime's, the process's
// and the build's collectors, which every binary serves at /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), Collector())
	return reg
}
