"""PlacementFixed: a PickFixed placement only considers the clusters it names (Fleet)."""

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

NAME = "PlacementFixed"


class PlacementFixed(Plugin, points.PreFilter, points.Filter, points.FilterSet):
    name = NAME
    cacheable = True
    reads_metric_values = False  # its verdict follows the candidates alone

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return SUCCESS if subject.placement.policy == "PickFixed" else SKIP

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        if candidate.ref.name in subject.placement.cluster_names:
            return SUCCESS
        return unschedulable("not in clusterNames")

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        names = fleet.group("name", lambda c: c.ref.name)
        named = 0
        for n in subject.placement.cluster_names:
            named |= names.get(n, 0)
        return [(unschedulable("not in clusterNames"), within & ~named)]
