#!/usr/bin/env bash
# The one command that tests firehose. It installs the external tools the tests
# use when they are missing (Debian packages, through apt-get), then runs
# gofmt, go vet, staticcheck and the whole test suite with the race detector.
# CI runs exactly this (.ci/run) on a fresh clone with CI=true and no stdin.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need: command -> package.
declare -A packages=(
  [mosquitto]=mosquitto
  [mosquitto_sub]=mosquitto-clients
  [mosquitto_pub]=mosquitto-clients
  [curl]=curl
)

missing=()
for cmd in "${!packages[@]}"; do
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    missing+=("${packages[$cmd]}")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "==> installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# A mosquitto service started by the package would hold port 1883, which the
# README test needs; tests start their own mosquitto on free ports.
if [ "${CI:-}" = "true" ] && command -v service >/dev/null 2>&1; then
  service mosquitto stop >/dev/null 2>&1 || true
fi

echo "==> gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "==> go vet"
go vet ./...

echo "==> staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "==> go test -race"
go test -race -timeout 15m ./...
