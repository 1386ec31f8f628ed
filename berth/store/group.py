"""Group commit: guarded writes from many threads, several per etcd transaction.

A thread that commits while no other does commits at once, alone — no added
latency when writes are rare. Writes that arrive while a transaction is in
flight wait, and the next transaction carries all of them (up to etcd's limit
of operations, one write per key). Each write keeps its own guard: a
transaction that fails a guard is split, and every write is committed on its
own, so that each caller gets its own revision or its own Conflict (or
Deposed, for a write whose fence failed), exactly as if it had committed
alone. Fences (``Fence`` operations) are not keys written: writes that require
the same term go together. The thread whose write is first in line commits
for the others until its own write is done, then the next waiting one takes
over (no thread of its own).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import Histogram

from berth.store.client import Store
from berth.store.errors import Conflict, Deposed
from berth.store.ops import Fence, Op

GROUP = Histogram("berth_store_group_commit_writes", "Writes per grouped etcd transaction",
                  ["writer"], buckets=(1, 2, 4, 8, 16, 32, 64, 128))


@dataclass(slots=True)
class _Write:
    ops: Sequence[Op]
    done: bool = False
    revision: int = 0
    error: BaseException | None = None
    keys: frozenset[str] = field(default_factory=frozenset)


class GroupCommit:
    def __init__(self, store: Store, name: str, *, max_ops: int | None = None) -> None:
        self.store = store
        # fences count: each write's are in its ops
        self.max_ops = min(max_ops or store.room, store.room)
        self._sizes = GROUP.labels(name)
        self._cond = threading.Condition()
        self._waiting: deque[_Write] = deque()
        self._committing = False

    def commit(self, ops: Sequence[Op]) -> int:
        """Commit ``ops`` (all or nothing, as :meth:`Store.commit`); the revision."""
        if not ops:
            return self.store.revision()
        write = _Write(ops, keys=frozenset(op.key for op in ops if not isinstance(op, Fence)))
        with self._cond:
            self._waiting.append(write)
            while not write.done and self._committing:
                self._cond.wait()
            if write.done:
                return self._outcome(write)
            self._committing = True  # first in line: commit for everyone waiting
        try:
            while not write.done:
                with self._cond:
                    batch = self._take()
                self._commit(batch)
                with self._cond:
                    self._cond.notify_all()
            with self._cond:  # the next in line commits for those still waiting
                self._committing = False
                self._cond.notify_all()
        except BaseException:
            with self._cond:
                self._committing = False
                self._cond.notify_all()
            raise
        return self._outcome(write)

    @staticmethod
    def _outcome(write: _Write) -> int:
        if write.error is not None:
            raise write.error
        return write.revision

    def _take(self) -> list[_Write]:
        """The writes of the next transaction: in order, within the limit, a key once."""
        batch: list[_Write] = []
        taken: set[str] = set()
        size = 0
        later: deque[_Write] = deque()
        while self._waiting:
            w = self._waiting.popleft()
            if batch and (size + len(w.ops) > self.max_ops or w.keys & taken):
                later.append(w)
                continue
            batch.append(w)
            taken |= w.keys
            size += len(w.ops)
        self._waiting = later
        return batch

    def _commit(self, batch: list[_Write]) -> None:
        self._sizes.observe(len(batch))
        if len(batch) > 1:
            try:
                revision = self.store.commit([op for w in batch for op in w.ops])
            except (Conflict, Deposed):
                pass  # someone's guard or fence failed: each alone, to tell whose
            except BaseException as exc:
                for w in batch:
                    w.error, w.done = exc, True
                return
            else:
                for w in batch:
                    w.revision, w.done = revision, True
                return
        for w in batch:
            try:
                w.revision = self.store.commit(w.ops)
            except BaseException as exc:
                w.error = exc
            w.done = True


__all__ = ["GroupCommit"]
