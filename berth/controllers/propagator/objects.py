"""What each cluster last showed of the objects berth applied there.

The apply's answer and every drift-watch event after it (one watch per
API server and kind, ``drift.py``, its events handed to the clusters they
concern) land here: the object's generation, its
``spec`` and ``status`` undecoded, and the application its annotation names.
The applier judges an application's copies from this book (``health.py``)
when it reconciles, and is told (``on_change``) when an object's status,
generation or owner changed, so that a copy becoming available — or failing —
reaches the application's status within the watch's latency, not a poll's.

One lock; entries are immutable; the watches' thread and the apply workers
write, reconciles read. The two writers race: a watch may show the object as the
cluster changed it after the apply (its controller's status, say) before the apply's
own answer is put here. The watch is the order: what it shows is always kept, and
an apply's answer is not kept when the watch already showed the same object (its
``uid``) at a later ``resourceVersion`` (compared as numbers, as an etcd-backed API
server writes them; one that does not parse counts as newer). An object made anew —
an API server back with an empty store counts its versions from the start — has
another uid, and its answer is kept as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from berth.controllers.propagator.health import (
    JOB_DONE,
    UNKNOWN,
    Copy,
    Health,
    Observed,
    copy_of,
    judge,
)
from berth.controllers.propagator.kube import GENERATION, OWNER, KubeObject
from berth.store.documents import ClusterApplied, HealthRule, KubeObjectRef

_Where = tuple[str, KubeObjectRef]  # (cluster id, object)
# what it showed, its owner, and its (uid, resourceVersion)
_Entry = tuple[Observed, str, tuple[str, int | None]]


def version_of(obj: KubeObject) -> tuple[str, int | None]:
    """The object's uid and its ``resourceVersion`` as a number (None: none, or not a
    number)."""
    rv = obj.metadata.resourceVersion
    return obj.metadata.uid, int(rv) if rv.isdigit() else None


def _older(version: tuple[str, int | None], than: tuple[str, int | None]) -> bool:
    """The same object (one uid), seen at an earlier resourceVersion."""
    (uid, rv), (held_uid, held_rv) = version, than
    return bool(uid) and uid == held_uid and rv is not None and held_rv is not None and (
        rv < held_rv)


def observed(obj: KubeObject) -> Observed:
    """What the book keeps of ``obj``: its ``spec`` and ``status`` bytes copied, and the
    application's generation it says it was applied for. A decoded Raw is a view into
    the whole buffer it came from (the watch event, managed fields and all, or a LIST's
    whole answer), which would otherwise stay in memory with it."""
    said = obj.metadata.annotations.get(GENERATION)
    stamp = int(said) if said is not None and said.isdigit() else None
    return Observed(obj.apiVersion, obj.kind, obj.metadata.generation, obj.spec.copy(),
                    obj.status.copy(), stamp)


class Book:
    """(cluster id, object) → what the cluster last showed of it, and its owner."""

    def __init__(self, on_change: Callable[[str, str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._seen: dict[_Where, _Entry] = {}
        self.on_change = on_change  # (cluster id, owner): a change worth judging again

    def put(self, cid: str, ref: KubeObjectRef, obj: KubeObject, *, answer: bool = False
            ) -> str | None:
        """Record what the cluster showed; returns the previous owner if the object now
        names another (a takeover), else None. Tells ``on_change`` if anything that
        health depends on changed — unless it is an apply's own ``answer``, which the
        reconcile that made it judges itself, and which is not kept when a watch
        already showed the same object later."""
        now = (observed(obj), obj.metadata.annotations.get(OWNER, ""), version_of(obj))
        notify = not answer
        with self._lock:
            was = self._seen.get((cid, ref))
            if answer and was is not None and _older(now[2], was[2]):
                return None
            self._seen[(cid, ref)] = now
        if was is not None and was[0].generation == now[0].generation and bytes(
                was[0].status) == bytes(now[0].status) and was[1] == now[1] and (
                was[0].stamp == now[0].stamp):
            return None
        if self.on_change is not None and now[1] and notify:
            self.on_change(cid, now[1])
        if was is not None and was[1] and was[1] != now[1]:
            if self.on_change is not None:
                self.on_change(cid, was[1])
            return was[1]
        return None

    def drop(self, cid: str, ref: KubeObjectRef) -> str | None:
        """The object is gone from the cluster; returns who owned it, if known."""
        with self._lock:
            was = self._seen.pop((cid, ref), None)
        if was is not None and was[1] and self.on_change is not None:
            self.on_change(cid, was[1])
        return was[1] if was is not None else None

    def get(self, cid: str, ref: KubeObjectRef) -> Observed | None:
        with self._lock:
            seen = self._seen.get((cid, ref))
        return seen[0] if seen is not None else None

    def holds(self, cid: str, ref: KubeObjectRef) -> bool:
        with self._lock:
            return (cid, ref) in self._seen

    def owner(self, cid: str, ref: KubeObjectRef) -> str | None:
        """The application the object last named (None: not seen)."""
        with self._lock:
            seen = self._seen.get((cid, ref))
        return seen[1] if seen is not None else None

    def held(self, cid: str, api_version: str, kind: str) -> list[tuple[KubeObjectRef, str]]:
        """The objects of ``kind`` the book holds on ``cid``, with their owners."""
        with self._lock:
            return [(ref, seen[1]) for (c, ref), seen in self._seen.items()
                    if c == cid and ref.kind == kind and ref.api_version == api_version]

    def forget_cluster(self, cid: str) -> None:
        """A cluster handed over or gone: what it showed is no longer kept current."""
        with self._lock:
            for where in [w for w in self._seen if w[0] == cid]:
                del self._seen[where]


class Pods(Protocol):
    """What a Pod watch says of an application's pods on a cluster."""

    def trouble(self, cid: str, owner: str) -> str:
        """Why its first pod that is not Ready is not ("": all are, or not watched)."""
        ...

    def lost(self, cid: str, owner: str) -> int:
        """How many are bound to Nodes that no longer exist."""
        ...


class NoPods:
    """Pods not watched: nothing to say of them."""

    def trouble(self, cid: str, owner: str) -> str:
        return ""

    def lost(self, cid: str, owner: str) -> int:
        return 0


def judge_copy(book: Book, pods: Pods, cid: str, owner: str, have: ClusterApplied,
               rules: tuple[HealthRule, ...], now: datetime, untracked_after: float) -> Copy:
    """The copy of ``owner`` on ``cid`` as the book shows it now: each object judged per
    kind (a reading of another generation's object never counts for this one), Jobs
    done at this generation healthy. The propagator judges its push clusters' copies
    with it, an agent its own cluster's: one rule for both."""
    age = (now - have.since).total_seconds() if have.since else 0.0
    trouble, lost = pods.trouble(cid, owner), pods.lost(cid, owner)
    judged: list[tuple[KubeObjectRef, Health]] = []
    for ref in have.objects:
        if ref in have.done:
            judged.append((ref, JOB_DONE))
            continue
        seen = book.get(cid, ref)
        if seen is None:
            judged.append((ref, Health(UNKNOWN, "not observed yet")))
        elif seen.stamp is not None and seen.stamp != have.generation:
            judged.append((ref, Health(UNKNOWN, f"generation {have.generation} not "
                                       "observed yet")))
        else:
            judged.append((ref, judge(seen, age=age, pods=trouble, rules=rules,
                                      untracked_after=untracked_after, lost=lost)))
    return copy_of(judged)
