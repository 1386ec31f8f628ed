"""Whether etcd answers this process: one record per Store, one log line per change.

Every request and watch of a :class:`~store.client.Store` reports here. The
first failure after success logs one WARNING naming the member and the
reason (and the member tried next, when there are several); the first success
after failures logs one INFO line naming the member that answered and how
long the process was without etcd. Only a request sent after the failure was
recorded can end the outage: one already in flight when etcd went away may
still be answered, and counting that as recovery would log the outage again
with the next failure. Everything else that retries while etcd is
down logs at DEBUG, so an outage is two lines in the log, not one per request.

Readiness checks read :meth:`Link.up`. Exported: ``berth_etcd_up``, request
latency by operation (``berth_etcd_request_seconds``), errors by operation and
kind (``berth_etcd_request_errors_total``), switches to another member
(``berth_etcd_failovers_total``), which member it talks to
(``berth_etcd_member{endpoint}``), the seconds of the last outage
(``berth_etcd_last_outage_seconds``) and watch streams reopened after a break
(``berth_etcd_watch_reconnects_total``).
"""

from __future__ import annotations

import logging
import threading
import time

from prometheus_client import Counter, Gauge, Histogram

from berth.store.errors import StoreError, Unavailable

log = logging.getLogger(__name__)

ETCD_UP = Gauge("berth_etcd_up", "1 while etcd answered this process's last request")
REQUEST_SECONDS = Histogram(
    "berth_etcd_request_seconds", "Time of etcd requests that were answered, by operation",
    ["op"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10))
REQUEST_ERRORS = Counter(
    "berth_etcd_request_errors_total", "etcd requests that failed, by operation and kind",
    ["op", "error"])
FAILOVERS = Counter("berth_etcd_failovers_total",
                    "Times this process moved to another etcd member after one failed")
LAST_OUTAGE = Gauge("berth_etcd_last_outage_seconds",
                    "How long this process was last without etcd (0 before any outage)")
MEMBER = Gauge("berth_etcd_member", "1 for the etcd member this process talks to, 0 for the "
               "others it was given", ["endpoint"])
WATCH_RECONNECTS = Counter("berth_etcd_watch_reconnects_total",
                           "Watch streams reopened after they broke")


class Link:
    def __init__(self, endpoints: tuple[str, ...]) -> None:
        self.endpoints = endpoints
        for endpoint in endpoints:
            MEMBER.labels(endpoint).set(0)
        MEMBER.labels(endpoints[0]).set(1)
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._reason = ""
        self._timers: dict[str, Histogram] = {}
        self.last_outage = 0.0  # seconds, of the last time etcd did not answer
        ETCD_UP.set(1)

    def up(self) -> bool:
        """Whether the last request reached etcd (True until one fails)."""
        with self._lock:
            return self._down_since is None

    @property
    def reason(self) -> str:
        with self._lock:
            return self._reason

    def answered(self, op: str, started: float, endpoint: str) -> None:
        """A request to ``endpoint`` sent at ``started`` (monotonic) was answered now."""
        now = time.monotonic()
        timer = self._timers.get(op)
        if timer is None:
            timer = self._timers.setdefault(op, REQUEST_SECONDS.labels(op))
        timer.observe(now - started)
        self.ok(endpoint, started)

    def ok(self, endpoint: str, started: float) -> None:
        """A request to ``endpoint`` sent at ``started`` (monotonic) was answered: etcd
        is back, unless the request was sent before the outage began."""
        with self._lock:
            if self._down_since is None or started < self._down_since:
                return
            lasted, self._down_since, self._reason = (
                time.monotonic() - self._down_since, None, "")
            ETCD_UP.set(1)  # under the lock: the gauge never disagrees with the state
            LAST_OUTAGE.set(lasted)
            self.last_outage = lasted
        log.info("etcd answers again at %s (this process was without etcd for %.3f s)",
                 endpoint, lasted)

    def failed(self, error: StoreError, endpoint: str, *, op: str = "watch",
               next_endpoint: str | None = None) -> None:
        """A request to ``endpoint`` failed; only an Unavailable error means etcd is
        unreachable. ``next_endpoint``: the member this process moved to."""
        REQUEST_ERRORS.labels(op, type(error).__name__).inc()
        if not isinstance(error, Unavailable):
            return
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since, self._reason = time.monotonic(), str(error)
            ETCD_UP.set(0)
        then = (f"trying {next_endpoint}" if next_endpoint is not None
                else "retrying with backoff")
        log.warning("etcd at %s is unreachable (%s); %s", endpoint, error, then)

    @staticmethod
    def moved(old: str, new: str) -> None:
        """The process moved from member ``old`` to ``new`` (called under the store's
        member lock, so the gauges follow the moves in order)."""
        FAILOVERS.inc()
        MEMBER.labels(old).set(0)
        MEMBER.labels(new).set(1)

    @staticmethod
    def watch_reconnected() -> None:
        WATCH_RECONNECTS.inc()
