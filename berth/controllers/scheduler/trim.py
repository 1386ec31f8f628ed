"""The ledger's settings and its one trimmer, the scheduler leader's (docs/ledger.md "Retention").

Records are written by the process that acted, in its act's transaction
(:mod:`berth.store.ledger`); the scheduler's leader retires them: every
``trim_every`` seconds :class:`Trimmer` walks the ledger's keys twice (keys
only: a record's time and size are in its key) — once to find how far back the
total fits in ``max_bytes``, once to delete, resource by resource, what is
beyond the newest ``keep`` of a writer, older than ``retention_days``, or older
than the total allows. Its deletes carry the leader's fence: a deposed leader
removes nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime

import msgspec

from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.store import Delete, Deposed, Store, StoreError, keys
from berth.store import ledger as L

log = logging.getLogger(__name__)


class LedgerConfig(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The scheduler's ``ledger:`` settings."""

    enabled: bool = True  # write records with Bindings
    keep: int = 100  # newest records per resource and writer
    retention_days: float = 30.0
    max_bytes: int = 256 << 20  # every record's value together
    trim_every: float = 600.0  # seconds between two trims (the leader's)
    # Over this share of etcd's quota in use (or with its NOSPACE alarm raised), the
    # ledger gives up its oldest half at each trim, trimmed every minute.
    etcd_full: float = 0.8
    etcd_quota: int = 2 << 30  # etcd's --quota-backend-bytes, if etcd does not say it

    def __post_init__(self) -> None:
        if self.keep < 1 or self.retention_days <= 0 or self.max_bytes < 1:
            raise ValueError("ledger: keep, retention_days and max_bytes must be positive")
        if self.trim_every <= 0:
            raise ValueError("ledger: trim_every must be positive")
        if not 0 < self.etcd_full <= 1 or self.etcd_quota < 1:
            raise ValueError("ledger: etcd_full must be in (0, 1], etcd_quota positive")

    @property
    def retention(self) -> L.Retention:
        return L.Retention(self.keep, self.retention_days, self.max_bytes)


class Trimmer:
    """Deletes what retention no longer keeps (see the module's docstring)."""

    def __init__(self, store: Store, retention: L.Retention, *, clock: Clock = SYSTEM,
                 etcd_full: float = 0.8, etcd_quota: int = 2 << 30) -> None:
        self.store = store
        self.retention = retention
        self.clock = clock
        self.etcd_full = etcd_full
        self.etcd_quota = etcd_quota
        self.pressed = False  # etcd was nearly full at the last trim
        self._named: set[str] = set()  # keys said not to be records (once each)

    def _etcd_full(self) -> str:
        """Why etcd is (nearly) full — its NOSPACE alarm, or its database over
        ``etcd_full`` of its quota — or "" (also when it cannot say)."""
        try:  # (any user may list them and read the status: tests/integration/test_etcd_roles)
            alarms = self.store.call("maintenance/alarm", {"action": "GET"}, "alarms")
            if any(a.get("alarm") == "NOSPACE" for a in alarms.get("alarms") or []):
                return "its NOSPACE alarm is raised"
        except StoreError:
            pass
        try:
            status = self.store.call("maintenance/status", {}, "status")
        except StoreError:
            return ""
        in_use = int(status.get("dbSizeInUse") or status.get("dbSize") or 0)
        quota = int(status.get("dbSizeQuota") or 0) or self.etcd_quota
        if in_use > quota * self.etcd_full:
            return f"{in_use} of its {quota} bytes are in use"
        return ""

    def _entries(self) -> Iterator[L.Entry]:
        for page in self.store.keys_under(L.LEDGER):
            for key in page:
                try:
                    yield L.parse(key)
                except ValueError as exc:
                    if key not in self._named:
                        self._named.add(key)
                        log.warning("ledger: %s; left alone (berth writes no such key)", exc)

    def run(self) -> None:
        """One pass, as the scheduler's loop makes it: a replica whose term ended deletes
        nothing (its deletes are fenced) and says so in a line, not a traceback."""
        try:
            self.trim()
        except Deposed:
            log.info("ledger: not trimmed here: this replica no longer leads")
        except StoreError as exc:
            log.warning("ledger: trimming stopped (%s); again at the next trim", exc)

    def trim(self) -> int:
        """One pass; returns how many records it deleted."""
        sizes: dict[datetime, int] = defaultdict(int)
        for e in self._entries():
            sizes[L.size_bucket(e.at)] += e.size
        budget = self.retention.max_bytes
        full = self._etcd_full()
        self.pressed = bool(full)
        if full:  # history goes first: half of it, the oldest, at each trim
            budget = min(budget, sum(sizes.values()) // 2)
            log.warning("ledger: etcd is nearly out of space (%s): the ledger gives up its "
                        "oldest records, down to %d bytes; compact and defragment etcd to get "
                        "the space back (docs/operations.md)", full, budget)
        cutoff = L.size_cutoff(sizes, budget)
        if cutoff is not None and not full:
            log.warning("ledger: over %d bytes in all: records up to %s go first",
                        self.retention.max_bytes, cutoff.isoformat())
        now = self.clock.now()
        deleted = 0
        doomed: list[keys.Key] = []
        group: list[L.Entry] = []

        def flush() -> None:
            doomed.extend(e.key for e in L.doomed(group, self.retention, now, cutoff))
            group.clear()

        for e in self._entries():
            if group and group[0].resource != e.resource:
                flush()
            group.append(e)
            if len(doomed) >= self.store.room:
                deleted += self._delete(doomed)
        flush()
        deleted += self._delete(doomed)
        if deleted:
            log.info("ledger: %d records past retention deleted", deleted)
        return deleted

    def _delete(self, doomed: list[keys.Key]) -> int:
        n = 0
        while doomed:
            chunk, doomed[:] = doomed[: self.store.room], doomed[self.store.room:]
            self.store.commit([Delete(k) for k in chunk])
            n += len(chunk)
        return n


__all__ = ["LedgerConfig", "Trimmer"]
