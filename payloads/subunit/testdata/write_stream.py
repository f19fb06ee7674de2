"""Write a subunit v2 stream with python-subunit's StreamResultToBytes.

Reads a JSON list of status() calls on stdin and writes the stream on stdout.
Each call is a dict of StreamResultToBytes.status keyword arguments, except:
  "file_text": file_bytes given as text (UTF-8),
  "file_size": file_bytes of that many bytes (a repeating pattern),
  "timestamp": seconds since the epoch (a float).
"""
import datetime
import json
import sys

import subunit
from subunit import iso8601

calls = json.load(sys.stdin)
out = subunit.StreamResultToBytes(sys.stdout.buffer)
out.startTestRun()
for call in calls:
    if "file_text" in call:
        call["file_bytes"] = call.pop("file_text").encode("utf-8")
    if "file_size" in call:
        n = call.pop("file_size")
        call["file_bytes"] = (b"0123456789abcdef" * (n // 16 + 1))[:n]
    if "timestamp" in call:
        call["timestamp"] = datetime.datetime.fromtimestamp(call["timestamp"], iso8601.Utc())
    if "test_tags" in call:
        call["test_tags"] = set(call["test_tags"])
    out.status(**call)
out.stopTestRun()
