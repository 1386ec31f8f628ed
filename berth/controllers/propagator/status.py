"""Application status keys: the propagator is their only writer.

:class:`StatusWriter` reads a status as the newer of what the watch delivered
and what this process last wrote (read-your-writes: a reconcile right after a
write must not decide on the value before it; once the watch has delivered that
write, or a write guarded by it was refused, the watch's word counts — another
replica may have changed or deleted it since), writes only what changed,
with a compare-and-swap on the revision read, and replaces a value that is
not a status document (garbage written by hand) at once — logged once; the
last good status still guides the plan. Each write also requires the claims
of the clusters the replica wrote about (``Doc.fences``): a replica that lost
a cluster cannot land what it thought about it.

A status written with a change an operator would want remembered — a copy's
health on a cluster, a rollout's step (:mod:`.record`) — carries its ledger
record in the same transaction (docs/ledger.md).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from berth.controllers.propagator.record import copy_record, events_of
from berth.controllers.runtime import Informer, Retry
from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.controllers.runtime.events import Recorder
from berth.store import Conflict, Delete, Deposed, Fence, Put, Store, StoreError, encode, keys
from berth.store import ledger as L
from berth.store.documents import ApplicationState, ApplicationStatus, StatusMeta
from berth.store.events import InvolvedObject
from berth.store.group import GroupCommit

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Doc:
    """One application's status key, as last read or written by this reconcile."""

    writer: StatusWriter
    key: keys.Key
    namespace: str
    name: str
    old: ApplicationStatus | None
    revision: int
    garbage: int = 0  # the revision of a value that is not a status, found there: replace it
    # The claims of the clusters this replica writes about: a write lands only while
    # they are still ours (a replica that lost them, paused, writes nothing).
    fences: tuple[Fence, ...] = ()

    @property
    def state(self) -> ApplicationState:
        return self.old.status if self.old is not None else ApplicationState()

    def write(self, state: ApplicationState) -> Retry | None:
        return self.writer.write(self, state)


