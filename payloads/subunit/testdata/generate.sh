#!/bin/sh
# Regenerates the checked-in streams (fuzz seeds and the adapter's golden
# inputs) with Debian's python3-subunit tools. Run from this directory.
set -eu
{ subunit-output --inprogress nova.tests.test_a; subunit-output --success nova.tests.test_a --tag worker-0
  subunit-output --success nova.tests.test_b; subunit-output --skip nova.tests.test_c; } > passing.subunit
{ subunit-output --success nova.tests.test_a
  printf 'Traceback (most recent call last):\n  AssertionError\n' > /tmp/subunit-traceback.$$
  subunit-output --fail nova.tests.test_b --attach-file /tmp/subunit-traceback.$$ --file-name traceback --mimetype 'text/x-traceback; charset=utf8'
  rm -f /tmp/subunit-traceback.$$
  subunit-output --xfail nova.tests.test_c; } > failing.subunit
{ subunit-output --success nova.tests.test_a; subunit-output --inprogress nova.tests.test_hangs; } > incomplete.subunit
