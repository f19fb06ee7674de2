#!/usr/bin/env bash
# The one command that tests firehose. It installs the external tools the tests
# use when they are missing (Debian packages, through apt-get), then runs
# gofmt, go vet, staticcheck and the whole test suite with the race detector,
# and builds the release packages and checks them (scripts/check-packages.sh:
# as root it installs the .deb, runs it and purges it).
# CI runs exactly this (.ci/run) on a fresh clone with CI=true and no stdin.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need: a command (or a glob of paths) -> package.
declare -A packages=(
  [mosquitto]=mosquitto
  [mosquitto_sub]=mosquitto-clients
  [mosquitto_pub]=mosquitto-clients
  [curl]=curl
  [ansible-playbook]=ansible-core
  [ssh]=openssh-client
  [subunit-2to1]=subunit
  [python3]=python3
  [chromium]=chromium
  ['/usr/lib/python3/dist-packages/subunit/__init__.py']=python3-subunit
  ['/usr/lib/postgresql/*/bin/initdb']=postgresql
  [promtool]=prometheus
  [systemd-analyze]=systemd
)

present() {
  case "$1" in
    /*) compgen -G "$1" >/dev/null ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] ;;
  esac
}

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

missing=()
for what in "${!packages[@]}"; do
  present "$what" || missing+=("${packages[$what]}")
done
installed_mosquitto=false
if [ "${#missing[@]}" -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "==> installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for p in "${missing[@]}"; do
    if [ "$p" = mosquitto ]; then installed_mosquitto=true; fi
  done
fi

# Debian's mosquitto package starts a mosquitto service on port 1883, which
# the README test needs, and which `go run ./cmd/bridge` needs afterwards;
# tests start their own mosquitto on free ports. When this script installed
# the package, it stops the service and keeps it from starting at boot. In CI
# it stops a running service whoever installed it.
if [ "$installed_mosquitto" = true ]; then
  $sudo service mosquitto stop >/dev/null 2>&1 || true
  if [ -d /run/systemd/system ]; then
    $sudo systemctl disable --now mosquitto >/dev/null 2>&1 || true
  fi
  echo "==> stopped and disabled the mosquitto service the package started (it held port 1883); the tests start their own"
elif [ "${CI:-}" = "true" ] && command -v service >/dev/null 2>&1; then
  service mosquitto stop >/dev/null 2>&1 || true
fi
# Debian's prometheus package (for promtool) starts a Prometheus server too;
# the tests only need promtool.
for p in "${missing[@]}"; do
  if [ "$p" = prometheus ]; then
    $sudo service prometheus stop >/dev/null 2>&1 || true
    if [ -d /run/systemd/system ]; then
      $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
    echo "==> stopped and disabled the prometheus service the package started; the tests only use promtool"
  fi
done

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

echo "==> packages"
./scripts/check-packages.sh
