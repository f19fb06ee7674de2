# Copyright: the firehose authors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This plugin imports Ansible, which is GPLv3+, so it is GPLv3+ too; the rest
# of firehose (the Go code) is Apache-2.0. In the opsfirehose.firehose
# collection it is opsfirehose.firehose.firehose; as a plain file on
# ANSIBLE_CALLBACK_PLUGINS it is firehose.
"""Ansible callback plugin that publishes play, task, stats and finish events
to the firehose bridge (POST /ansible/v1/events), which puts them on MQTT with
the OpenStack firehose's topics and payloads.

It must never slow a playbook down or fail it: hooks only build an event and
append it to a bounded in-memory queue; one daemon thread POSTs batches; at the
end of the run the queue is flushed for at most flush_timeout seconds, and
whatever could not be delivered is dropped and reported in one warning.
"""

from __future__ import annotations

import atexit
import collections
import functools
import json
import socket
import ssl
import threading
import time
import uuid
import http.client
from urllib.parse import urlsplit

from ansible import __version__ as ansible_version
from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
    name: firehose
    type: notification
    short_description: publish playbook events to the firehose bridge
    description:
      - Sends play start, task result, per-host stats and finish events to the
        firehose bridge's C(/ansible/v1/events) endpoint, which publishes them on
        MQTT as C(ansible/playbook/<id>/...) with the OpenStack firehose's payloads.
      - Never blocks or fails the run. Events are queued in memory and sent in
        batches by a background thread. At the end of the run the queue is
        flushed for at most I(flush_timeout) seconds, or not waited for at all
        when the bridge refuses connections (it is down); events that could
        not be delivered are dropped and counted in one warning.
      - Task results are censored with Ansible's own no_log handling, task
        arguments (C(invocation)) and diffs are never sent, and C(ansible_facts)
        are dropped unless I(include_facts) is set, at any depth of a result.
    requirements:
      - Python 3 standard library only; ansible-core 2.14 or later.
    options:
      url:
        description:
          - The bridge's events endpoint. A URL without a path, such as the
            C(http://bridge:8080) that C(bridge ingest) takes, gets C(/ansible/v1/events).
        default: http://127.0.0.1:8080/ansible/v1/events
        type: str
        env:
          - name: FIREHOSE_URL
        ini:
          - section: callback_firehose
            key: url
      token:
        description: Bearer token for the bridge, sent as C(Authorization) C(Bearer <token>).
        type: str
        env:
          - name: FIREHOSE_TOKEN
        ini:
          - section: callback_firehose
            key: token
      timeout:
        description: Seconds one HTTP request may take.
        default: 5
        type: float
        env:
          - name: FIREHOSE_TIMEOUT
        ini:
          - section: callback_firehose
            key: timeout
      flush_timeout:
        description:
          - Seconds the end of the run may wait for queued events to be delivered
            to a bridge that is slow or does not answer. Retries stop at this
            deadline and the rest is dropped. A bridge that refuses connections
            (it is down) gets one more try and the run ends at once.
        default: 5
        type: float
        env:
          - name: FIREHOSE_FLUSH_TIMEOUT
        ini:
          - section: callback_firehose
            key: flush_timeout
      queue_size:
        description: Events held in memory while the bridge is slow or down; beyond it new events are dropped.
        default: 10000
        type: int
        env:
          - name: FIREHOSE_QUEUE_SIZE
        ini:
          - section: callback_firehose
            key: queue_size
      batch_size:
        description: Most events sent in one request.
        default: 100
        type: int
        env:
          - name: FIREHOSE_BATCH_SIZE
        ini:
          - section: callback_firehose
            key: batch_size
      max_result_bytes:
        description:
          - Largest C(ansible_result), in bytes of JSON. A larger result keeps its
            smallest keys (and a cut prefix of the next string) and is marked C(_truncated=true).
        default: 65536
        type: int
        env:
          - name: FIREHOSE_MAX_RESULT_BYTES
        ini:
          - section: callback_firehose
            key: max_result_bytes
      publish_skipped:
        description: Also publish skipped tasks, with status C(SKIPPED).
        default: false
        type: bool
        env:
          - name: FIREHOSE_PUBLISH_SKIPPED
        ini:
          - section: callback_firehose
            key: publish_skipped
      include_facts:
        description: Keep C(ansible_facts) in task results (they are large and often sensitive).
        default: false
        type: bool
        env:
          - name: FIREHOSE_INCLUDE_FACTS
        ini:
          - section: callback_firehose
            key: include_facts
      ca_file:
        description: PEM file of the CA that signed the bridge's certificate (https URLs).
        type: path
        env:
          - name: FIREHOSE_CA_FILE
        ini:
          - section: callback_firehose
            key: ca_file
      validate_certs:
        description: Verify the bridge's certificate and host name (https URLs).
        default: true
        type: bool
        env:
          - name: FIREHOSE_VALIDATE_CERTS
        ini:
          - section: callback_firehose
            key: validate_certs
      client_cert:
        description: PEM client certificate, for a bridge behind mutual TLS.
        type: path
        env:
          - name: FIREHOSE_CLIENT_CERT
        ini:
          - section: callback_firehose
            key: client_cert
      client_key:
        description: PEM key of I(client_cert), when it is not in the same file.
        type: path
        env:
          - name: FIREHOSE_CLIENT_KEY
        ini:
          - section: callback_firehose
            key: client_key
'''

CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"

# Keys a censored result keeps, as TaskResult.clean_copy does.
_PRESERVE = ('attempts', 'changed', 'retries', 'failed', 'skipped')

# One request's body stays under this many bytes unless one event alone is larger.
_MAX_BATCH_BYTES = 1 << 20
# How long the sender waits for a batch to fill before sending what it has;
# it is also the most an event waits in the plugin while the bridge is up.
_LINGER = 0.2
# Backoff between retries while the bridge is down or busy.
_BACKOFF_MIN = 0.1
_BACKOFF_MAX = 5.0
# A cut string keeps at least this many bytes, or is left out.
_MIN_CUT = 64


def _guard(hook):
    """Wraps a hook so that no exception ever reaches Ansible."""
    @functools.wraps(hook)
    def wrapper(self, *args, **kwargs):
        try:
            hook(self, *args, **kwargs)
        except Exception as e:  # pylint: disable=broad-except
            self._hook_failed(hook.__name__, e)
    return wrapper


class _Encoder(AnsibleJSONEncoder):
    """AnsibleJSONEncoder that never raises on an odd object: sets become lists,
    anything else its str()."""

    def default(self, o):
        if isinstance(o, (set, frozenset, tuple)):
            return list(o)
        try:
            return super().default(o)
        except TypeError:
            return str(o)


_ENCODER = _Encoder(ensure_ascii=False, separators=(',', ':'))


def dumps(value):
    """Compact JSON as UTF-8 bytes. Undecodable input (lone surrogates) becomes '?';
    a key json cannot encode (a tuple, say) becomes its str()."""
    try:
        text = _ENCODER.encode(value)
    except TypeError:
        # json only takes str, int, float, bool and None keys.
        text = _ENCODER.encode(_str_keys(value))
    return text.encode('utf-8', 'replace')


def key_text(k):
    """The string a dict key becomes in JSON: json's own for str, int, float,
    bool and None keys, else str(k)."""
    if isinstance(k, str):
        return k
    if k is True:
        return 'true'
    if k is False:
        return 'false'
    if k is None:
        return 'null'
    if isinstance(k, (int, float)):
        return _ENCODER.encode(k)
    return str(k)


def _str_keys(value):
    """value with every dict key, at any depth, turned into key_text(key)."""
    if isinstance(value, dict):
        return {key_text(k): _str_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_str_keys(v) for v in value]
    return value


def censor_nested(value):
    """Replaces every mapping marked _ansible_no_log, at any depth, by the
    censored marker. clean_copy only looks at the top level; loop results carry
    the mark per item."""
    if isinstance(value, dict):
        if value.get('_ansible_no_log'):
            return censored(value)
        return {k: censor_nested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [censor_nested(v) for v in value]
    return value


def censored(result):
    out = {'censored': CENSORED}
    for k in _PRESERVE:
        if k in result:
            out[k] = result[k]
    return out


def has_no_log(value):
    if isinstance(value, dict):
        if value.get('_ansible_no_log'):
            return True
        return any(has_no_log(v) for v in value.values())
    if isinstance(value, list):
        return any(has_no_log(v) for v in value)
    return False


def without_keys(value, keys):
    """A copy of value without any of keys in any mapping, at any depth: a
    registered result shown by debug, for one, holds the task's invocation,
    diff and facts nested."""
    if isinstance(value, dict):
        return {k: without_keys(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, (list, tuple)):
        return [without_keys(v, keys) for v in value]
    return value


def truncate(result, limit):
    """Returns the JSON of result if it fits in limit bytes; otherwise the JSON of
    an object holding "_truncated": true and as many of result's keys as fit,
    smallest first, with the first string that does not fit cut short."""
    data = dumps(result)
    if len(data) <= limit:
        return data
    out = {'_truncated': True}
    size = len(dumps(out))
    # Sized as the JSON has them: every key a string.
    # A result's own "_truncated" would overwrite the marker: it is left out.
    items = ((key_text(k), v) for k, v in result.items() if key_text(k) != '_truncated')
    sized = sorted(((len(dumps(k)) + 1 + len(dumps(v)), k, v) for k, v in items),
                   key=lambda t: (t[0], t[1]))
    cut = False
    for n, k, v in sized:
        if size + 1 + n <= limit:
            out[k] = v
            size += 1 + n
            continue
        if cut or not isinstance(v, str):
            continue
        cut = True
        budget = limit - size - 1 - len(dumps(k)) - 1
        if budget < _MIN_CUT:
            continue
        s = _cut(v, budget)
        if s:
            out[k] = s
            size += 1 + len(dumps(k)) + 1 + len(dumps(s))
    return dumps(out)


def _cut(s, budget):
    """A prefix of s whose JSON is at most budget bytes: close to the longest,
    found by shrinking in proportion to the overshoot."""
    n = min(len(s), budget)
    while n > 0:
        enc = len(dumps(s[:n]))
        if enc <= budget:
            return s[:n]
        n = min(n - 1, n * budget // enc)
    return ''


# DEFAULT_PATH is the bridge's endpoint, added to a URL that has no path.
DEFAULT_PATH = '/ansible/v1/events'


class Sender:
    """A bounded queue of JSON events and one daemon thread that POSTs them in
    batches. put() never blocks; flush() waits at most until its deadline."""

    def __init__(self, url, token=None, timeout=5.0, queue_size=10000, batch_size=100,
                 ssl_context=None, user_agent='firehose-ansible'):
        parts = urlsplit(url)
        if parts.scheme not in ('http', 'https') or not parts.hostname:
            raise ValueError('url must be http:// or https:// with a host, got %r' % url)
        if parts.path in ('', '/'):
            parts = parts._replace(path=DEFAULT_PATH)
        # For messages: the URL without any user:password@.
        self.url = '%s://%s%s' % (parts.scheme, parts.netloc.rpartition('@')[2], parts.path)
        self._https = parts.scheme == 'https'
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or '/') + ('?' + parts.query if parts.query else '')
        self._headers = {'Content-Type': 'application/json', 'User-Agent': user_agent}
        if token:
            self._headers['Authorization'] = 'Bearer ' + token
        self._timeout = timeout
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._ssl = ssl_context
        self._conn = None

        self._cond = threading.Condition()
        self._queue = collections.deque()
        self._inflight = 0
        self._thread = None
        self._kick = threading.Event()
        self._deadline = None  # monotonic; set by flush, bounds every retry after it
        # Set when, at the end of the run, the bridge refused a connection
        # twice in a row: it is down, and waiting for flush_timeout cannot
        # help, so what is left is dropped at once.
        self._down = False
        self._refused = False  # the last POST failed to connect: connection refused
        self.sent = 0
        self.dropped = 0
        self.last_error = None

    def put(self, event):
        """Queues one event (JSON bytes). Drops it when the queue is full."""
        with self._cond:
            if len(self._queue) >= self._queue_size:
                self.dropped += 1
                self.last_error = 'queue full (%d events)' % self._queue_size
                return
            self._queue.append(event)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name='firehose-sender', daemon=True)
                self._thread.start()
            # The sender waits for a first event, then for a full batch:
            # wake it only then, not for every event.
            if len(self._queue) in (1, self._batch_size):
                self._cond.notify()

    def flush(self, timeout):
        """Waits until every queued event is delivered or dropped, or timeout
        seconds pass; then drops what is left. Returns the number of events that
        were not delivered, in total since the start."""
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._deadline is None or deadline < self._deadline:
                self._deadline = deadline
            self._kick.set()
            while self._queue or self._inflight:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            unsent = len(self._queue) + self._inflight
            self._queue.clear()
            return self.dropped + unsent

    def reopen(self):
        """Lifts the deadline of an earlier flush, for a next run in the same
        process, and starts counting drops anew."""
        with self._cond:
            self._deadline = None
            self._down = False
            self.dropped = 0
            self.last_error = None

    def _run(self):
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                # Linger for a fuller batch: fewer requests, less time
                # taken from the playbook's own thread by this one.
                linger_end = time.monotonic() + _LINGER
                while self._deadline is None and len(self._queue) < self._batch_size:
                    left = linger_end - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch, size = [], 2
                while self._queue and len(batch) < self._batch_size:
                    if batch and size + len(self._queue[0]) + 1 > _MAX_BATCH_BYTES:
                        break
                    ev = self._queue.popleft()
                    batch.append(ev)
                    size += len(ev) + 1
                self._inflight = len(batch)
            sent = 0
            try:
                sent = self._deliver(batch)
            except Exception as e:  # pylint: disable=broad-except
                self.last_error = 'sender: %s' % e
            with self._cond:
                self._inflight = 0
                self.sent += sent
                self.dropped += len(batch) - sent
                self._cond.notify_all()

    def _deliver(self, batch):
        """Sends batch, retrying transient failures with backoff until the flush
        deadline. Returns how many events the bridge accepted."""
        body = b'[' + b','.join(batch) + b']'
        delay = _BACKOFF_MIN
        refused_at_end = 0
        while True:
            deadline = self._deadline
            now = time.monotonic()
            if deadline is not None and (now >= deadline or self._down):
                return 0
            t = self._timeout if deadline is None else min(self._timeout, deadline - now)
            status, retry_after, err = self._post(body, t)
            if 200 <= status < 300:
                return len(batch)
            if status == 413 and len(batch) > 1:
                # The bridge's max_body or max_batch is smaller than ours: halve.
                half = len(batch) // 2
                return self._deliver(batch[:half]) + self._deliver(batch[half:])
            self.last_error = err
            if status and status not in (408, 429) and status < 500:
                return 0  # the bridge refused these events for good
            if status == 0 and self._refused and self._deadline is not None:
                # The run is over and nothing listens: one quick retry (a
                # bridge restarting), then give up rather than hold the
                # playbook for the whole flush_timeout.
                refused_at_end += 1
                if refused_at_end >= 2:
                    self._down = True
                    return 0
                delay = _BACKOFF_MIN  # the retry comes at once, not after the run's backoff
            wait = min(max(delay, retry_after), _BACKOFF_MAX * 2)
            delay = min(delay * 2, _BACKOFF_MAX)
            deadline = self._deadline
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
            if wait > 0:
                self._kick.wait(wait)
                self._kick.clear()

    def _post(self, body, timeout):
        """One POST. Returns (status, retry_after seconds, error text); status 0
        for a connection failure."""
        try:
            if self._conn is None:
                if self._https:
                    self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                                             context=self._ssl)
                else:
                    self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            else:
                self._conn.timeout = timeout
                if self._conn.sock is not None:
                    self._conn.sock.settimeout(timeout)
            self._conn.request('POST', self._path, body=body, headers=self._headers)
            resp = self._conn.getresponse()
            text = resp.read(4096)
            if resp.will_close:
                self._close()
            if 200 <= resp.status < 300:
                return resp.status, 0, None
            retry_after = 0.0
            try:
                retry_after = float(resp.getheader('Retry-After') or 0)
            except ValueError:
                pass
            return resp.status, retry_after, 'HTTP %d: %s' % (resp.status, text[:300].decode('utf-8', 'replace').strip())
        except Exception as e:  # pylint: disable=broad-except
            self._close()
            self._refused = isinstance(e, ConnectionRefusedError)
            return 0, 0.0, '%s: %s' % (type(e).__name__, e)

    def _close(self):
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # pylint: disable=broad-except
                pass


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'notification'
    CALLBACK_NAME = 'firehose'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        self._lock = threading.RLock()
        self._sender = None
        self._controller = socket.gethostname()
        self._session = str(uuid.uuid4())
        self._playbook_id = None
        self._play_name = ''
        self._hook_errors = 0
        self._hook_error = None
        self._reported = False
        self._flush_timeout = 5.0
        self._max_result_bytes = 65536
        self._publish_skipped = False
        self._include_facts = False
        super().__init__(display=display, options=options)

    # ----- configuration -------------------------------------------------

    def set_options(self, task_keys=None, var_options=None, direct=None):
        try:
            super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
            timeout = float(self.get_option('timeout'))
            flush_timeout = float(self.get_option('flush_timeout'))
            queue_size = int(self.get_option('queue_size'))
            batch_size = int(self.get_option('batch_size'))
            max_result = int(self.get_option('max_result_bytes'))
            if timeout <= 0 or flush_timeout < 0:
                raise ValueError('timeout must be positive and flush_timeout not negative')
            if queue_size < 1 or batch_size < 1:
                raise ValueError('queue_size and batch_size must be at least 1')
            if max_result < 256:
                raise ValueError('max_result_bytes must be at least 256')
            sender = Sender(self.get_option('url'), token=self.get_option('token'), timeout=timeout,
                            queue_size=queue_size, batch_size=batch_size,
                            ssl_context=self._ssl_context(),
                            user_agent='firehose-ansible-callback/1 ansible-core/%s' % ansible_version)
        except Exception as e:  # pylint: disable=broad-except
            self._display.warning('firehose callback disabled: %s' % e)
            self.disabled = True
            return
        self._flush_timeout = flush_timeout
        self._max_result_bytes = max_result
        self._publish_skipped = bool(self.get_option('publish_skipped'))
        self._include_facts = bool(self.get_option('include_facts'))
        if self._sender is None:
            atexit.register(self._at_exit)
        self._sender = sender

    def _ssl_context(self):
        if not urlsplit(self.get_option('url') or '').scheme == 'https':
            return None
        ctx = ssl.create_default_context(cafile=self.get_option('ca_file') or None)
        if not self.get_option('validate_certs'):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.get_option('client_cert'):
            ctx.load_cert_chain(self.get_option('client_cert'), self.get_option('client_key') or None)
        return ctx

    # ----- plumbing ------------------------------------------------------

    def _hook_failed(self, name, err):
        with self._lock:
            self._hook_errors += 1
            if self._hook_error is None:
                self._hook_error = '%s: %s: %s' % (name, type(err).__name__, err)
        try:
            self._display.vvv('firehose: %s failed: %s' % (name, err))
        except Exception:  # pylint: disable=broad-except
            pass

    def _send(self, event):
        if self._sender is not None:
            self._sender.put(dumps(event))

    def _ids(self):
        with self._lock:
            if self._playbook_id is None:
                self._playbook_id = str(uuid.uuid4())
            return self._playbook_id, self._play_name

    def _result_json(self, result):
        """The censored, stripped and size-limited JSON of a task result."""
        raw = result._result
        if not isinstance(raw, dict):
            return truncate({'msg': str(raw)}, self._max_result_bytes)
        if raw.get('censored') == CENSORED or has_no_log(raw):
            # clean_copy already censored the top level; items may still carry the mark.
            raw = censor_nested(raw)
        clean = self._dump_results(raw, serialize=False)
        if not isinstance(clean, dict):
            clean = {'msg': str(clean)}
        # The task's args, diffs and (unless wanted) facts, at any depth: a
        # registered result shown by debug holds them too.
        drop = {'invocation', 'diff'}
        if not self._include_facts:
            drop.add('ansible_facts')
        clean = without_keys(clean, drop)
        return truncate(clean, self._max_result_bytes)

    # Every event has exactly the fields of the OpenStack firehose schema, plus
    # event_id: a UUID the bridge uses as the de-duplication id, since two
    # events can be byte for byte the same (the same task twice on a host),
    # and cuts out of the payload it publishes. As in the schema, stats and
    # finish events have no ansible_type.

    def _task_event(self, result, status):
        playbook_id, play_name = self._ids()
        envelope = dumps({
            'event_id': str(uuid.uuid4()),
            'status': status,
            'host': self._controller,
            'ansible_host': result._host.get_name(),
            'session': self._session,
            'ansible_type': 'task',
            'playbook_name': play_name,
            'playbook_id': playbook_id,
            'ansible_task': str(result._task),
        })
        # Splice the result in, so that it is serialized once.
        event = envelope[:-1] + b',"ansible_result":' + self._result_json(result) + b'}'
        if self._sender is not None:
            self._sender.put(event)

    def _report(self):
        """Flushes and prints the one warning about undelivered events."""
        with self._lock:
            if self._reported or self._sender is None:
                return
            self._reported = True
        dropped = self._sender.flush(self._flush_timeout)
        with self._lock:
            unbuilt, first_error = self._hook_errors, self._hook_error
            self._hook_errors, self._hook_error = 0, None
        if dropped or unbuilt:
            # One warning, whatever went wrong.
            why = []
            if unbuilt:
                why.append('%d could not be built, first error: %s' % (unbuilt, first_error))
            if dropped:
                why.append('last error: %s' % self._sender.last_error)
            self._display.warning(
                'firehose: %d event(s) were not delivered to %s and were dropped (%s)'
                % (dropped + unbuilt, self._sender.url, '; '.join(why)))

    def _at_exit(self):
        try:
            self._report()
        except Exception:  # pylint: disable=broad-except
            pass

    # ----- hooks ---------------------------------------------------------

    @_guard
    def v2_playbook_on_start(self, playbook):
        with self._lock:
            # One id per run: a second playbook file in the same run keeps it;
            # a run after the stats of the previous one gets a new id.
            if self._playbook_id is None:
                self._playbook_id = str(uuid.uuid4())
            if self._reported and self._sender is not None:
                self._sender.reopen()
            self._reported = False

    @_guard
    def v2_playbook_on_play_start(self, play):
        with self._lock:
            self._play_name = play.get_name() or ''
        playbook_id, play_name = self._ids()
        self._send({
            'event_id': str(uuid.uuid4()),
            'status': 'OK',
            'host': self._controller,
            'session': self._session,
            'playbook_name': play_name,
            'playbook_id': playbook_id,
            'ansible_type': 'start',
        })

    @_guard
    def v2_runner_on_ok(self, result):
        self._task_event(result, 'OK')

    @_guard
    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._task_event(result, 'FAILED')

    @_guard
    def v2_runner_on_unreachable(self, result):
        self._task_event(result, 'UNREACHABLE')

    def v2_runner_on_async_failed(self, result):
        """Publishes nothing. Ansible calls it from inside the task's poll and
        retry loop, before failed_when and until are evaluated: a
        failed_when: false task would be FAILED, then OK, and an until loop
        one FAILED per attempt. The task's final result comes to
        v2_runner_on_failed or v2_runner_on_ok like any other. (Defined, so
        that CallbackBase's version, which reads the result, does not run.)"""

    @_guard
    def v2_runner_on_skipped(self, result):
        if self._publish_skipped:
            self._task_event(result, 'SKIPPED')

    @_guard
    def v2_playbook_on_stats(self, stats):
        playbook_id, play_name = self._ids()
        failed = False
        for host in sorted(stats.processed.keys()):
            summary = stats.summarize(host)
            if summary.get('failures') or summary.get('unreachable'):
                failed = True
            self._send({
                'event_id': str(uuid.uuid4()),
                'host': self._controller,
                'ansible_host': host,
                'playbook_id': playbook_id,
                'playbook_name': play_name,
                'stats': summary,
            })
        self._send({
            'event_id': str(uuid.uuid4()),
            'playbook_id': playbook_id,
            'playbook_name': play_name,
            'status': 'FAILED' if failed else 'OK',
        })
        with self._lock:
            self._playbook_id = None
        self._report()
