"""What plugins may read of the world: the Snapshot the scheduler's cache implements.

Apart from ``types`` (the values a decision is made of), so that the fleet's and
the rooms' modules, which are built of those values, and this Protocol, which
hands them out, import in one direction only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from berth.controllers.scheduler.framework.fleet import Fleet
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.controllers.scheduler.framework.types import (
    Candidate,
    MetricReading,
    Placed,
    Quota,
    Ref,
    Room,
    Subject,
)
from berth.store.documents import MetricRef, Target
from berth.store.documents.resources import Demand


class Snapshot(Protocol):
    """What plugins may read of the world; the cache implements it."""

    @property
    def epoch(self) -> int:
        """Changes whenever candidates, their status or metric values change."""
        ...

    def candidates(self, subject: Subject) -> list[Candidate]: ...

    def fleet(self, subject: Subject) -> Fleet:
        """The subject's candidates, frozen, with their bitset indexes (one per epoch)."""
        ...

    def candidate_by_key(self, key: str) -> Candidate | None: ...

    def namespaces(self, kind: str) -> list[str]:
        """The namespaces that hold candidates for subjects of ``kind`` (sorted): where
        to look when a subject's own namespace has none."""
        ...

    def bound_sets(self, namespace: str | None) -> list[str]:
        """The cluster sets ``namespace``'s policy binds (docs/teams.md), as it names
        them: where else its subjects' clusters may come from."""
        ...

    def metric(self, candidate: Candidate, ref: MetricRef) -> MetricReading: ...

    def current_targets(self, subject: Subject) -> list[Target]: ...

    def failed(self, subject: Subject) -> Mapping[str, float]:
        """Candidates (by key) the subject's current generation could not become available
        on, and when that was found (seconds since the epoch): the propagator's word."""
        ...

    def capacity(self, candidate: Candidate) -> Room | None:
        """What the candidate has and has free, counting what was placed there but not
        yet reported as assumed; None when it reports no capacity."""
        ...

    def rooms(self, fleet: Fleet) -> Rooms:
        """``capacity`` of every candidate of ``fleet``, indexed by resource."""
        ...

    def demand_on(self, subject: Subject, candidate: Candidate) -> Demand:
        """What ``subject`` asks of ``candidate``: its workloads as the overrides that
        select both make them there (``subject.demand`` where none does)."""
        ...

    def demand_varies(self, subject: Subject) -> bool:
        """Whether ``demand_on`` may differ from ``subject.demand`` on some candidate."""
        ...

    def quota(self, subject: Subject) -> Quota | None:
        """The quota of ``subject``'s namespace and what the namespace's other
        placements use of it (assumed ones included); None where there is none."""
        ...

    def placed(self, namespace: str | None,
               labels: Mapping[str, str] | None = None) -> list[Placed]:
        """Placed workloads of ``namespace``; only those carrying all ``labels`` if given."""
        ...

    def placed_on_since(self, namespace: str | None, label: str, value: str, since: int
                        ) -> tuple[int, list[tuple[Ref, int]], bool]:
        """Where the placed workloads of ``namespace`` labelled ``label=value`` run, as
        changes since position ``since``: (the position now, [(target, +n or -n)],
        False); or (the position now, [(target, how many)] of all of them, True) when
        ``since`` is -1 or too old."""
        ...

    def placements_version(self, namespace: str | None, labels: Mapping[str, str]) -> int:
        """Changes whenever ``placed(namespace, labels)`` may have changed."""
        ...

    def placed_as(self, key: str) -> list[Target] | None:
        """Where the application at ``key`` is placed, as decided (assumed or seen); None
        when it has no Binding."""
        ...

    def depends_on(self, key: str) -> tuple[str, ...]:
        """The keys of the applications the application at ``key`` depends on."""
        ...

    def dependents_of(self, key: str) -> list[str]:
        """The keys of the applications that depend on the application at ``key``."""
        ...

    def may_depend(self, namespace: str | None, on: str | None) -> bool:
        """Whether applications of ``namespace`` may depend on those of ``on`` (their own,
        or another's whose policy names ``namespace`` among its ``dependents``)."""
        ...

    def follows(self, key: str) -> bool:
        """Whether the application at ``key`` is placed where its dependents are
        (``placement.followDependents``)."""
        ...


__all__ = ["Snapshot"]
