"""ClusterAffinity: required and preferred cluster affinity (Crossplane's workload scheduler).

Required: at least one of ``clusterSelectorTerms`` must hold, each term being
the AND of its expressions. Preferred: each matching term adds its weight;
the sum is normalised by the total weight into [0, 1].
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
from berth.controllers.scheduler.framework.helpers.selectors import (
    describe,
    selector_bits,
    selector_matches,
)

NAME = "ClusterAffinity"


class ClusterAffinity(Plugin, points.PreFilter, points.Filter, points.FilterSet, points.Score,
                      points.ScoreSet):
    name = NAME
    cacheable = True
    reads_metric_values = False  # its verdict follows the candidates alone

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        aff = subject.affinity.cluster_affinity if subject.affinity else None
        if aff is None:
            return SKIP
        return SUCCESS

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        aff = subject.affinity.cluster_affinity if subject.affinity else None
        required = aff.required_during_scheduling_ignored_during_execution if aff else None
        if required is None or not required.cluster_selector_terms:
            return SUCCESS
        terms = required.cluster_selector_terms
        if any(selector_matches(t.match_labels, t.match_expressions, candidate.labels)
               for t in terms):
            return SUCCESS
        wanted = " or ".join(describe(t.match_labels, t.match_expressions) for t in terms)
        return unschedulable(f"cluster affinity ({wanted})")

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        aff = subject.affinity.cluster_affinity if subject.affinity else None
        prefs = aff.preferred_during_scheduling_ignored_during_execution if aff else []
        total = sum((p.weight for p in prefs), 0.0)
        if not total:
            return 0.0
        got = sum((p.weight for p in prefs if selector_matches(
            p.preference.match_labels, p.preference.match_expressions, candidate.labels)), 0.0)
        return got / total

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        aff = subject.affinity.cluster_affinity if subject.affinity else None
        required = aff.required_during_scheduling_ignored_during_execution if aff else None
        if required is None or not required.cluster_selector_terms:
            return []
        terms = required.cluster_selector_terms
        holding = 0
        for t in terms:
            holding |= selector_bits(fleet, t.match_labels, t.match_expressions)
        failed = within & ~holding
        if not failed:
            return []
        wanted = " or ".join(describe(t.match_labels, t.match_expressions) for t in terms)
        return [(unschedulable(f"cluster affinity ({wanted})"), failed)]

    def score_set(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                  snapshot: Snapshot) -> list[tuple[int, float]]:
        aff = subject.affinity.cluster_affinity if subject.affinity else None
        prefs = aff.preferred_during_scheduling_ignored_during_execution if aff else []
        total = sum((p.weight for p in prefs), 0.0)
        if not total:
            return []
        return [(selector_bits(fleet, p.preference.match_labels, p.preference.match_expressions),
                 p.weight / total) for p in prefs if p.weight]
