"""DependsOn: an application goes where its dependencies are placed (docs/order.md).

Each application ``spec.dependsOn`` names must already be placed (its Binding,
as decided, names clusters); a candidate passes when every one of them is placed
on it. As Fleet's and Flux's ``dependsOn``, a dependency comes first: the
propagator applies the dependent's copy on a cluster once the dependency's copy
there is available, so placing the dependent anywhere else would leave it
waiting there for good. An application on a loop of dependencies is placed
nowhere, the loop named. A dependency that is placed nowhere (yet) makes the
dependent Unschedulable, saying which; the scheduler decides it again when the
dependency's Binding changes.
"""

from __future__ import annotations

from berth.controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Fleet,
    Plugin,
    Snapshot,
    Status,
    Subject,
    unschedulable,
)
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.types import candidate_key
from berth.store import keys
from berth.store.dependencies import cycle, named
from berth.store.documents.reasons import listed

NAME = "DependsOn"


def _owner(key: str) -> str:
    ref = keys.parse_key(key)
    return f"{ref.namespace}/{ref.name}"


class DependsOn(Plugin, points.PreFilter, points.Filter, points.FilterSet):
    name = NAME

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        if not subject.depends_on:
            return SKIP
        loop = cycle(subject.key, snapshot.depends_on)
        if loop is not None:
            return unschedulable(f"on a loop of dependencies: {named(loop)}")
        where: dict[str, set[str]] = {}
        nowhere = []
        for dep in subject.depends_on:
            targets = snapshot.placed_as(dep)
            if not targets:
                nowhere.append(_owner(dep))
                continue
            where[_owner(dep)] = {candidate_key(t.kind, t.namespace, t.name) for t in targets}
        if nowhere:
            return unschedulable(f"its dependencies are placed nowhere yet: {listed(nowhere)}")
        state.data[NAME] = where
        return SUCCESS

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        where: dict[str, set[str]] = state.data[NAME]
        lacking = [owner for owner, on in where.items() if candidate.key not in on]
        return unschedulable(f"its dependency {listed(lacking)} is not placed here") if (
            lacking) else SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        out: list[tuple[Status, int]] = []
        where: dict[str, set[str]] = state.data[NAME]
        for owner, on in where.items():
            passing = 0
            for key in on:
                i = fleet.by_key.get(key)
                if i is not None:
                    passing |= 1 << i
            failed = within & ~passing
            if failed:
                out.append((unschedulable(f"its dependency {owner} is not placed here"),
                            failed))
                within &= passing
        return out
