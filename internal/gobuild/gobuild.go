// Package gobuild builds this module's commands the way scripts/build.sh
// builds the release: static (CGO_ENABLED=0) and with -trimpath. Tests and
// benchmarks that run a built bridge or broker build through it, so that
// they, the Dockerfile test and the package check share one compiled copy of
// every package in the Go build cache, and each further binary costs a link,
// not another compile of everything it imports.
//
// It builds only; it must not decide what a binary is stamped with beyond
// the -ldflags its caller gives.
package gobuild

import (
	"context"
	"os"
	"os/exec"
)

// Command returns `go build` of pkg (a path such as "./cmd/bridge", relative
// to dir, the module root) into out, with scripts/build.sh's flags and any
// -ldflags the caller gives (for instance -X version stamps). The caller runs
// it and reports its combined output on failure.
func Command(ctx context.Context, dir, pkg, out, ldflags string) *exec.Cmd {
	args := []string{"build", "-trimpath"}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}
