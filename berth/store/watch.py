"""A watch over etcd's ``/v3/watch`` gateway stream that never silently stops.

A watch must survive an etcd restart and etcd cancelling it, and hand over
``prev_kv`` decoded. This one:

* resumes from the revision after the last one it delivered whenever the
  stream breaks (etcd restart, network, idle timeout), backing off with
  tenacity, so nothing is lost and nothing is delivered twice; when its
  member does not answer, on the next member of the cluster (a revision
  means the same on every member);
* asks for progress notifications, which advance its resume point on a quiet
  prefix and prove the stream alive. A stream silent for ``idle_timeout``
  seconds is presumed dead and reopened from the resume point: harmless when
  it was merely quiet (etcd's default progress interval is 10 minutes, so a
  quiet prefix is reopened every ``idle_timeout``; lower etcd's
  ``--watch-progress-notify-interval`` to avoid it);
* raises :class:`~store.errors.Compacted` when its revision is gone, so the
  caller relists, and :class:`~store.errors.Unauthorized` when permission is
  denied even after authenticating again.

Events of one revision always arrive in one batch (etcd never splits a
revision across watch responses), which is what makes resuming exact.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple, Protocol

import msgspec
import requests
import tenacity

from berth.store.config import EtcdConfig
from berth.store.errors import Compacted, StoreError, Unauthorized, Unavailable, classify, translate
from berth.store.keys import Key, Prefix
from berth.store.link import Link
from berth.store.ops import GatewayKV, b64, key_text, prefix_end, unb64

log = logging.getLogger(__name__)


class Watched(Protocol):
    """What a watch needs of the store it watches (``client.Store`` is one, and makes its
    watches: this module imports none of it)."""

    @property
    def config(self) -> EtcdConfig: ...

    @property
    def session(self) -> requests.Session: ...

    @property
    def link(self) -> Link: ...

    @property
    def endpoint(self) -> str: ...

    def url(self, path: str, endpoint: str | None = None) -> str: ...

    def report(self, error: StoreError, endpoint: str, op: str) -> str | None: ...

    def authenticate(self) -> None: ...


def _interrupt(response: requests.Response) -> None:
    """Wake a thread blocked reading ``response``.

    ``Response.close()`` would wait for the buffered reader's lock, which the
    reading thread holds until data arrives; shutting the socket down makes
    the blocked read return at once.
    """
    sock = getattr(getattr(response.raw, "_connection", None), "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
            return
        except OSError:
            pass
    response.close()


class _Idle(Unavailable):
    """The stream was silent for the idle timeout: reopen it, quietly."""


_DECODE = msgspec.json.Decoder(dict[str, Any]).decode


class WatchEvent(NamedTuple):
    """One change. The value stays as etcd sent it (base64) until it is read: a
    watcher that already knows what a revision holds (the scheduler's echo of its own
    Bindings) never decodes it."""

    type: Literal["PUT", "DELETE"]
    key: Key
    encoded: str | bytes  # the value, base64; empty for DELETE
    mod_revision: int
    create_revision: int
    version: int
    prev_encoded: str | None = None  # only when the watch asked for prev_kv
    lease: int = 0  # the lease the key is attached to (0: none)

    @property
    def value(self) -> bytes:
        return unb64(self.encoded)

    @property
    def prev_value(self) -> bytes | None:
        return None if self.prev_encoded is None else unb64(self.prev_encoded)



class _Event(msgspec.Struct):
    type: str = "PUT"
    kv: GatewayKV = msgspec.field(default_factory=GatewayKV)
    prev_kv: GatewayKV | None = None


class _Header(msgspec.Struct):
    revision: int = 0


class _Result(msgspec.Struct):
    header: _Header = msgspec.field(default_factory=_Header)
    events: list[_Event] = []
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0
    cancel_reason: str = ""


class _Message(msgspec.Struct):
    """One line of the watch stream: a result, or an error."""

    result: _Result = msgspec.field(default_factory=_Result)
    error: dict[str, Any] | None = None


# strict=False: the gateway writes int64s as strings
_DECODE_MESSAGE = msgspec.json.Decoder(_Message, strict=False).decode


def _event(ev: _Event) -> WatchEvent:
    kv, prev = ev.kv, ev.prev_kv
    return WatchEvent("DELETE" if ev.type == "DELETE" else "PUT", Key(key_text(kv.key)), kv.value,
                      kv.mod_revision, kv.create_revision, kv.version,
                      prev.value if prev is not None else None, kv.lease)


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The lines of a stream of chunks, each copied once. (requests' ``iter_lines``
    joins what it holds with every new chunk: etcd sends a long watch response —
    fifty Bindings, 160 kB — in chunks of a few kB, so it copied the line over and
    over, quadratic in its length.)"""
    parts: list[bytes] = []
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if parts:
                parts.append(chunk[start:end])
                yield b"".join(parts)
                parts = []
            else:
                yield chunk[start:end]
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:] if start else chunk)
    if parts:
        yield b"".join(parts)


class WatchBatch(NamedTuple):
    """What one watch response carried: events (maybe none) up to ``revision``."""

    revision: int
    events: list[WatchEvent]


