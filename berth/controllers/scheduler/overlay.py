"""The world as it would be after some moves: a Snapshot laid over another, for planning.

A preemption plan asks the scheduler's own ``decide`` where each victim would
go and whether the preemptor would then fit, without writing anything: an
:class:`Overlay` answers as the scheduler's cache does, but with some
candidates' free room changed (a victim's room freed where it leaves, taken
where it goes) and some candidates closed to some subjects (a victim never
goes back where it makes room: they are failed targets for it, as the
FailedTargets filter reads them). Everything else — candidates, metric values,
placements for affinity and spread — is the base's: a victim leaving is
counted by capacity alone (docs/scheduler.md "Priority and preemption").
Changes are undone to a mark, so that one overlay serves every candidate
cluster of a plan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

from berth.controllers.scheduler.framework import (
    Candidate,
    Fleet,
    MetricReading,
    Placed,
    Quota,
    Ref,
    Room,
    Subject,
)
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.store.documents import MetricRef, Target
from berth.store.documents.resources import Demand, Resources


class Overlay:
    """``base`` with rooms changed and candidates closed; one thread's (the planner's)."""

    def __init__(self, base: Snapshot) -> None:
        self.base = base
        self._delta: dict[str, Resources] = {}  # candidate key → added to its free room
        self._closed: dict[str, set[str]] = {}  # subject key → candidate keys closed to it
        self._rooms: dict[int, tuple[Fleet, Rooms]] = {}  # id(fleet) → its Rooms, overlaid
        self._log: list[tuple[str, Resources]] = []  # room changes, to undo to a mark

    # -- changing it -------------------------------------------------------------------

    def add(self, candidate: str, room: Resources) -> None:
        """``room`` more free on ``candidate`` (less, for a negative amount)."""
        self._log.append((candidate, room))
        self._set(candidate, self._delta.get(candidate, _ZERO) + room)

    def close(self, subject: str, candidate: str) -> None:
        """``candidate`` is no place for ``subject``."""
        self._closed.setdefault(subject, set()).add(candidate)

    def mark(self) -> int:
        return len(self._log)

    def since(self, mark: int) -> list[tuple[str, Resources]]:
        """The room changes made after ``mark``, in order (to make again later)."""
        return self._log[mark:]

    def undo(self, mark: int) -> None:
        """Every room change after ``mark`` undone; nothing closed any more."""
        while len(self._log) > mark:
            candidate, room = self._log.pop()
            self._set(candidate, self._delta.get(candidate, _ZERO) - room)
        self._closed.clear()

    def _set(self, candidate: str, delta: Resources) -> None:
        if delta:
            self._delta[candidate] = delta
        else:
            self._delta.pop(candidate, None)
        for fleet, rooms in self._rooms.values():
            at = fleet.by_key.get(candidate)
            if at is not None:
                rooms.set(at, self.capacity(fleet.candidates[at]))

    # -- the Snapshot --------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.base.epoch

    def capacity(self, candidate: Candidate) -> Room | None:
        room = self.base.capacity(candidate)
        delta = self._delta.get(candidate.key)
        if room is None or delta is None:
            return room
        return replace(room, free=room.free + delta)

    def rooms(self, fleet: Fleet) -> Rooms:
        found = self._rooms.get(id(fleet))
        if found is None or found[0] is not fleet:
            rooms = Rooms(list(self.base.rooms(fleet).rooms))
            for key in self._delta:
                at = fleet.by_key.get(key)
                if at is not None:
                    rooms.set(at, self.capacity(fleet.candidates[at]))
            found = self._rooms[id(fleet)] = (fleet, rooms)
        return found[1]

    def demand_on(self, subject: Subject, candidate: Candidate) -> Demand:
        return self.base.demand_on(subject, candidate)

    def demand_varies(self, subject: Subject) -> bool:
        return self.base.demand_varies(subject)

    def failed(self, subject: Subject) -> Mapping[str, float]:
        closed = self._closed.get(subject.key)
        failed = self.base.failed(subject)
        if not closed:
            return failed
        now = time.time()
        return {**failed, **dict.fromkeys(closed, now)}

    def closed(self, subject: Subject) -> set[str]:
        return self._closed.get(subject.key, set())

    def candidates(self, subject: Subject) -> list[Candidate]:
        return self.base.candidates(subject)

    def fleet(self, subject: Subject) -> Fleet:
        return self.base.fleet(subject)

    def candidate_by_key(self, key: str) -> Candidate | None:
        return self.base.candidate_by_key(key)

    def namespaces(self, kind: str) -> list[str]:
        return self.base.namespaces(kind)

    def bound_sets(self, namespace: str | None) -> list[str]:
        return self.base.bound_sets(namespace)

    def quota(self, subject: Subject) -> Quota | None:
        return self.base.quota(subject)

    def metric(self, candidate: Candidate, ref: MetricRef) -> MetricReading:
        return self.base.metric(candidate, ref)

    def current_targets(self, subject: Subject) -> list[Target]:
        return self.base.current_targets(subject)

    def placed(self, namespace: str | None,
               labels: Mapping[str, str] | None = None) -> list[Placed]:
        return self.base.placed(namespace, labels)

    def placed_on_since(self, namespace: str | None, label: str, value: str, since: int
                        ) -> tuple[int, list[tuple[Ref, int]], bool]:
        return self.base.placed_on_since(namespace, label, value, since)

    def placements_version(self, namespace: str | None, labels: Mapping[str, str]) -> int:
        return self.base.placements_version(namespace, labels)

    def placed_as(self, key: str) -> list[Target] | None:
        return self.base.placed_as(key)

    def depends_on(self, key: str) -> tuple[str, ...]:
        return self.base.depends_on(key)

    def dependents_of(self, key: str) -> list[str]:
        return self.base.dependents_of(key)

    def may_depend(self, namespace: str | None, on: str | None) -> bool:
        return self.base.may_depend(namespace, on)

    def follows(self, key: str) -> bool:
        return self.base.follows(key)


_ZERO = Resources()

__all__ = ["Overlay"]
