"""CustomResources: the candidate must serve every ``<plural>.<group>`` required.

A cluster serves what its spec declares (as in Krake) plus what the
propagator discovered from its CRDs (its status key).
"""

from __future__ import annotations

from functools import partial
from itertools import combinations

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

NAME = "CustomResources"


def _serves(resource: str, candidate: Candidate) -> bool:
    return resource in candidate.custom_resources


class CustomResources(Plugin, points.Filter, points.FilterSet):
    name = NAME
    cacheable = True
    reads_metric_values = False  # its verdict follows the candidates alone

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        missing = [r for r in subject.custom_resources if r not in candidate.custom_resources]
        if missing:
            return unschedulable(f"custom resource {', '.join(missing)} not served")
        return SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        wanted = list(dict.fromkeys(subject.custom_resources))
        serving = {r: fleet.where(("serves", r), partial(_serves, r)) for r in wanted}
        lacking = 0
        for r in wanted:
            lacking |= within & ~serving[r]
        if not lacking:
            return []
        # Group the lacking candidates by exactly which resources they miss.
        out: list[tuple[Status, int]] = []
        for size in range(1, len(wanted) + 1):
            for missing in combinations(wanted, size):
                bits = lacking
                for r in wanted:
                    bits &= ~serving[r] if r in missing else serving[r]
                if bits:
                    shown = [r for r in subject.custom_resources if r in missing]
                    out.append((unschedulable(f"custom resource {', '.join(shown)} not served"),
                                bits))
        return out
