"""Writing metric values: leased, guarded, and only when something changed.

Every value key is attached to one etcd lease that this process keeps alive:
if the process dies, its values vanish after the lease TTL, and the
scheduler treats them as missing. A value is written only when its raw
value, its normalised form or its error changes — not on every poll. If the
lease is lost (etcd unreachable for longer than its TTL), a new one is
granted and every value is written again. After the values, the writer
publishes the picture marker (``MetricPicture``) on the same lease.

The store is fenced by the leader's term: once another replica leads, every
write fails in etcd (``Deposed``); the writer says so once and writes nothing
more — the values and the picture are the new leader's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from prometheus_client import Counter

from berth.store import (
    Conflict,
    Delete,
    Deposed,
    KeptLease,
    Put,
    Store,
    StoreError,
    encode,
    keys,
)
from berth.store.documents import MetricPicture, MetricValue, MetricValueStatus

log = logging.getLogger(__name__)

WRITES = Counter("berth_metrics_cache_writes_total", "Metric value keys written", ["op"])


def _essence(status: MetricValueStatus) -> tuple[object, ...]:
    """What makes a value different, ignoring when it was observed."""
    err = status.error
    return (status.value, status.normalized, status.out_of_range, status.invalid_range,
            err.reason if err else None, err.message if err else None,
            tuple((p.at, p.value) for p in status.forecast))


class ValueWriter:
    def __init__(self, store: Store, *, lease_ttl: int,
                 on_lease_lost: Callable[[], None] | None = None) -> None:
        self.store = store
        self.lease_ttl = lease_ttl
        self.on_lease_lost = on_lease_lost
        self._lock = threading.Lock()  # guards _written and _picture_revision
        self._lease_lock = threading.Lock()  # one thread replaces a lost lease
        self._written: dict[keys.Key, tuple[tuple[object, ...], int]] = {}  # key → (essence, rev)
        self._picture_revision = 0
        self.deposed: Deposed | None = None  # our term ended: nothing more is written
        self.lease = self._new_lease()

    def _commit(self, ops: list[Put] | list[Delete]) -> int:
        """Commit, unless our term is over (then Deposed, said once)."""
        if self.deposed is not None:
            raise self.deposed
        try:
            return self.store.commit(ops)
        except Deposed as exc:
            if self.deposed is None:
                log.error("metrics-cache: %s; no value or picture is written any more by "
                          "this replica", exc)
            self.deposed = exc
            raise

    def _new_lease(self) -> KeptLease:
        return KeptLease(self.store, self.lease_ttl, on_lost=self._lease_lost)

    def _lease_lost(self) -> None:
        log.error("the values' lease was lost; writing every value again on a new one")
        with self._lock:
            self._written.clear()
            self._picture_revision = 0
        if self.on_lease_lost is not None:
            self.on_lease_lost()

    def _ensure_lease(self) -> int:
        """The current lease's ID, after replacing a lost one (once, whichever thread asks)."""
        with self._lease_lock:
            if self.lease.lost.is_set():
                self.lease = self._new_lease()
            return self.lease.id

    def _put(self, key: keys.Key, data: bytes, revision: int, lease: int) -> int | None:
        """Write ``key`` over ``revision``; a conflict (another run's value, after a
        restart) takes the key over once. The new revision, or None."""
        for _ in range(2):
            try:
                return self._commit([Put(key, data, revision, lease)])
            except Conflict:
                current = self.store.get(key)
                revision = current.mod_revision if current else 0
        log.warning("%s: changed concurrently twice; will retry next poll", key)
        return None

    def unchanged(self, key: keys.Key, status: MetricValueStatus) -> bool:
        with self._lock:
            hit = self._written.get(key)
        return hit is not None and hit[0] == _essence(status)

    def write(self, key: keys.Key, doc: MetricValue) -> bool:
        """Write ``doc`` at ``key`` unless nothing changed; True if written."""
        essence = _essence(doc.status)
        with self._lock:
            hit = self._written.get(key)
        if hit is not None and hit[0] == essence:
            return False
        new = self._put(key, encode(doc), hit[1] if hit else 0, self._ensure_lease())
        if new is None:
            return False
        with self._lock:
            self._written[key] = (essence, new)
        WRITES.labels("put").inc()
        return True

    def publish(self, picture: MetricPicture) -> bool:
        """Write the picture marker (after the values it describes); True if written."""
        with self._lock:
            revision = self._picture_revision
        new = self._put(keys.METRIC_PICTURE, encode(picture), revision, self._ensure_lease())
        if new is None:
            return False
        with self._lock:
            self._picture_revision = new
        WRITES.labels("picture").inc()
        return True

    def write_many(self, docs: list[tuple[keys.Key, MetricValue]]) -> tuple[int, int]:
        """Write the changed ones of ``docs``, up to 128 per transaction; returns how many
        were written and how many could not be (left for the next poll).

        A transaction that conflicts (another run's keys, after a restart) is
        retried key by key, which takes the keys over.
        """
        changed = [(k, d) for k, d in docs if not self.unchanged(k, d.status)]
        if not changed:
            return 0, 0
        lease = self._ensure_lease()
        done = failed = 0
        room = self.store.room
        for start in range(0, len(changed), room):
            chunk = changed[start : start + room]
            with self._lock:
                revs = [self._written.get(k, (None, 0))[1] for k, _ in chunk]
            try:
                new = self._commit([Put(k, encode(d), rev, lease)
                                         for (k, d), rev in zip(chunk, revs, strict=True)])
            except Conflict:
                for k, d in chunk:
                    if self.write(k, d):
                        done += 1
                    elif not self.unchanged(k, d.status):
                        failed += 1
                continue
            with self._lock:
                for k, d in chunk:
                    self._written[k] = (_essence(d.status), new)
            WRITES.labels("put").inc(len(chunk))
            done += len(chunk)
        return done, failed

    def remove(self, key: keys.Key) -> None:
        """Delete a value nobody references any more."""
        with self._lock:
            hit = self._written.pop(key, None)
        try:
            self._commit([Delete(key, hit[1] if hit else None)])
            WRITES.labels("delete").inc()
        except StoreError as exc:
            log.warning("%s: not removed: %s", key, exc)

    def forget(self, key: keys.Key) -> bool:
        """Someone else changed ``key`` (garbage, a hand-made delete): the next poll writes
        ours over it, and the next publish the picture. False if we never wrote it."""
        with self._lock:
            if key == keys.METRIC_PICTURE:
                known, self._picture_revision = self._picture_revision != 0, 0
                return known
            return self._written.pop(key, None) is not None

    def written_keys(self) -> set[keys.Key]:
        with self._lock:
            return set(self._written)

    def close(self) -> None:
        """Revoke the lease: the values go with it (a clean shutdown)."""
        self.lease.revoke()
