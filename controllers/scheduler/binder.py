"""Writing Bindings: batched into etcd transactions, each guarded by its revision.

Decisions are submitted by the scheduling thread and written by this one,
up to ``batch`` per transaction (etcd's limit is 128 operations). Each write
compares the Binding's mod_revision with the one last seen or written
(create_revision 0 for a new Binding): a lost race is a conflict, never an
overwrite. A batch that conflicts is retried key by key, and the subjects
whose write conflicted are scheduled again from fresh state. While a write is
pending or not yet seen on the watch, the decision is *assumed* in the cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from controllers.scheduler.cache import Cache
from controllers.scheduler.views import BindingView
from store import Conflict, Delete, Put, Store, StoreError, encode
from store.documents import Binding

log = logging.getLogger(__name__)

PENDING = 2**62  # an assumed revision no watch event can reach
WRITES = Counter("berth_scheduler_binding_writes_total", "Bindings written", ["result"])
BATCH = Histogram("berth_scheduler_binding_batch_size", "Bindings per transaction",
                  buckets=(1, 2, 4, 8, 16, 32, 64, 128))


@dataclass(slots=True)
class Write:
    subject_key: str
    binding_key: str
    doc: Binding | None  # None: delete the Binding
    enqueued: float = 0.0


class BindingWriter:
    def __init__(self, store: Store, cache: Cache, *, batch: int = 128,
                 retry: Callable[[str], None],
                 written: Callable[[Write, float], None] | None = None) -> None:
        self.store = store
        self.cache = cache
        self.batch = batch
        self.retry = retry  # schedule the subject again
        self.written = written
        self._pending: dict[str, Write] = {}
        self._revisions: dict[str, int] = {}  # binding key → revision we last wrote
        self._cond = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None

    def submit(self, write: Write) -> None:
        write.enqueued = time.monotonic()
        with self._cond:
            if write.doc is not None:
                self.cache.assumed[write.binding_key] = (BindingView.of(write.doc), PENDING)
            self._pending[write.binding_key] = write  # a newer decision replaces an older one
            self._cond.notify()

    def commit_group(self, writes: list[Write]) -> None:
        """Write ``writes`` in one transaction (a gang): all bound, or all retried."""
        if not writes:
            return
        if len(writes) > 128:
            for w in writes:
                self.retry(w.subject_key)
            log.error("a group of %d Bindings exceeds one transaction; not bound", len(writes))
            return
        with self._cond:
            for w in writes:
                self._pending.pop(w.binding_key, None)
                if w.doc is not None:
                    self.cache.assumed[w.binding_key] = (BindingView.of(w.doc), PENDING)
        try:
            revision = self.store.commit(self._ops(writes))
        except StoreError as exc:
            log.warning("binding a group of %d failed (%s); deciding again", len(writes), exc)
            with self._cond:
                for w in writes:
                    self.cache.assumed.pop(w.binding_key, None)
                    self._revisions.pop(w.binding_key, None)
            for w in writes:
                self.retry(w.subject_key)
            return
        BATCH.observe(len(writes))
        for w in writes:
            self._done(w, revision)

    def base_revision(self, binding_key: str) -> int:
        item = self.cache.bindings.cache.get(binding_key)
        seen = item.mod_revision if item else 0
        return max(seen, self._revisions.get(binding_key, 0))

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="binding-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def idle(self) -> bool:
        with self._cond:
            return not self._pending

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop and not self._pending:
                    return
                keys = list(self._pending)[: self.batch]
                writes = [self._pending.pop(k) for k in keys]
            self._commit(writes)

    def _ops(self, writes: list[Write]) -> list[Put | Delete]:
        ops: list[Put | Delete] = []
        for w in writes:
            base = self.base_revision(w.binding_key)
            if w.doc is None:
                ops.append(Delete(w.binding_key, base or None))
            else:
                ops.append(Put(w.binding_key, encode(w.doc), base))
        return ops

    def _commit(self, writes: list[Write]) -> None:
        try:
            revision = self.store.commit(self._ops(writes))
        except Conflict:
            for w in writes:
                self._commit_one(w)
            return
        except StoreError as exc:
            log.warning("writing %d Bindings failed (%s); retrying", len(writes), exc)
            time.sleep(0.5)
            with self._cond:
                for w in writes:
                    self._pending.setdefault(w.binding_key, w)
            return
        BATCH.observe(len(writes))
        for w in writes:
            self._done(w, revision)

    def _commit_one(self, w: Write) -> None:
        try:
            revision = self.store.commit(self._ops([w]))
        except Conflict as exc:
            WRITES.labels("conflict").inc()
            log.info("Binding %s: %s; deciding again", w.binding_key, exc)
            with self._cond:
                if self.cache.assumed.get(w.binding_key, (None, 0))[1] == PENDING and (
                        w.binding_key not in self._pending):
                    self.cache.assumed.pop(w.binding_key, None)
            self._revisions.pop(w.binding_key, None)
            self.retry(w.subject_key)
            return
        except StoreError as exc:
            log.warning("Binding %s: %s; retrying", w.binding_key, exc)
            with self._cond:
                self._pending.setdefault(w.binding_key, w)
            return
        self._done(w, revision)

    def _done(self, w: Write, revision: int) -> None:
        WRITES.labels("deleted" if w.doc is None else "written").inc()
        with self._cond:
            if w.doc is None:
                self._revisions.pop(w.binding_key, None)
                self.cache.assumed.pop(w.binding_key, None)
            else:
                self._revisions[w.binding_key] = revision
                if w.binding_key not in self._pending:  # not superseded meanwhile
                    self.cache.assumed[w.binding_key] = (BindingView.of(w.doc), revision)
        if self.written is not None:
            self.written(w, revision)
