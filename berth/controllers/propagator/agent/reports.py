"""An agent's reports: it is their only writer (under its own prefix).

:class:`Reports` reads a report as the newer of what the watch delivered and
what this agent last wrote (a work carried out right after a write must not
decide on the value before it), writes only what changed, guarded by the
revision read, and replaces a value that is not a report (written by hand)
once, saying so. The workers' writes go to etcd together (a group commit:
one transaction for those that meet, each with its own guard).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from berth.controllers.runtime import Informer
from berth.store import Conflict, Delete, Put, Store, StoreError, encode, keys
from berth.store.documents.work import Report
from berth.store.group import GroupCommit

log = logging.getLogger(__name__)


class Reports:
    def __init__(self, store: Store, cid: str, *, idle_timeout: float) -> None:
        self.store = store
        self.group = GroupCommit(store, "agent-reports")
        self.informer: Informer[Report] = Informer(
            store, keys.reports_prefix(cid), Report, idle_timeout=idle_timeout,
            layout=keys.cluster_key_problem)
        self.informer.add_invalid_handler(self._garbage_seen)
        self._lock = threading.Lock()
        self._mine: dict[keys.Key, tuple[Report | None, int]] = {}  # key → written, at revision
        self._garbage: dict[str, int] = {}  # key → revision of a value that is no report
        self.on_garbage: list[Callable[[str], None]] = []  # (report key): write it anew

    def _garbage_seen(self, key: str, revision: int) -> None:
        with self._lock:
            self._garbage[key] = revision
        for seen in self.on_garbage:
            seen(key)

    def read(self, key: keys.Key) -> tuple[Report | None, int]:
        """The report at ``key`` and the revision to guard a write with (0: none)."""
        item = self.informer.item(key)
        with self._lock:
            mine = self._mine.get(key)
            garbage = self._garbage.get(key, 0)
        seen = (item.obj, item.mod_revision) if item is not None else (None, 0)
        best = mine if mine is not None and mine[1] > seen[1] else seen
        if garbage > best[1]:
            return best[0], garbage
        return best if best[0] is not None else (None, 0)  # absent: created anew

    def write(self, key: keys.Key, report: Report) -> bool:
        """Write ``report`` if it differs from what is there; False if it could not be
        (another write came first: the caller reads again and decides again)."""
        old, revision = self.read(key)
        if old == report and not self.garbled(key):
            return True
        try:
            landed = self.group.commit([Put(key, encode(report), revision)])
        except Conflict:
            log.info("%s changed meanwhile; deciding again", key)
            return False
        except StoreError as exc:
            log.warning("%s not written: %s", key, exc)
            return False
        with self._lock:
            if self._garbage.pop(key, 0):
                log.error("%s held a value that is not a report: replaced", key)
            self._mine[key] = (report, landed)
        return True

    def garbled(self, key: keys.Key) -> bool:
        """Whether ``key`` holds a value that is not a report (written by hand), newer
        than any report there: what is written next replaces it."""
        item = self.informer.item(key)
        with self._lock:
            garbage = self._garbage.get(key, 0)
            mine = self._mine.get(key)
        return garbage > max(item.mod_revision if item else 0, mine[1] if mine else 0)

    def remove(self, key: keys.Key) -> None:
        _, revision = self.read(key)
        if revision == 0:
            return
        try:
            landed = self.group.commit([Delete(key, revision)])
        except StoreError as exc:
            log.info("%s not removed: %s", key, exc)
            return
        with self._lock:
            self._mine[key] = (None, landed)
            self._garbage.pop(key, None)

    def names(self) -> list[keys.Key]:
        """Every report there is (as the watch delivered them, and this agent wrote)."""
        with self._lock:
            mine: set[keys.Key] = {k for k, (r, _) in self._mine.items() if r is not None}
            gone = {k for k, (r, _) in self._mine.items() if r is None}
        return sorted((set(self.informer.list_keys()) - gone) | mine)
