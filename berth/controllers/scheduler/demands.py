"""What an application asks of one cluster, as the overrides that select it make it.

The propagator renders each cluster's copy with the Overrides and
GlobalOverrides that select the application and the cluster
(docs/propagator.md "Overrides"); a ``patch`` rule can change a workload's
replicas or requests there, an ``annotations`` rule what berth reads of them.
So the scheduler counts, per cluster, the demand of the workloads as those
rules make them (:meth:`Demands.on`): the same ``render`` on the application's
workload objects alone (``Subject.workloads``, :mod:`packed`), with only the rules that can
change demand — patches of those objects, annotations. Rules of other kinds
(image, command, args, env, labels) never change what a Pod asks for. A
workload's replica share of a divided application is set after the overrides,
as the propagator sets it: the share wins over an override's replicas, an
override's requests count per replica. A copy that cannot be rendered for a
cluster (a label its rules name is missing: the propagator does not apply it
there) counts as written.

Kept per application and cluster until the application, an override or the
cluster's labels change; for any thread (one lock): decisions read it while
deciding, the placements' index while counting what each placement asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgspec

from berth.controllers.runtime import Event, Informer
from berth.controllers.scheduler.framework import Candidate, Subject
from berth.controllers.scheduler.packed import unpack
from berth.store.documents.overrides import GlobalOverride, Override
from berth.store.documents.render import RenderError, Where, render, selects_application
from berth.store.documents.resources import Demand, QuantityError, demand

_DECODE = msgspec.json.Decoder().decode


class Demands:
    """The overrides of two informers, and what they make each application ask."""

    def __init__(self, overrides: Informer[Override], globals_: Informer[GlobalOverride],
                 on_change: Callable[[], None] | None = None) -> None:
        self._sources: tuple[Informer[Any], ...] = (globals_, overrides)
        self._lock = threading.Lock()
        self._version = 0  # bumped by every change to an override
        self._listed: tuple[int, list[Override]] = (-1, [])
        # subject key → ((generation, version, labels), selecting overrides, made: cluster
        # key and labels → demand)
        self._memo: dict[str, tuple[tuple[int, int, int], tuple[Override, ...],
                                    dict[tuple[str, Any], Demand]]] = {}
        self._on_change = on_change
        for inf in self._sources:
            inf.add_handler(self._changed)

    def _changed(self, event: Event[Any]) -> None:
        with self._lock:
            self._version += 1
            self._memo.clear()
        # Told once the overrides are listed whole (the cache's sync), not at each of them.
        if self._on_change is not None and all(inf.synced.is_set() for inf in self._sources):
            self._on_change()

    def _overrides(self) -> list[Override]:
        """Every override with rules that can change demand (lock held)."""
        version, listed = self._listed
        if version != self._version:
            listed = [_relevant(i.obj) for inf in self._sources for i in inf.items()]
            listed = [o for o in listed if o.spec.rules]
            self._listed = (self._version, listed)
        return listed

    def _selecting(self, subject: Subject
                   ) -> tuple[tuple[Override, ...], dict[tuple[str, Any], Demand]]:
        """The overrides selecting ``subject`` and its memo (lock held)."""
        stamp = (subject.generation, self._version, id(subject.labels))
        hit = self._memo.get(subject.key)
        if hit is None or hit[0] != stamp:
            ns, name = subject.ref.namespace or "", subject.ref.name
            chosen = tuple(o for o in self._overrides()
                           if selects_application(o, ns, name, subject.labels))
            hit = self._memo[subject.key] = (stamp, chosen, {})
        return hit[1], hit[2]

    def any(self) -> bool:
        """Whether any override has a rule that can change what is asked."""
        with self._lock:
            return bool(self._overrides())

    def varies(self, subject: Subject) -> bool:
        """Whether an override may make ``subject`` ask something else of some cluster."""
        if not subject.workloads:
            return False
        with self._lock:
            return bool(self._overrides()) and bool(self._selecting(subject)[0])

    def on(self, subject: Subject, candidate: str, where: Where) -> Demand:
        """The Demand of ``subject``'s workloads on ``candidate`` (its key; ``where``: its
        name and labels), rendered."""
        if not subject.workloads:
            return subject.demand
        with self._lock:
            if not self._overrides():
                return subject.demand
            chosen, made = self._selecting(subject)
            if not chosen:
                return subject.demand
            key = (candidate, tuple(sorted(where.labels.items())))
            found = made.get(key)
            if found is None:
                found = made[key] = _rendered(subject, chosen, where)
            return found


def _relevant(o: Override) -> Override:
    """``o`` with only the rules that can change demand: patches, annotations."""
    rules = [r for r in o.spec.rules if r.patch is not None or r.annotations is not None]
    if len(rules) == len(o.spec.rules):
        return o
    return msgspec.structs.replace(o, spec=msgspec.structs.replace(o.spec, rules=rules))


def _rendered(subject: Subject, chosen: tuple[Override, ...], where: Where) -> Demand:
    """What the workloads ask once the overrides render them for ``where``."""
    bodies = [_DECODE(unpack(b)) for b in subject.workloads]
    present = {(b.get("kind"), (b.get("metadata") or {}).get("name")) for b in bodies}
    usable = []
    for o in chosen:  # patches of objects that are no workload change no demand
        rules = [r for r in o.spec.rules if r.patch is None
                 or (r.patch.object.kind, r.patch.object.name) in present]
        if rules:
            usable.append(o if len(rules) == len(o.spec.rules) else msgspec.structs.replace(
                o, spec=msgspec.structs.replace(o.spec, rules=rules)))
    try:
        made = render(bodies, usable, where)
        return demand(made.bodies)
    except (RenderError, QuantityError):
        return subject.demand


def where(candidate: Candidate) -> Where:
    """The cluster a candidate is, as overrides select and render for it."""
    return Where(candidate.ref.name, candidate.ref.namespace, candidate.labels)


__all__ = ["Demands", "where"]
