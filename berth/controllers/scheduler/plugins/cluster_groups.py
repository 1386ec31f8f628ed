"""ClusterGroups: only the clusters of ``placement.clusterGroups`` are candidates.

The groups' order is a preference the selection keeps (``replicas.grouped``):
the first group is filled while it has a feasible cluster with room, the rest
overflow to the next.
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
from berth.controllers.scheduler.framework.helpers.replicas import group_bits, group_of

NAME = "ClusterGroups"
NOT_IN_GROUP = unschedulable("in no cluster group")


class ClusterGroups(Plugin, points.PreFilter, points.Filter, points.FilterSet):
    name = NAME
    cacheable = True  # the groups are part of the subject's signature

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return SUCCESS if subject.placement.cluster_groups else SKIP

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        return SUCCESS if group_of(subject, candidate) >= 0 else NOT_IN_GROUP

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        members = 0
        for g in subject.placement.cluster_groups:
            members |= group_bits(fleet, g)
        return [(NOT_IN_GROUP, within & ~members)]
