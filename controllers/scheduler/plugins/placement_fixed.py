"""PlacementFixed: a PickFixed placement only considers the clusters it names (seed 003)."""

from __future__ import annotations

from controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Plugin,
    Snapshot,
    Status,
    Subject,
    unschedulable,
)

NAME = "PlacementFixed"


class PlacementFixed(Plugin):
    name = NAME
    cacheable = True

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return SUCCESS if subject.placement.policy == "PickFixed" else SKIP

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        if candidate.ref.name in subject.placement.cluster_names:
            return SUCCESS
        return unschedulable("not in clusterNames")
