"""ClusterSelector: every ``clusterSelector`` label must match (Crossplane's workload scheduler)."""

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
    sieve,
    unschedulable,
)
from berth.controllers.scheduler.framework import plugin as points

NAME = "ClusterSelector"


class ClusterSelector(Plugin, points.Filter, points.FilterSet):
    name = NAME
    cacheable = True
    reads_metric_values = False  # its verdict follows the candidates alone

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for key, value in subject.cluster_selector.items():
            if candidate.labels.get(key) != value:
                return unschedulable(f"clusterSelector {key}={value}")
        return SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        return sieve(within, ((fleet.label(k).get(v, 0), unschedulable(f"clusterSelector {k}={v}"))
                              for k, v in subject.cluster_selector.items()))