class Watch:
    """Iterate over batches of changes under ``prefix`` from ``start_revision`` on.

    The iterator ends only when :meth:`close` is called (from any thread).
    """

    def __init__(
        self,
        store: Watched,
        prefix: Prefix | Key,
        start_revision: int,
        *,
        prev_kv: bool = False,
        idle_timeout: float = 30.0,
        max_backoff: float = 5.0,
    ) -> None:
        if start_revision < 1:
            raise ValueError("a watch starts at a revision >= 1 (list first)")
        self.store = store
        self.prefix = prefix
        self.next_revision = start_revision
        self.prev_kv = prev_kv
        self.idle_timeout = idle_timeout
        self.max_backoff = max_backoff
        self.reconnects = 0
        self._closed = threading.Event()
        self._response: requests.Response | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """End the iteration, from any thread, at once."""
        self._closed.set()
        with self._lock:
            if self._response is not None:
                _interrupt(self._response)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def __iter__(self) -> Iterator[WatchBatch]:
        reauthenticated = False
        while not self.closed:
            try:
                lines = self._connect()
                for batch in self._read(lines):
                    reauthenticated = False
                    yield batch
            except Unauthorized:
                if self.closed:
                    return
                if reauthenticated or not self.store.config.user:
                    raise
                self.store.authenticate()
                reauthenticated = True
            except Unavailable as exc:
                if self.closed:
                    return
                self.reconnects += 1
                if not isinstance(exc, _Idle):
                    self.store.link.watch_reconnected()
                log.log(  # an outage is said once, by the store's link
                    logging.DEBUG if isinstance(exc, _Idle) else logging.INFO,
                    "watch %s broke (%s); resuming from revision %d",
                    self.prefix,
                    exc,
                    self.next_revision,
                )

    def _connect(self) -> Iterator[bytes]:
        """Open the stream (retrying with backoff while etcd is unreachable)."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Unavailable),
            wait=tenacity.wait_exponential(multiplier=0.1, max=self.max_backoff)
            + tenacity.wait_random(0, 0.1),
            stop=lambda _state: self.closed,
            before_sleep=lambda st: log.debug(  # the store's link says it once
                "watch %s: etcd unreachable (%s); retrying",
                self.prefix,
                st.outcome.exception() if st.outcome else "?",
            ),
            reraise=True,
        )
        return retrying(self._open)

    def _open(self) -> Iterator[bytes]:
        request: dict[str, Any] = {
            "key": b64(self.prefix),
            "range_end": b64(prefix_end(self.prefix)),
            "start_revision": str(self.next_revision),
            "progress_notify": True,
        }
        if self.prev_kv:
            request["prev_kv"] = True
        endpoint = self.store.endpoint
        started = time.monotonic()
        try:
            resp = self.store.session.post(
                self.store.url("watch", endpoint),
                json={"create_request": request},
                stream=True,
                timeout=(self.store.config.timeout, self.idle_timeout),
            )
        except Exception as exc:
            err = translate(exc, f"watch {self.prefix}")
            self.store.report(err, endpoint, "watch")
            raise err from exc
        if resp.status_code != 200:
            text = resp.text
            resp.close()
            try:
                err = _DECODE(text.encode()).get("error", {})
                code, message = err.get("grpc_code", err.get("code")), err.get("message", text)
            except (msgspec.DecodeError, AttributeError):
                code, message = None, text
            raise classify(
                int(code) if code is not None else None, str(message), f"watch {self.prefix}"
            )
        self.store.link.ok(endpoint, started)
        with self._lock:
            if self.closed:
                resp.close()
                raise Unavailable("closed")
            self._response = resp
        return _lines(resp.iter_content(chunk_size=None))

    def _read(self, lines: Iterator[bytes]) -> Iterator[WatchBatch]:
        try:
            for line in lines:
                if not line:
                    continue
                batch = self._parse(line)
                if batch is not None:
                    yield batch
        except StoreError:
            raise
        except Exception as exc:  # broken or timed-out stream
            if "timed out" in str(exc):
                raise _Idle(f"watch {self.prefix}: silent for {self.idle_timeout:g}s") from exc
            raise Unavailable(f"watch {self.prefix}: stream ended: {exc}") from exc
        finally:
            with self._lock:
                if self._response is not None:
                    self._response.close()
                    self._response = None
        raise Unavailable(f"watch {self.prefix}: stream closed by etcd")

    def _parse(self, line: bytes) -> WatchBatch | None:
        try:
            message = _DECODE_MESSAGE(line)
        except msgspec.DecodeError as exc:
            raise Unavailable(f"watch {self.prefix}: garbled stream: {line[:80]!r}") from exc
        if message.error is not None:
            err = message.error
            code = err.get("grpc_code", err.get("code"))
            raise classify(
                int(code) if code is not None else None,
                str(err.get("message", "")),
                f"watch {self.prefix}",
            )
        result = message.result
        revision = result.header.revision
        if result.canceled:
            if result.compact_revision:
                raise Compacted(self.next_revision, result.compact_revision)
            reason = result.cancel_reason or "canceled by etcd"
            raise classify(None, reason, f"watch {self.prefix}")
        if result.compact_revision:
            raise Compacted(self.next_revision, result.compact_revision)
        if result.created:
            return None
        events = [_event(ev) for ev in result.events]
        if events:
            self.next_revision = events[-1].mod_revision + 1
        elif revision >= self.next_revision:  # a progress notification
            self.next_revision = revision + 1
        return WatchBatch(revision, events)
