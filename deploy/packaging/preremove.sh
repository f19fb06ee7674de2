#!/bin/sh
# Before removal (not before an upgrade): stop the services.
set -e
case "$1" in
  upgrade|1) exit 0 ;;  # dpkg says upgrade; rpm counts the packages left
esac
if [ -d /run/systemd/system ]; then
  systemctl disable --now firehose firehose-broker >/dev/null 2>&1 || true
fi
exit 0
