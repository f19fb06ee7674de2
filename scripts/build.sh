#!/usr/bin/env bash
# Builds both binaries, static and stamped with their version:
#   scripts/build.sh OUTDIR [GOOS GOARCH]
# makes OUTDIR/firehose (the bridge) and OUTDIR/firehose-broker. The release
# script, the Dockerfile and CI's package test all build through this, so
# every shipped binary says which version it is (bridge version, the start-up
# log, firehose_build_info, $SYS/broker/version).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build.sh OUTDIR [GOOS GOARCH]}
goos=${2:-$(go env GOOS)}
goarch=${3:-$(go env GOARCH)}
version=$(scripts/version.sh)
commit=$(git rev-parse HEAD 2>/dev/null || true)
pkg=github.com/opsfirehose/firehose/internal/buildinfo
ldflags="-s -w"
[ -n "$version" ] && ldflags="$ldflags -X $pkg.version=$version"
[ -n "$commit" ] && ldflags="$ldflags -X $pkg.commit=$commit"
mkdir -p "$out"
for cmd in bridge:firehose broker:firehose-broker; do
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$out/${cmd#*:}" "./cmd/${cmd%%:*}"
done
echo "built $out/firehose and $out/firehose-broker (${version:-unstamped}, $goos/$goarch)"
