#!/usr/bin/env bash
# Builds a release into dist/ (or $DIST): for each architecture
#   firehose_<version>_linux_<arch>.tar.gz   binaries, units, example config, LICENSE
#   firehose_<version>_<arch>.deb, firehose-<version>.<arch>.rpm   by nfpm
# plus SHA256SUMS. The version comes from scripts/version.sh ($VERSION or
# git). ARCHES chooses the architectures (default "amd64 arm64"); PACKAGES=0
# skips the .deb and .rpm.
#
#   scripts/release.sh                       # everything
#   ARCHES=amd64 DIST=/tmp/dist scripts/release.sh
#
# nfpm runs through `go run` at a pinned version, as staticcheck does in
# scripts/test.sh: nothing to install, and the same nfpm everywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
dist=${DIST:-dist}
arches=${ARCHES:-amd64 arm64}
version=$(scripts/version.sh)
version=${version:-devel}
# Package versions must start with a digit: v1.2.3 is 1.2.3; anything else
# sorts before every release.
case "$version" in
  v[0-9]*) pkg_version=${version#v}; pkg_version=${pkg_version//-/\~} ;;
  *)       pkg_version="0.0.0~${version//-/.}" ;;
esac
mkdir -p "$dist"
rm -f "$dist"/SHA256SUMS
for arch in $arches; do
  name="firehose_${version}_linux_${arch}"
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/$name/systemd"
  VERSION=$version scripts/build.sh "$stage/$name" linux "$arch"
  cp LICENSE README.md config.example.yaml "$stage/$name/"
  cp deploy/systemd/*.service "$stage/$name/systemd/"
  tar -C "$stage" --owner=0 --group=0 --sort=name -czf "$dist/$name.tar.gz" "$name"
  echo "==> $dist/$name.tar.gz"
  if [ "${PACKAGES:-1}" != 0 ]; then
    # nfpm expands variables in the package's fields but not in the paths
    # of its contents: the binaries' directory is written in.
    sed "s#\${BIN_DIR}#$stage/$name#g" deploy/packaging/nfpm.yaml > "$stage/nfpm.yaml"
    for packager in deb rpm; do
      PKG_VERSION=$pkg_version PKG_ARCH=$arch \
        go run "$NFPM" package --config "$stage/nfpm.yaml" --packager "$packager" --target "$dist/"
    done
  fi
  rm -rf "$stage"
  trap - EXIT
done
(cd "$dist" && sha256sum -- *.tar.gz $(ls *.deb *.rpm 2>/dev/null) > SHA256SUMS)
echo "==> $dist: $(cd "$dist" && ls | tr '\n' ' ')"
echo "Docker: docker build --build-arg VERSION=$version --build-arg REVISION=$(git rev-parse HEAD 2>/dev/null) -t firehose:$version ."
