#!/bin/sh
# Regenerates the subunit v2 inputs with Debian's python3-subunit tools.
# Run from this directory; then `go test ./adapters/subunit/ -update`.
set -eu
{ subunit-output --inprogress tempest.api.compute.test_servers.test_create
  subunit-output --success tempest.api.compute.test_servers.test_create --tag worker-0
  subunit-output --success tempest.api.compute.test_servers.test_list
  subunit-output --skip tempest.api.compute.test_servers.test_resize; } > stream_passing/input.subunit
printf 'Traceback (most recent call last):\n  File "tempest/api/compute/test_servers.py", line 42\nAssertionError: 500 != 202\n' > traceback.tmp
{ subunit-output --success tempest.api.compute.test_servers.test_create
  subunit-output --fail tempest.api.compute.test_servers.test_delete --attach-file traceback.tmp --file-name traceback --mimetype 'text/x-traceback; charset=utf8'
  subunit-output --xfail tempest.api.compute.test_servers.test_rebuild; } > stream_failing/input.subunit
rm -f traceback.tmp
{ subunit-output --success tempest.api.compute.test_servers.test_create
  subunit-output --inprogress tempest.scenario.test_network_basic_ops.test_hotplug_nic; } > stream_incomplete/input.subunit
head -c 150 stream_failing/input.subunit > stream_truncated/input.subunit
cp stream_passing/input.subunit stream_missing_change/input.subunit
