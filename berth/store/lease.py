"""A lease kept alive in the background, for keys that must vanish with their writer.

The metrics-cache attaches its values to one; if the process dies, etcd
deletes them once the TTL runs out. When the lease is lost (it expired while
etcd was unreachable, or was revoked), ``lost`` is set and ``on_lost`` is
called: the owner grants a new lease and writes its keys again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from berth.store.client import Store
from berth.store.errors import StoreError

log = logging.getLogger(__name__)


class KeptLease:
    def __init__(
        self, store: Store, ttl: int, *, on_lost: Callable[[], None] | None = None
    ) -> None:
        if ttl < 2:
            raise ValueError("a lease TTL below 2 seconds cannot be kept alive reliably")
        self.store = store
        self.ttl = ttl
        self.on_lost = on_lost
        self.id = store.grant(ttl)
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease {self.id:x}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.ttl / 3):
            try:
                if self.store.keep_alive(self.id) > 0:
                    last_ok = time.monotonic()
                    continue
                log.error("lease %x expired", self.id)
            except StoreError as exc:
                if time.monotonic() - last_ok < self.ttl:
                    log.warning("lease %x: refresh failed: %s", self.id, exc)
                    continue
                log.error("lease %x: not refreshed for %ds (%s); presumed lost",
                          self.id, self.ttl, exc)
            self.lost.set()
            if self.on_lost is not None:
                try:
                    self.on_lost()
                except Exception:
                    log.exception("lease %x: on_lost callback failed", self.id)
            return

    def revoke(self) -> None:
        """Stop refreshing and revoke: every key attached goes at once."""
        self._stop.set()
        self._thread.join(timeout=self.ttl)
        if not self.lost.is_set():
            try:
                self.store.revoke(self.id)
            except StoreError as exc:
                log.warning("lease %x: revoke failed: %s", self.id, exc)
