"""Whether etcd answers this process: one record per Store, one log line per change.

Every request and watch of a :class:`~store.client.Store` reports here. The
first failure after success logs one WARNING naming the URL and the reason;
the first success after failures logs one INFO line with how long it lasted.
Everything else that retries while etcd is down logs at DEBUG, so an outage
is two lines in the log, not one per request. Readiness checks read
:meth:`Link.up`; ``berth_etcd_up`` exports it.
"""

from __future__ import annotations

import logging
import threading
import time

from prometheus_client import Gauge

from store.errors import StoreError, Unavailable

log = logging.getLogger(__name__)

ETCD_UP = Gauge("berth_etcd_up", "1 while etcd answered this process's last request")


class Link:
    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._reason = ""
        ETCD_UP.set(1)

    def up(self) -> bool:
        """Whether the last request reached etcd (True until one fails)."""
        with self._lock:
            return self._down_since is None

    @property
    def reason(self) -> str:
        with self._lock:
            return self._reason

    def ok(self) -> None:
        with self._lock:
            if self._down_since is None:
                return
            lasted, self._down_since, self._reason = (
                time.monotonic() - self._down_since, None, "")
            ETCD_UP.set(1)  # under the lock: the gauge never disagrees with the state
        log.info("etcd at %s answers again (unreachable for %.1f s)", self.url, lasted)

    def failed(self, error: StoreError) -> None:
        """A request failed; only an Unavailable error means etcd is unreachable."""
        if not isinstance(error, Unavailable):
            return
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since, self._reason = time.monotonic(), str(error)
            ETCD_UP.set(0)
        log.warning("etcd at %s is unreachable (%s); retrying with backoff", self.url, error)
