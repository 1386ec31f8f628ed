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
from berth.store import Delete, Store
from berth.store import ledger as L

log = logging.getLogger(__name__)


class LedgerConfig(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The scheduler's ``ledger:`` settings."""

    enabled: bool = True  # write records with Bindings
    keep: int = 100  # newest records per resource and writer
    retention_days: float = 30.0
    max_bytes: int = 256 << 20  # every record's value together
    trim_every: float = 600.0  # seconds between two trims (the leader's)

    def __post_init__(self) -> None:
        if self.keep < 1 or self.retention_days <= 0 or self.max_bytes < 1:
            raise ValueError("ledger: keep, retention_days and max_bytes must be positive")
        if self.trim_every <= 0:
            raise ValueError("ledger: trim_every must be positive")

    @property
    def retention(self) -> L.Retention:
        return L.Retention(self.keep, self.retention_days, self.max_bytes)


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


class Trimmer:
    """Deletes what retention no longer keeps (see the module's docstring)."""

    def __init__(self, store: Store, retention: L.Retention, *, clock: Clock = SYSTEM) -> None:
        self.store = store
        self.retention = retention
        self.clock = clock
        self._named: set[str] = set()  # keys said not to be records (once each)

    def _entries(self) -> Iterator[L.Entry]:
        for page in self.store.keys_under(L.LEDGER):
            for key in page:
                try:
                    yield L.parse(key)
                except ValueError as exc:
                    if key not in self._named:
                        self._named.add(key)
                        log.warning("ledger: %s; left alone (berth writes no such key)", exc)

    def trim(self) -> int:
        """One pass; returns how many records it deleted."""
        sizes: dict[datetime, int] = defaultdict(int)
        for e in self._entries():
            sizes[_hour(e.at)] += e.size
        cutoff = L.size_cutoff(sizes, self.retention.max_bytes)
        if cutoff is not None:
            log.warning("ledger: over %d bytes in all: records up to %s go first",
                        self.retention.max_bytes, cutoff.isoformat())
        now = self.clock.now()
        deleted = 0
        doomed: list[str] = []
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

    def _delete(self, doomed: list[str]) -> int:
        n = 0
        while doomed:
            chunk, doomed[:] = doomed[: self.store.room], doomed[self.store.room:]
            self.store.commit([Delete(k) for k in chunk])
            n += len(chunk)
        return n


__all__ = ["LedgerConfig", "Trimmer"]
