#!/usr/bin/env bash
# The one command that tests firehose. It installs the external tools the tests
# use when they are missing (Debian packages, through apt-get), then runs
# gofmt, go vet, staticcheck and the whole test suite with the race detector,
# and builds the release packages and checks them (scripts/check-packages.sh:
# as root it installs the .deb, runs it and purges it).
# CI runs exactly this (.ci/run) on a fresh clone with CI=true and no stdin.
#
# A cold run (empty Go caches) is mostly compiling, so every step shares one
# compile of each package instead of making its own:
#   - go vet and staticcheck check the race build (-race), which go test then
#     reuses; go test's own vet pass is off, since go vet ./... has just run
#     all of its checks and more;
#   - the binaries tests and benchmarks run are built as scripts/build.sh
#     builds the release (internal/gobuild), once, before the tests, so the
#     tests, the Dockerfile test and the package check only link.
# What needs no CPU of its own runs alongside: apt-get with gofmt and go vet,
# staticcheck with go test. A line "... <step> for 1m20s: compile X, run Y.test"
# comes every 20 s, and the time each step took is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
background=() # pids of the steps that run alongside, and of the heartbeat
cleanup() {
  local pid
  for pid in "${background[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# ---- timings and the heartbeat ----

started=$(date +%s)
timings=() # "seconds<TAB>step" in the order the steps ended
record() { # step start-epoch
  timings+=("$(($(date +%s) - $2))	$1")
}
duration() { # seconds -> 1m05s
  if [ "$1" -ge 60 ]; then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi
}
print_timings() {
  local status=$? line secs
  echo "==> timings (load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'); $(nproc 2>/dev/null || echo '?') cores)"
  for line in "${timings[@]}"; do
    secs=${line%%	*}
    printf '    %-48s %8s\n' "${line#*	}" "$(duration "$secs")"
  done
  printf '    %-48s %8s%s\n' "total" "$(duration $(($(date +%s) - started)))" "$([ "$status" -eq 0 ] || echo "  (failed)")"
  cleanup
  exit "$status"
}
trap print_timings EXIT

step="" step_started=$started
begin() { # the next foreground step
  [ -z "$step" ] || record "$step" "$step_started"
  step=$1 step_started=$(date +%s)
  echo "==> $step"
  printf '%s\t%s\n' "$step_started" "$step" >"$work/step"
}

# activity names what this script's processes are doing now: the packages
# being compiled, the binaries being linked, the test binaries running.
activity() {
  command -v ps >/dev/null 2>&1 || return 0
  ps -eo pid=,ppid=,args= 2>/dev/null | awk -v root="$$" '
    {
      pid[NR] = $1; ppid[NR] = $2; n = split($3, part, "/"); tool = part[n]; what = ""
      if (tool == "compile") { for (i = 4; i < NF; i++) if ($i == "-p") { what = "compile " $(i + 1); break } }
      else if (tool == "link") { for (i = 4; i < NF; i++) if ($i == "-o") { m = split($(i + 1), o, "/"); what = "link " o[m]; break } }
      else if (tool ~ /\.test$/) what = "run " tool
      else if (tool == "vet" || tool == "staticcheck" || tool == "apt-get" || tool == "dpkg" || tool == "nfpm" || tool == "initdb" || tool == "ansible-playbook") what = tool
      desc[NR] = what
    }
    END {
      keep[root] = 1
      do { changed = 0; for (i = 1; i <= NR; i++) if (!(pid[i] in keep) && (ppid[i] in keep)) { keep[pid[i]] = 1; changed = 1 } } while (changed)
      for (i = 1; i <= NR; i++) if ((pid[i] in keep) && desc[i] != "" && !(desc[i] in seen)) { seen[desc[i]] = 1; out = out (out == "" ? "" : ", ") desc[i] }
      if (length(out) > 160) out = substr(out, 1, 157) "..."
      print out
    }'
}
heartbeat() {
  local since name now doing
  while sleep 20; do
    IFS=$'\t' read -r since name <"$work/step" || continue
    now=$(date +%s)
    doing=$(activity || true)
    echo "    ... $name for $(duration $((now - since)))${doing:+: $doing}"
  done
}
heartbeat &
background+=($!)

# alongside runs a step in the background, its output in a log; finish waits
# for it, prints the log, records its time and fails if it failed.
declare -A alongside_pid alongside_started
alongside() { # name command...
  local name=$1; shift
  alongside_started[$name]=$(date +%s)
  "$@" >"$work/$name.log" 2>&1 &
  alongside_pid[$name]=$!
  background+=($!)
}
finish() { # name
  local name=$1 status=0
  wait "${alongside_pid[$name]}" || status=$?
  record "$name (alongside)" "${alongside_started[$name]}"
  cat "$work/$name.log"
  if [ "$status" -ne 0 ]; then echo "$name failed (exit $status)"; return 1; fi
}

# ---- Debian packages ----

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

install_packages() {
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  local p
  for p in "$@"; do
    case "$p" in
      # Debian's mosquitto package starts a mosquitto service on port 1883,
      # which the README test needs, and which `go run ./cmd/bridge` needs
      # afterwards; tests start their own mosquitto on free ports.
      mosquitto)
        $sudo service mosquitto stop >/dev/null 2>&1 || true
        if [ -d /run/systemd/system ]; then
          $sudo systemctl disable --now mosquitto >/dev/null 2>&1 || true
        fi
        echo "==> stopped and disabled the mosquitto service the package started (it held port 1883); the tests start their own" ;;
      # Debian's prometheus package (for promtool) starts a Prometheus server
      # too; the tests only need promtool.
      prometheus)
        $sudo service prometheus stop >/dev/null 2>&1 || true
        if [ -d /run/systemd/system ]; then
          $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
        fi
        echo "==> stopped and disabled the prometheus service the package started; the tests only use promtool" ;;
    esac
  done
}

