"""CandidateOnline: only ONLINE, undeleted candidates (Krake's first step).

A cluster is ONLINE when its status key (written by the propagator) says so;
a cluster without a status key is not. Clouds have no health state and are
always eligible unless deleted.
"""

from __future__ import annotations

from berth.controllers.scheduler.framework import (
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
from berth.store.documents import Reachability

NAME = "CandidateOnline"


class CandidateOnline(Plugin, points.Filter, points.FilterSet):
    name = NAME
    cacheable = True
    reads_metric_values = False  # its verdict follows the candidates alone

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        if candidate.deleted:
            return unschedulable("deleted")
        if candidate.state != Reachability.ONLINE:
            return unschedulable(f"not ONLINE ({candidate.state or 'no status'})")
        return SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        return fleet.cached(NAME, lambda: self._rejected(fleet))

    def _rejected(self, fleet: Fleet) -> list[tuple[Status, int]]:
        deleted = fleet.where("deleted", lambda c: c.deleted)
        out = [(unschedulable("deleted").named(NAME), deleted)] if deleted else []
        # (grouped by "" where there is no status yet: None would be in no group)
        for state, bits in fleet.group("state", lambda c: c.state or "").items():
            if state != Reachability.ONLINE and bits & ~deleted:
                out.append((unschedulable(f"not ONLINE ({state or 'no status'})").named(NAME),
                            bits & ~deleted))
        return out