class StatusWriter:
    def __init__(self, store: Store, statuses: Informer[ApplicationStatus], *,
                 ledger: bool = True, events: Recorder | None = None,
                 clock: Clock = SYSTEM, identity: str = "") -> None:
        self.store = store
        self.identity = identity  # the replica's, as its claims name it (StatusMeta.writer)
        self.statuses = statuses
        self.ledger = ledger  # write records with the statuses
        self.events = events  # and say what they record as events
        self.clock = clock
        self._stamps = L.Stamps()  # shared by the workers: a record's time, never twice
        self.group = GroupCommit(store, "application-status")  # concurrent reconciles' writes
        self._lock = threading.Lock()
        self._written: dict[str, tuple[ApplicationStatus | None, int]] = {}
        self._garbage: dict[str, int] = {}  # status key → revision of garbage written there

    def ours(self, key: str, doc: ApplicationStatus) -> bool:
        """Whether ``doc`` is what this process last wrote at ``key``."""
        with self._lock:
            mine = self._written.get(key)
        return mine is not None and mine[0] == doc

    def garbage_seen(self, key: str, revision: int) -> None:
        """The watch found a value that is not a status in ``key``: it is replaced at
        the next write (the caller reconciles the application)."""
        with self._lock:
            self._garbage[key] = revision

    def read(self, namespace: str, name: str) -> Doc:
        """Our status document and its revision: the newer of the watch's and our write."""
        key = keys.status_key("Application", namespace, name)
        seen = self.statuses.revision  # read first: the item is at least this new
        item = self.statuses.item(key)
        with self._lock:
            mine = self._written.get(key)
            garbage = self._garbage.get(key, 0)
        # Our write counts only until the watch delivers it: past it, the watch's item (or
        # its absence: another replica deleted it since) is the newer truth.
        if mine is not None and seen < mine[1] and (item is None
                                                    or mine[1] >= item.mod_revision):
            doc = Doc(self, key, namespace, name, *mine)
        else:
            doc = Doc(self, key, namespace, name, item.obj if item else None,
                      item.mod_revision if item else 0)
        if garbage > doc.revision:
            doc.garbage = garbage
        return doc

    def write(self, doc: Doc, new: ApplicationState) -> Retry | None:
        """Write the status if it changed (guarded by the revision read), or over garbage."""
        if not doc.garbage and doc.old is not None and doc.old.status == new:
            return None
        written = ApplicationStatus(StatusMeta(doc.name, doc.namespace, self.identity), new)
        if doc.garbage:
            log.error("%s held a value that is not a status document; replacing it", doc.key)
        ops: list[Put | Fence] = [Put(doc.key, encode(written), doc.garbage or (
            doc.revision if doc.old else 0)), *doc.fences]
        before = doc.old.status if doc.old else None
        record = copy_record(before, new, self.clock.now()) if (
            self.ledger or self.events is not None) else None
        if record is not None and self.ledger:
            record.time = self._stamps.next(record.time)
            ops.append(L.put("Application", doc.namespace, doc.name, "propagator", record))
        try:
            rev = self.group.commit(ops)
        except Deposed as exc:
            return Retry(f"{doc.key} not written: {exc}", after=0.5)
        except Conflict:
            self._stale(doc)
            return Retry(f"{doc.key} changed meanwhile", after=0.1)
        except StoreError as exc:
            return Retry(f"{doc.key} not written: {exc}")
        with self._lock:
            self._written[doc.key] = (written, rev)
            if self._garbage.get(doc.key, rev) < rev:
                del self._garbage[doc.key]
        if self.events is not None:
            obj = InvolvedObject("Application", doc.name, doc.namespace)
            for type_, reason, message in events_of(record, before, new):
                self.events.emit(obj, type_, reason, message)
        if doc.old is None or doc.old.status.state != new.state:
            log.info("application %s/%s is %s%s", doc.namespace, doc.name, new.state,
                     f" ({new.reason})" if new.reason else "")
        doc.old, doc.revision, doc.garbage = written, rev, 0
        return None

    def remove(self, doc: Doc, app: tuple[keys.Key, int] | None) -> Retry | None:
        """Delete the status and, if given as (key, revision), the application (with its
        history and rollout controls): at the revisions read, in one transaction."""
        ops: list[Put | Delete | Fence] = []
        if app is not None:  # its history and rollout controls go with it
            ops += [Delete(*app), Delete(keys.history_key(doc.namespace, doc.name)),
                    Delete(keys.rollout_key(doc.namespace, doc.name))]
        if doc.old is not None or doc.garbage:
            ops.append(Delete(doc.key, doc.garbage or doc.revision))
        if not ops:
            return None
        ops += doc.fences
        if doc.garbage:
            log.error("%s held a value that is not a status document; deleting it (%s)",
                      doc.key, "with the application" if app else "no such application")
        try:
            rev = self.group.commit(ops)
        except Deposed as exc:
            return Retry(f"{doc.key} not deleted: {exc}", after=0.5)
        except Conflict as exc:
            self._stale(doc)
            return Retry(f"changed meanwhile: {exc}", after=0.1)
        except StoreError as exc:
            return Retry(f"{doc.key} not deleted: {exc}")
        with self._lock:
            self._written[doc.key] = (None, rev)
            self._garbage.pop(doc.key, None)
        doc.old, doc.revision, doc.garbage = None, rev, 0
        return None

    def _stale(self, doc: Doc) -> None:
        """A write guarded by ``doc``'s revision was refused: what we wrote or saw as
        garbage there is no longer what the key holds, so the next read takes the
        watch's word (it retried against our own stale record before, every 0.1 s
        until the next resync)."""
        with self._lock:
            if self._written.get(doc.key, (None, -1))[1] == doc.revision:
                del self._written[doc.key]
            if doc.garbage and self._garbage.get(doc.key) == doc.garbage:
                del self._garbage[doc.key]

    def forget_written(self, upto: int) -> None:
        """Drop our record of writes the status watch has since delivered."""
        with self._lock:
            for key in [k for k, (_, rev) in self._written.items() if rev <= upto]:
                del self._written[key]
