"""Unit tests of callback_plugins/firehose.py: truncation, censoring, and the
sender's queue, retries, splitting and deadline, against real local HTTP
servers. Run by TestPluginUnit with the Python that runs ansible-playbook:

    python3 -m unittest -v plugin_test    (with PYTHONPATH=../callback_plugins)
"""

import http.server
import json
import socket
import threading
import time
import unittest

import firehose


class Bridge:
    """A local HTTP server that answers each POST with the next status of
    `answers` (the last one repeats) and records the events it accepted."""

    def __init__(self, answers, retry_after=None, max_events=None):
        self.answers = list(answers)
        self.requests = 0
        self.events = []
        bridge = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def do_POST(self):
                body = self.rfile.read(int(self.headers['Content-Length']))
                events = json.loads(body)
                bridge.requests += 1
                bridge.auth = self.headers.get('Authorization')
                bridge.path = self.path
                status = bridge.answers.pop(0) if len(bridge.answers) > 1 else bridge.answers[0]
                if max_events is not None and len(events) > max_events:
                    status = 413
                if status == 200:
                    bridge.events.extend(events)
                out = b'{}'
                self.send_response(status)
                if retry_after is not None:
                    self.send_header('Retry-After', str(retry_after))
                self.send_header('Content-Length', str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d/ansible/v1/events' % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def event(i, size=0):
    return firehose.dumps({'n': i, 'pad': 'x' * size})


def closed_url():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return 'http://127.0.0.1:%d/ansible/v1/events' % port


class TestTruncate(unittest.TestCase):

    def test_small_result_is_unchanged(self):
        r = {'changed': True, 'stdout': 'hi', 'rc': 0}
        self.assertEqual(json.loads(firehose.truncate(r, 1000)), r)

    def test_large_result_fits_and_keeps_small_keys(self):
        r = {'changed': True, 'rc': 2, 'msg': 'failed', 'stdout': 'é' * 50000, 'stdout_lines': ['x'] * 10000}
        for limit in (256, 1000, 4096):
            data = firehose.truncate(r, limit)
            self.assertLessEqual(len(data), limit)
            got = json.loads(data)
            self.assertIs(got['_truncated'], True)
            self.assertEqual((got['changed'], got['rc'], got['msg']), (True, 2, 'failed'))
            self.assertNotIn('stdout_lines', got)
            self.assertTrue('é' * 10 in got.get('stdout', '') or limit < 400, got)

    def test_odd_values_do_not_raise(self):
        r = {'set': {1}, 'obj': object(), 'bytes_key': b'x', 'surrogate': '\udcff'}
        got = json.loads(firehose.truncate(r, 10000))
        self.assertEqual(got['set'], [1])

    def test_non_string_keys_are_sized_as_json_has_them(self):
        # JSON quotes every key: 1 is "1", two bytes more than its size
        # unquoted. Counted unquoted, 120 such keys overshoot the limit.
        r = {i: i for i in range(1000, 1120)}
        r['big'] = 'x' * 5000
        data = firehose.truncate(r, 1000)
        self.assertLessEqual(len(data), 1000)
        got = json.loads(data)
        self.assertIs(got['_truncated'], True)
        self.assertEqual(got['1000'], 1000)
        for k, v in (({None: 1, True: 2, 1.5: 3}, {'null': 1, 'true': 2, '1.5': 3}),):
            self.assertEqual(json.loads(firehose.truncate(k, 1000)), v)

    def test_tuple_keys_do_not_raise(self):
        r = {(1, 2): 'tuple', 'nested': {(3,): {'a': 1}}, 'big': 'y' * 5000}
        self.assertEqual(json.loads(firehose.dumps(r))['nested'], {'(3,)': {'a': 1}})
        for limit in (300, 10000):
            data = firehose.truncate(r, limit)
            self.assertLessEqual(len(data), limit)
            got = json.loads(data)
            self.assertEqual(got['(1, 2)'], 'tuple')
            self.assertEqual(got['nested'], {'(3,)': {'a': 1}})


class TestCensor(unittest.TestCase):

    def test_nested_no_log_items_are_censored(self):
        r = {'changed': True, 'results': [
            {'item': 'public', 'stdout': 'public', '_ansible_no_log': False},
            {'item': 'SECRET', 'stdout': 'SECRET', 'changed': True, '_ansible_no_log': True},
        ]}
        self.assertTrue(firehose.has_no_log(r))
        out = firehose.censor_nested(r)
        text = firehose.dumps(out).decode()
        self.assertNotIn('SECRET', text)
        self.assertEqual(out['results'][1], {'censored': firehose.CENSORED, 'changed': True})
        self.assertEqual(out['results'][0]['stdout'], 'public')

    def test_without_keys_reaches_any_depth(self):
        r = {'invocation': 1, 'reg': {'stdout': 'x', 'invocation': {'module_args': {'p': 'SECRET'}},
                                      'results': [{'invocation': 2, 'deep': ({'invocation': 3, 'k': 'v'},)}]}}
        out = firehose.without_keys(r, {'invocation'})
        self.assertEqual(out, {'reg': {'stdout': 'x', 'results': [{'deep': [{'k': 'v'}]}]}})
        self.assertIn('invocation', r['reg'], 'the original must not be modified')

    def test_truncate_keeps_its_marker(self):
        out = json.loads(firehose.truncate({'_truncated': False, 'stdout': 'x' * 2000}, 256))
        self.assertIs(out['_truncated'], True)

    def test_without_keys_drops_nested_diffs_and_facts(self):
        # debug: var=<a registered loop result>, with a diff and facts in its items.
        r = {'c': {'results': [{'diff': [{'after': 'SECRET'}], 'ansible_facts': {'x': 1}, 'rc': 0}]},
             'diff': [], 'ansible_facts': {}}
        out = firehose.without_keys(r, {'invocation', 'diff', 'ansible_facts'})
        self.assertEqual(out, {'c': {'results': [{'rc': 0}]}})


class FakeHost:
    def get_name(self):
        return 'web/01+blue'


class FakeTask:
    _uuid = 'task-uuid'

    def __str__(self):
        return 'TASK: role : do it'


class FakeResult:
    def __init__(self, result):
        self._result = result
        self._host = FakeHost()
        self._task = FakeTask()


class FakeDisplay:
    verbosity = 0

    def __init__(self):
        self.warnings = []

    def warning(self, msg, *args, **kwargs):
        self.warnings.append(msg)

    def __getattr__(self, name):  # display, v, vvv, ...
        return lambda *args, **kwargs: None


class FakeSender:
    url = 'http://bridge/ansible/v1/events'
    last_error = 'HTTP 503: busy'

    def __init__(self, undelivered):
        self.undelivered = undelivered
        self.sent = []

    def put(self, ev):
        self.sent.append(json.loads(ev))

    def flush(self, timeout):
        return self.undelivered


class TestHooks(unittest.TestCase):

    def callback(self, max_result_bytes=65536, include_facts=False):
        cb = firehose.CallbackModule()
        cb._max_result_bytes = max_result_bytes
        cb._include_facts = include_facts
        return cb

    def test_result_json_strips_args_facts_diff_and_no_log_items(self):
        result = {
            'changed': True, 'rc': 0, '_ansible_no_log': False, '_ansible_verbose_always': True,
            'invocation': {'module_args': {'password': 'SECRET'}},
            'diff': {'after': 'SECRET'}, 'exception': 'Traceback SECRET',
            'ansible_facts': {'ansible_hostname': 'web01'},
            'results': [
                {'item': 'a', 'rc': 0, 'invocation': {'module_args': {'x': 'SECRET'}}, '_ansible_no_log': False},
                {'item': 'SECRET', 'stdout': 'SECRET', 'changed': True, '_ansible_no_log': True},
            ],
            # debug: var=registered shows a registered result, invocation included.
            'registered': {'rc': 0, 'invocation': {'module_args': {'_raw_params': 'echo SECRET'}}},
        }
        cb = self.callback()
        got = json.loads(cb._result_json(FakeResult(result)))
        self.assertNotIn('SECRET', json.dumps(got))
        self.assertNotIn('invocation', json.dumps(got))
        self.assertEqual(got, {'changed': True, 'rc': 0, 'results': [
            {'item': 'a', 'rc': 0}, {'censored': firehose.CENSORED, 'changed': True}], 'registered': {'rc': 0}})
        self.assertIn('SECRET', json.dumps(result), 'the original result must not be modified')
        got = json.loads(self.callback(include_facts=True)._result_json(FakeResult(result)))
        self.assertEqual(got['ansible_facts'], {'ansible_hostname': 'web01'})

    def test_task_event(self):
        cb = self.callback(max_result_bytes=300)
        sent = []

        class Capture:
            def put(self, ev):
                sent.append(json.loads(ev))
        cb._sender = Capture()
        cb.v2_playbook_on_start(None)
        cb.v2_runner_on_failed(FakeResult({'msg': 'x' * 1000, 'rc': 1}), ignore_errors=True)
        # An async task whose poll failed, forgiven by failed_when: false.
        # async_failed comes before failed_when is evaluated: only the final
        # result counts.
        cb.v2_runner_on_async_failed(FakeResult({'msg': 'async', 'rc': 1, 'failed': True}))
        cb.v2_runner_on_ok(FakeResult({'msg': 'async', 'rc': 1, 'failed': False}))
        self.assertEqual(cb._hook_errors, 0, cb._hook_error)
        self.assertEqual([e['status'] for e in sent], ['FAILED', 'OK'])
        ev = sent[0]
        self.assertEqual(sorted(ev), sorted([
            'event_id', 'status', 'host', 'ansible_host', 'session', 'ansible_type', 'playbook_name',
            'playbook_id', 'ansible_task', 'ansible_result']))
        self.assertEqual((ev['status'], ev['ansible_type'], ev['ansible_host'], ev['ansible_task']),
                         ('FAILED', 'task', 'web/01+blue', 'TASK: role : do it'))
        self.assertIs(ev['ansible_result']['_truncated'], True)
        self.assertEqual(ev['ansible_result']['rc'], 1)
        self.assertLessEqual(len(firehose.dumps(ev['ansible_result'])), 300)
        self.assertEqual(sent[1]['playbook_id'], ev['playbook_id'])
        self.assertNotEqual(sent[1]['event_id'], ev['event_id'])

    def test_no_exception_escapes_a_hook(self):
        cb = firehose.CallbackModule()
        for hook, args in (('v2_runner_on_ok', (None,)), ('v2_runner_on_failed', (object(),)),
                           ('v2_playbook_on_play_start', (42,)), ('v2_playbook_on_stats', (None,)),
                           ('v2_runner_on_unreachable', ()), ('v2_runner_on_async_failed', ('x',))):
            getattr(cb, hook)(*args)
        # async_failed publishes nothing, so reads nothing of its argument.
        self.assertEqual(cb._hook_errors, 5)

    def test_one_warning_counts_undelivered_and_unbuilt_events(self):
        display = FakeDisplay()
        cb = firehose.CallbackModule(display=display)
        cb._sender = FakeSender(undelivered=2)
        cb.v2_runner_on_ok(None)  # an event that cannot be built
        cb._report()
        self.assertEqual(len(display.warnings), 1, display.warnings)
        w = display.warnings[0]
        self.assertTrue(w.startswith('firehose: 3 event(s) were not delivered to http://bridge/ansible/v1/events'), w)
        self.assertIn('1 could not be built, first error: v2_runner_on_ok: AttributeError', w)
        self.assertIn('last error: HTTP 503: busy', w)

        # Only unbuilt events: still the one warning, and a next run starts
        # counting anew.
        display.warnings.clear()
        cb._reported = False
        cb._sender = FakeSender(undelivered=0)
        cb.v2_runner_on_failed(None)
        cb._report()
        self.assertEqual(len(display.warnings), 1, display.warnings)
        self.assertTrue(display.warnings[0].startswith('firehose: 1 event(s) were not delivered'), display.warnings)
        self.assertNotIn('last error', display.warnings[0])


class TestSender(unittest.TestCase):

    def test_batches_in_order_with_token(self):
        b = Bridge([200])
        self.addCleanup(b.close)
        s = firehose.Sender(b.url, token='tok', batch_size=7)
        for i in range(50):
            s.put(event(i))
        self.assertEqual(s.flush(10), 0)
        self.assertEqual([e['n'] for e in b.events], list(range(50)))
        self.assertGreaterEqual(b.requests, 8)
        self.assertEqual(b.auth, 'Bearer tok')

    def test_retries_transient_failures(self):
        b = Bridge([503, 429, 500, 200], retry_after=0)
        self.addCleanup(b.close)
        s = firehose.Sender(b.url)
        s.put(event(1))
        self.assertEqual(s.flush(10), 0)
        self.assertEqual(b.requests, 4)
        self.assertEqual(len(b.events), 1)

    def test_permanent_refusal_drops_without_retrying(self):
        b = Bridge([400, 200])
        self.addCleanup(b.close)
        s = firehose.Sender(b.url)
        s.put(event(1))
        self.assertEqual(s.flush(10), 1)
        self.assertIn('HTTP 400', s.last_error)
        self.assertEqual(b.requests, 1)

    def test_too_large_batches_are_split(self):
        b = Bridge([200], max_events=3)
        self.addCleanup(b.close)
        s = firehose.Sender(b.url, batch_size=20)
        # Hold the queue's (reentrant) lock while queueing, so the thread
        # takes all 20 events as one batch.
        with s._cond:
            for i in range(20):
                s.put(event(i))
        self.assertEqual(s.flush(10), 0)
        self.assertGreater(b.requests, 7)
        self.assertEqual(sorted(e['n'] for e in b.events), list(range(20)))

    def test_full_queue_drops_new_events(self):
        s = firehose.Sender(closed_url(), queue_size=5)
        for i in range(12):
            s.put(event(i))
        start = time.monotonic()
        dropped = s.flush(0.5)
        self.assertEqual(dropped, 12)
        self.assertLess(time.monotonic() - start, 1.5)

    def test_a_refusing_bridge_is_given_up_at_once(self):
        # Nothing listens: at the end of the run the sender tries once more
        # and gives up, rather than retrying until the long deadline.
        s = firehose.Sender(closed_url())
        for i in range(250):  # three batches
            s.put(event(i))
        self.assertEqual(s.flush(600), 250)
        self.assertTrue(s._down)
        self.assertIn('ConnectionRefusedError', s.last_error)

    def test_flush_deadline_bounds_a_stalled_bridge(self):
        ln = socket.socket()
        ln.bind(('127.0.0.1', 0))
        ln.listen(16)
        self.addCleanup(ln.close)
        url = 'http://127.0.0.1:%d/x' % ln.getsockname()[1]
        s = firehose.Sender(url, timeout=60)
        s.put(event(1))
        start = time.monotonic()
        self.assertEqual(s.flush(1), 1)
        self.assertLess(time.monotonic() - start, 2)

    def test_url_without_a_path_gets_the_endpoint(self):
        b = Bridge([200])
        self.addCleanup(b.close)
        base = b.url[:-len(firehose.DEFAULT_PATH)]
        s = firehose.Sender(base)
        s.put(event(1))
        self.assertEqual(s.flush(10), 0)
        self.assertEqual(b.path, '/ansible/v1/events')
        self.assertEqual(s.url, b.url)

    def test_bad_url_is_refused(self):
        for url in ('ftp://x/', 'http:///path', 'nonsense'):
            with self.assertRaises(ValueError):
                firehose.Sender(url)


if __name__ == '__main__':
    unittest.main()
