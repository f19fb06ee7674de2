#!/usr/bin/env bash
# Prints the version to stamp into a build: $VERSION when set, else from git
# (a tag such as v1.2.3, "v1.2.3-4-gabc1234" past one, or
# "devel-<commit>[-dirty]" before the first tag), else nothing, and the
# binary then reads what the Go toolchain recorded (internal/buildinfo).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${VERSION:-}" ]; then echo "$VERSION"; exit 0; fi
command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1 || exit 0
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
  echo "$v"
else
  echo "devel-$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD 2>/dev/null || echo -dirty)"
fi
