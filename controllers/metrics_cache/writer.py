"""Writing metric values: leased, guarded, and only when something changed.

Every value key is attached to one etcd lease that this process keeps alive:
if the process dies, its values vanish after the lease TTL, and the
scheduler treats them as missing. A value is written only when its raw
value, its normalised form or its error changes — not on every poll. If the
lease is lost (etcd unreachable for longer than its TTL), a new one is
granted and every value is written again.
"""

from __future__ import annotations

import logging
import threading

from prometheus_client import Counter

from store import MAX_TXN_OPS, Conflict, Delete, KeptLease, Put, Store, StoreError, encode
from store.documents import MetricValue, MetricValueStatus

log = logging.getLogger(__name__)

WRITES = Counter("berth_metrics_cache_writes_total", "Metric value keys written", ["op"])


def _essence(status: MetricValueStatus) -> tuple[object, ...]:
    """What makes a value different, ignoring when it was observed."""
    err = status.error
    return (status.value, status.normalized, status.out_of_range, status.invalid_range,
            err.reason if err else None, err.message if err else None)


class ValueWriter:
    def __init__(self, store: Store, *, lease_ttl: int) -> None:
        self.store = store
        self.lease_ttl = lease_ttl
        self._lock = threading.Lock()
        self._written: dict[str, tuple[tuple[object, ...], int]] = {}  # key → (essence, rev)
        self.lease = self._new_lease()

    def _new_lease(self) -> KeptLease:
        return KeptLease(self.store, self.lease_ttl, on_lost=self._lease_lost)

    def _lease_lost(self) -> None:
        log.error("the values' lease was lost; writing every value again on a new one")
        with self._lock:
            self._written.clear()

    def _ensure_lease(self) -> None:
        if self.lease.lost.is_set():
            self.lease = self._new_lease()

    def unchanged(self, key: str, status: MetricValueStatus) -> bool:
        with self._lock:
            hit = self._written.get(key)
        return hit is not None and hit[0] == _essence(status)

    def write(self, key: str, doc: MetricValue) -> bool:
        """Write ``doc`` at ``key`` unless nothing changed; True if written."""
        essence = _essence(doc.status)
        with self._lock:
            hit = self._written.get(key)
        if hit is not None and hit[0] == essence:
            return False
        self._ensure_lease()
        data = encode(doc)
        revision = hit[1] if hit else 0
        for _ in range(2):
            try:
                new = self.store.commit([Put(key, data, revision, self.lease.id)])
                break
            except Conflict:
                # Another run's value (an older lease), or a stale revision: take it over.
                current = self.store.get(key)
                revision = current.mod_revision if current else 0
        else:
            log.warning("%s: changed concurrently twice; will retry next poll", key)
            return False
        with self._lock:
            self._written[key] = (essence, new)
        WRITES.labels("put").inc()
        return True

    def write_many(self, docs: list[tuple[str, MetricValue]]) -> int:
        """Write the changed ones of ``docs``, up to 128 per transaction; returns how many.

        A transaction that conflicts (another run's keys, after a restart) is
        retried key by key, which takes the keys over.
        """
        changed = [(k, d) for k, d in docs if not self.unchanged(k, d.status)]
        if not changed:
            return 0
        self._ensure_lease()
        done = 0
        for start in range(0, len(changed), MAX_TXN_OPS):
            chunk = changed[start : start + MAX_TXN_OPS]
            with self._lock:
                revs = [self._written.get(k, (None, 0))[1] for k, _ in chunk]
            try:
                new = self.store.commit([Put(k, encode(d), rev, self.lease.id)
                                         for (k, d), rev in zip(chunk, revs, strict=True)])
            except Conflict:
                done += sum(1 for k, d in chunk if self.write(k, d))
                continue
            with self._lock:
                for k, d in chunk:
                    self._written[k] = (_essence(d.status), new)
            WRITES.labels("put").inc(len(chunk))
            done += len(chunk)
        return done

    def remove(self, key: str) -> None:
        """Delete a value nobody references any more."""
        with self._lock:
            hit = self._written.pop(key, None)
        try:
            self.store.commit([Delete(key, hit[1] if hit else None)])
            WRITES.labels("delete").inc()
        except StoreError as exc:
            log.warning("%s: not removed: %s", key, exc)

    def written_keys(self) -> set[str]:
        with self._lock:
            return set(self._written)

    def close(self) -> None:
        """Revoke the lease: the values go with it (a clean shutdown)."""
        self.lease.revoke()
