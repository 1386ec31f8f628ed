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

from collections.abc import Iterable, Sequence

from berth.controllers.scheduler.framework import (
    SUCCESS,
    Candidate,
    CycleState,
    Fleet,
    Plugin,
    Snapshot,
    Status,
    Subject,
    ordinals,
    unschedulable,
)
from berth.controllers.scheduler.framework import plugin as points
from berth.store.documents import Taint, Toleration

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


def _key(tolerations: Iterable[Toleration]) -> tuple[tuple[str | None, ...], ...]:
    return tuple((t.key, t.operator, t.value, t.effect) for t in tolerations)


def _first_untolerated(taints: Sequence[Taint], tolerations: Iterable[Toleration]) -> Status:
    for taint in taints:
        if taint.effect != "PreferNoSchedule" and not tolerates(tolerations, taint):
            shown = f"{taint.key}={taint.value}" if taint.value else taint.key
            return unschedulable(f"untolerated taint {shown}:{taint.effect}")
    return SUCCESS


def _preferred_against(taints: Sequence[Taint], tolerations: Iterable[Toleration]) -> int:
    return sum(1 for t in taints if t.effect == "PreferNoSchedule"
               and not tolerates(tolerations, t))


class TaintToleration(Plugin, points.Filter, points.FilterSet, points.Score, points.ScoreSet,
                      points.Normalize):
    name = NAME
    cacheable = True
    reads_metric_values = False  # its verdict follows the candidates alone

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        return _first_untolerated(candidate.taints, subject.tolerations)

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        return float(_preferred_against(candidate.taints, subject.tolerations))

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        """The tainted candidates looked at one by one, once per set of tolerations."""
        def build() -> list[tuple[Status, int]]:
            groups: dict[Status, int] = {}
            for i in ordinals(fleet.where("hard-taints", lambda c: any(
                    t.effect != "PreferNoSchedule" for t in c.taints))):
                status = _first_untolerated(fleet.candidates[i].taints, subject.tolerations)
                if not status.ok:
                    status = status.named(NAME)
                    groups[status] = groups.get(status, 0) | (1 << i)
            return list(groups.items())
        return fleet.cached(("untolerated", _key(subject.tolerations)), build)

    def score_set(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                  snapshot: Snapshot) -> list[tuple[int, float]]:
        def build() -> dict[int, int]:
            counts: dict[int, int] = {}
            for i in ordinals(fleet.where("soft-taints", lambda c: any(
                    t.effect == "PreferNoSchedule" for t in c.taints))):
                n = _preferred_against(fleet.candidates[i].taints, subject.tolerations)
                if n:
                    counts[n] = counts.get(n, 0) | (1 << i)
            return counts
        counts = {n: bits & feasible for n, bits in fleet.cached(
            ("preferred-against", _key(subject.tolerations)), build).items() if bits & feasible}
        worst = max(counts, default=0)
        return [(bits, -n / worst) for n, bits in counts.items()]

    def normalize(self, state: CycleState, subject: Subject, scores: dict[str, float]) -> None:
        worst = max(scores.values(), default=0.0)
        for key, value in scores.items():
            scores[key] = -value / worst if worst else 0.0
