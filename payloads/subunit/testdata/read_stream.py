"""Read a subunit v2 stream on stdin with python-subunit, as the reference.

Prints one JSON line per packet, then a line with testtools' StreamSummary.
"""
import json
import sys

import subunit
import testtools

EPOCH = subunit.v2.EPOCH


class Packets(testtools.StreamResult):
    def status(self, test_id=None, test_status=None, test_tags=None,
               runnable=True, file_name=None, file_bytes=None, eof=False,
               mime_type=None, route_code=None, timestamp=None):
        ts = None
        if timestamp is not None:
            delta = timestamp - EPOCH
            ts = [delta.days * 86400 + delta.seconds, delta.microseconds * 1000]
        print(json.dumps({
            "test_id": test_id, "status": test_status or "",
            "tags": sorted(test_tags) if test_tags is not None else None,
            "runnable": runnable, "file_name": file_name,
            "file_len": len(file_bytes) if file_bytes is not None else None,
            "eof": eof, "mime_type": mime_type, "route_code": route_code,
            "timestamp": ts,
        }, sort_keys=True))


summary = testtools.StreamSummary()
result = testtools.CopyStreamResult([Packets(), summary])
result.startTestRun()
subunit.ByteStreamToStreamResult(sys.stdin.buffer).run(result)
result.stopTestRun()
print(json.dumps({
    "summary": True,
    "tests": summary.testsRun,
    "errors": len(summary.errors),
    "failures": len(summary.failures),
    "skipped": len(summary.skipped),
    "xfail": len(summary.expectedFailures),
    "uxsuccess": len(summary.unexpectedSuccesses),
    "successful": summary.wasSuccessful(),
}, sort_keys=True))