if [ "${#missing[@]}" -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  # With a terminal, sudo may ask for a password: then apt-get runs first,
  # in the foreground. Otherwise it runs alongside gofmt and go vet, which
  # do not need the packages.
  if [ -n "$sudo" ] && [ -t 0 ]; then
    begin "install ${missing[*]}"
    install_packages "${missing[@]}"
  else
    echo "==> installing ${missing[*]} (alongside)"
    alongside "install packages" install_packages "${missing[@]}"
  fi
fi
# In CI, stop a mosquitto service on port 1883 whoever installed it.
if [ "${CI:-}" = "true" ] && command -v service >/dev/null 2>&1; then
  service mosquitto stop >/dev/null 2>&1 || true
fi

# ---- tools and the release build, alongside ----

# staticcheck and nfpm (the package check's), at the versions pinned here and
# in scripts/release.sh, and the release binaries, whose compiled packages the
# tests' binaries share (internal/gobuild): all non-race compiles, which fill
# the gaps in go vet's.
staticcheck_version=honnef.co/go/tools/cmd/staticcheck@v0.8.2
nfpm_version=$(sed -n 's/^NFPM=//p' scripts/release.sh)
mkdir -p "$work/tools" "$work/bin"
alongside "staticcheck built" env GOBIN="$work/tools" go install "$staticcheck_version"
alongside "release binaries built" scripts/build.sh "$work/bin"
if [ -n "$nfpm_version" ]; then
  alongside "nfpm built" env GOBIN="$work/tools" go install "$nfpm_version"
fi

# ---- checks and tests ----

begin "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

begin "go vet -race (compiles the race build)"
go vet -race ./...

[ -z "${alongside_pid[install packages]:-}" ] || finish "install packages"
finish "staticcheck built"
finish "release binaries built"

echo "==> staticcheck (alongside go test)"
goflags=$(go env GOFLAGS)
alongside staticcheck env GOFLAGS="${goflags:+$goflags }-race" "$work/tools/staticcheck" ./...

begin "go test -race"
test_status=0
# -p 4: most test binaries wait on sockets and child processes; four at a
# time ran the suite in 213 s instead of 254 s at -p 2 (warm cache, same CPU),
# and the suite passes at loads of 10 to 17 on 2 cores, which is busier.
go test -race -vet=off -p 4 -timeout 15m ./... || test_status=$?
record "$step" "$step_started"
step=""
echo "==> staticcheck"
finish staticcheck
[ "$test_status" -eq 0 ] || exit "$test_status"

[ -z "${alongside_pid[nfpm built]:-}" ] || finish "nfpm built"
begin "packages"
./scripts/check-packages.sh
record "$step" "$step_started"
step=""
