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

The other way round, an application with ``placement.followDependents`` goes
where the applications that depend on it are placed (shared configuration
following its users, Karmada's ``propagateDeps``): its candidates are their
clusters, and they are not held back by it (it would wait for them, and they for
it). It is decided again when one of their Bindings changes.
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
        follows = subject.placement.follow_dependents
        if not subject.depends_on and not follows:
            return SKIP
        loop = cycle(subject.key, snapshot.depends_on)
        if loop is not None:
            return unschedulable(f"on a loop of dependencies: {named(loop)}")
        where: dict[str, set[str]] = {}  # why → the candidates that pass it
        nowhere = []
        own = subject.ref.namespace
        for dep in subject.depends_on:
            on = keys.parse_key(dep).namespace
            if not snapshot.may_depend(own, on):
                return unschedulable(f"may not depend on {_owner(dep)}: the policy of "
                                     f"namespace {on} does not name {own} among its "
                                     "dependents")
            if snapshot.follows(dep):
                continue  # it goes where this one goes, not the other way round
            targets = snapshot.placed_as(dep)
            if not targets:
                nowhere.append(_owner(dep))
                continue
            where[f"its dependency {_owner(dep)} is not placed here"] = {
                candidate_key(t.kind, t.namespace, t.name) for t in targets}
        if nowhere:
            return unschedulable(f"its dependencies are placed nowhere yet: {listed(nowhere)}")
        if follows:
            users = {candidate_key(t.kind, t.namespace, t.name)
                     for d in snapshot.dependents_of(subject.key)
                     if snapshot.may_depend(keys.parse_key(d).namespace, own)
                     for t in snapshot.placed_as(d) or ()}
            if not users:
                return unschedulable("it follows its dependents, and none is placed yet")
            where["no application that depends on it is placed here"] = users
        state.data[NAME] = where
        return SUCCESS

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        where: dict[str, set[str]] = state.data[NAME]
        why = next((why for why, on in where.items() if candidate.key not in on), "")
        return unschedulable(why) if why else SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        out: list[tuple[Status, int]] = []
        where: dict[str, set[str]] = state.data[NAME]
        for why, on in where.items():
            passing = 0
            for key in on:
                i = fleet.by_key.get(key)
                if i is not None:
                    passing |= 1 << i
            failed = within & ~passing
            if failed:
                out.append((unschedulable(why), failed))
                within &= passing
        return out
