"""TaintToleration: taints on clusters, tolerations on applications.

``NoSchedule`` and ``NoExecute`` taints that the subject does not tolerate
reject the candidate; ``PreferNoSchedule`` ones lower its score: a penalty
in [-1, 0], the candidate with the most untolerated ones at -1, so that
candidates without such taints keep exactly the score the others give them.
A cluster tainted ``NoSchedule`` after a subject was placed there is also
left: berth re-decides placements, so the Kubernetes distinction between not
scheduling and evicting collapses; use ``PreferNoSchedule`` to keep running
subjects while steering new ones away.
"""

from __future__ import annotations

from collections.abc import Iterable

from controllers.scheduler.framework import (
    SUCCESS,
    Candidate,
    CycleState,
    Plugin,
    Snapshot,
    Status,
    Subject,
    unschedulable,
)
from store.documents import Taint, Toleration

NAME = "TaintToleration"


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    for t in tolerations:
        if t.effect is not None and t.effect != taint.effect:
            continue
        if t.key is None and t.operator == "Exists":
            return True  # tolerates everything
        if t.key != taint.key:
            continue
        if t.operator == "Exists" or t.value == taint.value:
            return True
    return False


class TaintToleration(Plugin):
    name = NAME
    cacheable = True

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for taint in candidate.taints:
            if taint.effect != "PreferNoSchedule" and not tolerates(subject.tolerations, taint):
                shown = f"{taint.key}={taint.value}" if taint.value else taint.key
                return unschedulable(f"untolerated taint {shown}:{taint.effect}")
        return SUCCESS

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        return float(sum(1 for t in candidate.taints if t.effect == "PreferNoSchedule"
                         and not tolerates(subject.tolerations, t)))

    def normalize(self, state: CycleState, subject: Subject, scores: dict[str, float]) -> None:
        worst = max(scores.values(), default=0.0)
        for key, value in scores.items():
            scores[key] = -value / worst if worst else 0.0
