#!/bin/sh
# After install or upgrade: make systemd see the units. The services are not
# started: enable the bridge (or the broker alone) when its config is ready.
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  for unit in firehose firehose-broker; do
    if systemctl is-active --quiet "$unit"; then
      systemctl try-restart "$unit" >/dev/null 2>&1 || true
    fi
  done
fi
exit 0
