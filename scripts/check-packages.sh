#!/usr/bin/env bash
# Builds the release for this machine's architecture as scripts/release.sh
# does, then checks it as an operator would meet it: the tarball holds both
# binaries; the systemd units pass `systemd-analyze verify` and stay below an
# exposure of 2.5 in `systemd-analyze security`; and, as root (CI), the .deb
# installs with dpkg -i, `firehose version` prints the stamped version, its
# packaged config passes check, and it purges cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT
arch=$(go env GOARCH)
version=$(scripts/version.sh)
version=${version:-devel}
ARCHES=$arch DIST=$dist VERSION=$version scripts/release.sh >"$dist/release.log" 2>&1 || { cat "$dist/release.log"; exit 1; }

tarball="$dist/firehose_${version}_linux_${arch}.tar.gz"
listing=$(tar -tzf "$tarball")
for f in firehose firehose-broker LICENSE systemd/firehose.service; do
  grep -qx "firehose_${version}_linux_${arch}/$f" <<<"$listing" || { echo "$tarball lacks $f:"; echo "$listing"; exit 1; }
done

verify() { # unit files...: fails on any complaint, not only on errors
  local out
  out=$(systemd-analyze verify "$@" 2>&1) || { echo "$out"; return 1; }
  if [ -n "$out" ]; then echo "$out"; return 1; fi
  for u in "$@"; do
    # --threshold is in tenths: 25 is an exposure of 2.5 on the 0-10 scale.
    systemd-analyze security --offline=true --threshold=25 "$u" >/dev/null \
      || { systemd-analyze security --offline=true "$u" | tail -20; return 1; }
  done
}

deb=$(ls "$dist"/*.deb)
if [ "$(id -u)" -ne 0 ]; then
  echo "==> packages built ($(cd "$dist" && ls *.deb *.rpm | tr '\n' ' ')); not root, so not installing the .deb"
  exit 0
fi
if dpkg -s firehose >/dev/null 2>&1; then
  echo "a firehose package is installed on this machine already; not replacing it"; exit 1
fi
dpkg -i "$deb" >/dev/null
trap 'dpkg --purge firehose >/dev/null 2>&1 || true; rm -rf "$dist"' EXIT
got=$(firehose version)
case "$got" in
  "firehose $version "*) ;;
  *) echo "firehose version printed '$got', want $version"; exit 1 ;;
esac
firehose-broker --version | grep -q "^firehose-broker $version " || { echo "firehose-broker --version"; exit 1; }
firehose check --config /etc/firehose/config.yaml >/dev/null
verify /usr/lib/systemd/system/firehose.service /usr/lib/systemd/system/firehose-broker.service
dpkg --purge firehose >/dev/null
[ ! -e /usr/bin/firehose ] || { echo "/usr/bin/firehose left after purge"; exit 1; }
echo "==> $(basename "$deb"): dpkg -i, firehose version ($version), systemd-analyze verify and security, dpkg --purge: OK"
