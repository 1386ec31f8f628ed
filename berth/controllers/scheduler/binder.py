"""Writing Bindings: batched into etcd transactions, each guarded by its revision.

Decisions are submitted by the scheduling thread and written by this one
thread only, up to ``batch`` per transaction (etcd's limit is 128
operations). Each write compares the Binding's mod_revision with the one the
decision was made on — captured when it is submitted, never rebuilt from a
newer revision on a retry (create_revision 0 for a new Binding); a decision
submitted while this writer's previous one for the key is in flight is
guarded by the revision that one lands at. A lost race is a conflict, never
an overwrite: a batch that conflicts is retried key by key, and the subjects
whose write conflicted are scheduled again from fresh state. A group (a
gang) is written in one transaction of its own: all or nothing.

The store the scheduler is given is fenced by its leader's term: once
another replica leads (or nobody does), every write fails in etcd
(``Deposed``), and the writer drops whatever it still holds — as it does
when it stops: queued decisions are the next leader's to make again, never
written after the fact.

A submitted decision is assumed in :class:`Decisions` at once; the writer
then records the revision it landed at, or retracts it.

The record of the moves the leader started lately (``moves``: what the pace
counts, for the next leader) is written with the next transaction that
carries a Binding — the newest one said, once — so a move's Binding never
lands without it.

In a burst, transactions follow each other at least ``SPACING`` apart (a
write that comes after a quiet spell goes at once, and so do writes that fill a
transaction, counted in operations: a Binding with its ledger record is two): over a large fleet a
decision takes long enough that a transaction written as soon as the last one
returned would carry a few Bindings only, its HTTP exchange costing the
deciding thread's core more than the Bindings did.

When etcd is out of space (its quota alarm: no write lands until an operator
compacts, defragments and disarms it), history goes first: the ledger records
are dropped from every write until one lands again, said once, and the
Bindings alone are retried every two seconds, said once too.

A Binding change is said in the log once it is written (its line made when it
was decided): the lines of one transaction go to logging as one record
(:class:`Lines`), so logging's own cost is paid once per transaction, not once
per Binding.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import Counter, Histogram

from berth.controllers.runtime.observe import Labelled, Lines
from berth.controllers.scheduler.decisions import Token
from berth.controllers.scheduler.subjects import compact_binding
from berth.controllers.scheduler.views import BindingView
from berth.store import (
    Conflict,
    Delete,
    Deposed,
    NoSpace,
    Put,
    Store,
    StoreError,
    encode,
    keys,
)
from berth.store.documents import Binding

log = logging.getLogger(__name__)

WRITES = Counter("berth_scheduler_binding_writes_total", "Bindings written", ["result"])
_WRITES = Labelled(WRITES)
BATCH = Histogram("berth_scheduler_binding_batch_size", "Bindings per transaction",
                  buckets=(1, 2, 4, 8, 16, 32, 64, 128))
MAX_GROUP = 128
ABSORBED = 8  # ledger records a write carries at most (its own and those it replaced)
SPACING = 0.005  # seconds from one transaction's end to the next one's start, in a burst


class Assumed(Protocol):
    """What the writer tells of its writes (:class:`~.decisions.Decisions`)."""

    def assume(self, key: str, doc: BindingView | None, encoded: bytes | None = None
               ) -> Token: ...

    def written(self, key: str, token: Token, revision: int) -> None: ...

    def retract(self, key: str, token: Token) -> None: ...


@dataclass(slots=True, init=False)
class Write:
    """A Binding to write, or to delete (``value`` None), for ``subject_key``.

    The document is encoded when the write is made, on the deciding thread: the
    queue holds its bytes and what the scheduler reads back of it, not the
    document. Its explanation — most of its objects — is freed at once rather
    than living until its transaction, through the collector's young
    generations."""

    subject_key: str
    binding_key: keys.Key
    value: bytes | None  # the encoded Binding (None: delete it)
    view: BindingView | None  # what is assumed until the watch shows it (compacted)
    enqueued: float = 0.0
    token: Token | None = None
    base: int = 0  # the Binding's revision the decision was made on (0: none stored)
    follows: Write | None = None  # our own write of the key in flight when submitted
    said: str | None = None  # the log line saying the change, once written
    # The ledger's records of the change, written with it: one, or more when this
    # decision replaced others of the key before they were written (they were made).
    records: tuple[Put, ...] = ()
    # What an observer is told once it is written (type, reason, message): an event.
    events: tuple[tuple[str, str, str], ...] = ()

    def __init__(self, subject_key: str, binding_key: keys.Key, doc: Binding | None,
                 said: str | None = None, record: Put | None = None,
                 event: tuple[str, str, str] | None = None) -> None:
        self.subject_key = subject_key
        self.binding_key = binding_key
        self.value = encode(doc) if doc is not None else None
        # as the cache keeps it: the watch's echo of it is kept as it is (not made again)
        self.view = compact_binding(binding_key, BindingView.of(doc)) if doc is not None else None
        self.enqueued = 0.0
        self.token = None
        self.base = 0
        self.follows = None
        self.said = said
        self.records = (record,) if record is not None else ()
        self.events = (event,) if event is not None else ()

    @property
    def ops(self) -> int:
        """The transaction operations it takes."""
        return 1 + len(self.records)

    def absorb(self, older: Write) -> None:
        """Take over the records of an older write of the key this one replaces (the newest
        :data:`ABSORBED` of them: a key decided again and again while etcd is away must
        not grow a write past a transaction)."""
        if older.records:
            self.records = (older.records + self.records)[-ABSORBED:]
            self.events = (older.events + self.events)[-ABSORBED:]


class BindingWriter:
    def __init__(self, store: Store, decisions: Assumed, seen: Callable[[str], int], *,
                 batch: int = 0, retry: Callable[[str], None],
                 say: Callable[[Lines], object] | None = None,
                 written: Callable[[Write], None] | None = None) -> None:
        self.store = store
        self.decisions = decisions
        self.seen = seen  # binding key → the revision the watch last delivered
        # operations a transaction carries: a fenced store's fence takes one of etcd's,
        # the record of moves one more
        self.room = store.room - 1
        self.batch = min(batch, self.room) if batch > 0 else self.room
        self.retry = retry  # schedule the subject again
        self.say = say  # logs the lines of the Bindings written
        self.written = written  # told of each write that landed (its events)
        self._said: list[str] = []  # the writer thread's own: lines of what it wrote
        self._pending: dict[str, Write] = {}
        self._groups: deque[list[Write]] = deque()
        self._revisions: dict[str, int] = {}  # binding key → revision we last wrote (ours)
        self._in_flight: dict[str, Write] = {}  # binding key → our write being committed
        self._deposed = False  # our term is over: nothing more is written
        self._full = False  # etcd refused a write for want of space (the writer thread's)
        # Writes whose commit may have happened (the answer was lost: etcd restarting):
        # before one is tried again, etcd is asked whether it already holds it.
        self._uncertain: dict[str, Write] = {}  # the writer thread's own
        self._moves: tuple[int, bytes] | None = None  # the newest record of moves said
        self._moves_sent = 0  # the writer thread's: the record the last transaction carried
        self._moves_written = 0  # ... and the newest that landed
        self._cond = threading.Condition()
        self._stop = False
        self._worker: threading.Thread | None = None

    # -- the scheduling thread's side -------------------------------------------------

    def submit(self, write: Write) -> None:
        """Write ``write`` soon; a newer decision for the same key replaces it."""
        self._assume(write)
        with self._cond:
            if self._stop or self._deposed:
                self._drop([write])
                return
            self._guard(write)
            replaced = self._pending.get(write.binding_key)
            if replaced is not None:
                write.absorb(replaced)
            self._pending[write.binding_key] = write
            self._cond.notify()

    def submit_group(self, writes: list[Write]) -> None:
        """Write ``writes`` in one transaction (a gang): all bound, or all retried."""
        if not writes:
            return
        if sum(w.ops for w in writes) > self.room >= len(writes):
            log.warning("a group of %d Bindings and their ledger records exceeds one "
                        "transaction: written without the records", len(writes))
            for w in writes:
                w.records = ()
        if len(writes) > min(MAX_GROUP, self.room):
            log.error("a group of %d Bindings exceeds one transaction; not bound", len(writes))
            for w in writes:
                self.retry(w.subject_key)
            return
        for w in writes:
            self._assume(w)
        with self._cond:
            if self._stop or self._deposed:
                self._drop(writes)
                return
            for w in writes:
                self._guard(w)
                replaced = self._pending.pop(w.binding_key, None)
                if replaced is not None:
                    w.absorb(replaced)
            self._groups.append(writes)
            self._cond.notify()

    def moves(self, value: bytes) -> None:
        """Write ``value``, the record of the moves started, with the next transaction:
        the writes submitted after this land with it, or after it."""
        with self._cond:
            self._moves = ((self._moves[0] if self._moves else 0) + 1, value)

    def _assume(self, write: Write) -> None:
        write.enqueued = time.monotonic()
        write.token = self.decisions.assume(write.binding_key, write.view, write.value)

    def _guard(self, write: Write) -> None:
        """The revision ``write`` was decided on (under the lock): as stored, or as this
        writer last wrote it — or, if our write of the key is in flight, whatever that
        one lands at."""
        key = write.binding_key
        write.base = max(self.seen(key), self._revisions.get(key, 0))
        write.follows = self._in_flight.get(key)

    # -- the writer thread ---------------------------------------------------------------

    def start(self) -> None:
        self._worker = threading.Thread(target=self.run, name="binding-writer", daemon=True)
        self._worker.start()

    def stop(self) -> None:
        """Stop; what is not written yet is dropped (the next leader decides it again)."""
        with self._cond:
            self._stop = True
            self._drop(self._take_all())
            self._cond.notify_all()
        if self._worker is not None:
            self._worker.join(timeout=10)

    def _take_all(self) -> list[Write]:
        writes = list(self._pending.values()) + [w for g in self._groups for w in g]
        self._pending.clear()
        self._groups.clear()
        return writes

    def _drop(self, writes: list[Write]) -> None:
        """Forget decisions that will not be written (under the lock)."""
        if writes:
            log.info("%d Binding decisions not written: %s", len(writes),
                     "no longer leading" if self._deposed else "stopping")
        for w in writes:
            if w.token is not None:
                self.decisions.retract(w.binding_key, w.token)

    def alive(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    @property
    def out_of_space(self) -> bool:
        """etcd refused the last write for want of space (its quota alarm)."""
        return self._full

    def _stopping(self) -> bool:
        """Stopping (a shutdown, or leadership lost): a failed write is not retried, so a
        replica that no longer leads never writes behind the next leader's back."""
        with self._cond:
            return self._stop

    def idle(self) -> bool:
        with self._cond:
            return not self._pending and not self._groups

    def run(self) -> None:
        ended = 0.0  # when the last transaction returned
        while True:
            with self._cond:
                while not self._pending and not self._groups and not self._stop:
                    self._cond.wait()
                spaced = ended + SPACING  # more decisions join what waits meanwhile
                while (not self._stop and not self._groups and not self._fills()
                       and (left := spaced - time.monotonic()) > 0):
                    self._cond.wait(left)
                if self._stop:
                    return
                group = self._groups.popleft() if self._groups else None
                writes: list[Write] = []
                if group is None:
                    writes = self._take()
                for w in group or writes:
                    self._in_flight[w.binding_key] = w
            try:
                if group is not None:
                    self._commit_group(group)
                else:
                    self._commit(writes)
            except Deposed as exc:
                self._deposed_by(exc, group or writes)
            except Exception:  # a bug must not stop every future write
                log.exception("writing %d Bindings failed unexpectedly; deciding again",
                              len(group or writes))
                for w in group or writes:
                    self._failed(w)
            finally:
                ended = time.monotonic()
                with self._cond:
                    for w in group or writes:
                        if self._in_flight.get(w.binding_key) is w:
                            del self._in_flight[w.binding_key]
                if self._said:
                    said, self._said = self._said, []
                    if self.say is not None:
                        self.say(Lines(said))

    def _fills(self) -> bool:
        """The pending writes fill a transaction (under the lock), counted as etcd counts:
        in operations, each Binding's and its ledger records'."""
        ops = 0
        for w in self._pending.values():
            ops += w.ops
            if ops >= self.batch:
                return True
        return False

    def _take(self) -> list[Write]:
        """The oldest pending writes that fit in one transaction (under the lock); the first
        always, with no more of its records than fit (``bind_batch`` 1 takes none)."""
        writes: list[Write] = []
        room = self.batch
        for w in self._pending.values():
            if w.ops > room and not writes:
                w.records = w.records[max(0, len(w.records) - (room - 1)):]
            if w.ops > room:
                break
            room -= w.ops
            writes.append(w)
        for w in writes:
            del self._pending[w.binding_key]
        return writes

    def _deposed_by(self, exc: Deposed, writes: list[Write]) -> None:
        """Our term ended: nothing we hold is ours to write any more."""
        with self._cond:
            self._deposed = True
            dropped = writes + self._take_all()
        log.error("scheduler: %s; %d Binding decisions dropped, none written: whoever leads "
                  "now decides them", exc, len(dropped))
        for w in dropped:
            if w.token is not None:
                self.decisions.retract(w.binding_key, w.token)

    def _ops(self, writes: list[Write]) -> list[Put | Delete]:
        """The writes, each guarded by the revision its decision was made on (their ledger
        records with them, unless etcd is full)."""
        ops: list[Put | Delete] = []
        for w in writes:
            if self._full:
                w.records = ()
            if w.value is None:
                ops.append(Delete(w.binding_key, w.base))  # 0: only if still absent
            else:
                ops.append(Put(w.binding_key, w.value, w.base))
            ops.extend(w.records)
        with self._cond:
            moves = self._moves
        self._moves_sent = 0
        if moves is not None and moves[0] > self._moves_written:
            ops.append(Put(keys.SCHEDULER_MOVES, moves[1], None))  # the leader's alone
            self._moves_sent = moves[0]
        return ops

    def _landed_txn(self, revision: int) -> int:
        """The transaction just made landed: so did the record of moves it carried."""
        self._moves_written = max(self._moves_written, self._moves_sent)
        return revision

    def _commit_group(self, writes: list[Write]) -> None:
        try:
            revision = self._landed_txn(self.store.commit(self._ops(writes)))
        except Deposed:
            raise
        except StoreError as exc:
            if not isinstance(exc, Conflict):  # the answer may be lost, not the commit
                self._uncertain.update((w.binding_key, w) for w in writes)
                if not self._landed(writes):
                    return  # one transaction: all of it landed
            log.warning("binding a group of %d failed (%s); deciding again", len(writes), exc)
            for w in writes:
                self._failed(w)
            return
        BATCH.observe(len(writes))
        for w in writes:
            self._done(w, revision)

    def _landed(self, writes: list[Write]) -> list[Write]:
        """Of ``writes``, those still to do: a retry whose first attempt did land is done."""
        todo: list[Write] = []
        for w in writes:
            if self._uncertain.pop(w.binding_key, None) is not w:
                todo.append(w)
                continue
            try:
                kv = self.store.get(w.binding_key)
            except StoreError:
                todo.append(w)
                continue
            if w.value is not None and kv is not None and kv.value == w.value:
                self._done(w, kv.mod_revision)  # it was written: not again
            else:  # (a delete that landed conflicts on retry, and is decided again)
                todo.append(w)
        return todo

    def _commit(self, writes: list[Write]) -> None:
        writes = self._landed(writes)
        if not writes:
            return
        try:
            revision = self._landed_txn(self.store.commit(self._ops(writes)))
        except Conflict:
            for w in writes:
                self._commit_one(w)
            return
        except Deposed:
            raise
        except NoSpace as exc:
            self._out_of_space(writes, exc)
            return
        except StoreError as exc:
            if self._stopping():
                log.warning("%d Bindings not written (%s): stopping; whoever leads next "
                            "decides them again", len(writes), exc)
                return
            log.warning("writing %d Bindings failed (%s); retrying", len(writes), exc)
            self._uncertain.update((w.binding_key, w) for w in writes)
            time.sleep(0.5)
            self._requeue(writes)
            return
        BATCH.observe(len(writes))
        for w in writes:
            self._done(w, revision)

    def _out_of_space(self, writes: list[Write], exc: NoSpace) -> None:
        """etcd is full: drop history first (the writes' ledger records), say so once, and
        try the Bindings again in a while (nothing landed: refused, not lost)."""
        if not self._full:
            self._full = True
            log.error("etcd is out of space (%s): ledger records are dropped and Bindings "
                      "retried every 2 s until it takes writes again; compact, defragment "
                      "and disarm its alarm (docs/operations.md)", exc)
        for w in writes:
            w.records = ()
        if not self._stopping():
            time.sleep(2.0)
            self._requeue(writes)

    def _commit_one(self, w: Write) -> None:
        try:
            revision = self._landed_txn(self.store.commit(self._ops([w])))
        except Conflict as exc:
            WRITES.labels("conflict").inc()
            log.info("Binding %s: %s; deciding again", w.binding_key, exc)
            self._failed(w)
            return
        except Deposed:
            raise
        except NoSpace as exc:
            self._out_of_space([w], exc)
            return
        except StoreError as exc:
            if self._stopping():
                log.warning("Binding %s not written (%s): stopping", w.binding_key, exc)
                return
            log.warning("Binding %s: %s; retrying", w.binding_key, exc)
            self._uncertain[w.binding_key] = w
            self._requeue([w])
            return
        self._done(w, revision)

    def _requeue(self, writes: list[Write]) -> None:
        with self._cond:
            for w in writes:
                newer = self._pending.setdefault(w.binding_key, w)  # unless a newer came
                if newer is not w:
                    newer.absorb(w)

    def _failed(self, w: Write) -> None:
        if w.token is not None:
            self.decisions.retract(w.binding_key, w.token)
        with self._cond:
            self._revisions.pop(w.binding_key, None)
        self.retry(w.subject_key)

    def _done(self, w: Write, revision: int) -> None:
        if self._full:
            self._full = False
            log.warning("etcd takes writes again: ledger records are written again")
        _WRITES("deleted" if w.value is None else "written").inc()
        if w.said is not None:
            self._said.append(w.said)
        if w.events and self.written is not None:
            self.written(w)
        with self._cond:
            if w.value is None:
                self._revisions.pop(w.binding_key, None)
            else:
                self._revisions[w.binding_key] = revision
            nxt = self._pending.get(w.binding_key)
            if nxt is not None and nxt.follows is w:  # decided with ours assumed: on top
                nxt.base, nxt.follows = (0 if w.value is None else revision), None
            for g in self._groups:
                for n in g:
                    if n.follows is w:
                        n.base, n.follows = (0 if w.value is None else revision), None
        if w.token is not None:
            self.decisions.written(w.binding_key, w.token, revision)
