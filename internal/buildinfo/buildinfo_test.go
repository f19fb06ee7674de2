package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "53b8a08abf364c3142f27211f2610bc8fa3b62ff"
	for _, c := range []struct {
		name              string
		ldVersion, commit string
		bi                *debug.BuildInfo
		want, wantCommit  string
	}{
		{"release build", "v1.2.3", "abc", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v1.2.3", "abc"},
		{"linker wins over the module", "v1.2.3", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-2026"}, Settings: vcs(rev, "false")}, "v1.2.3", rev},
		{"go install module@version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0", ""},
		{"go build in a checkout (pseudo-version)", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261125141552-53b8a08abf36"}, Settings: vcs(rev, "false")}, "v0.0.0-20261125141552-53b8a08abf36", rev},
		{"VCS info without a module version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "devel-53b8a08abf36", rev},
		{"dirty tree", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "devel-53b8a08abf36-dirty", rev},
		{"nothing known", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel", ""},
		{"no build info", "", "", nil, "devel", ""},
	} {
		got := resolve(c.ldVersion, c.commit, c.bi)
		if got.Version != c.want || got.Commit != c.wantCommit || got.GoVersion == "" {
			t.Errorf("%s: %+v, want version %q commit %q", c.name, got, c.want, c.wantCommit)
		}
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	want := `# HELP firehose_build_info A metric with a constant 1 value labelled by the version, commit and Go version firehose was built with.
# TYPE firehose_build_info gauge
firehose_build_info{goversion="` + Get().GoVersion + `",revision="` + Get().Commit + `",version="` + Version() + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "firehose_build_info"); err != nil {
		t.Fatal(err)
	}
}
