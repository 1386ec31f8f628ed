"""MetricScore: Krake's score, with stickiness, exactly.

For a candidate with metrics (every metric it lists has a usable value):

    score = (sticky_value·sticky_weight + Σ value_i·weight_i) / (sticky_weight + Σ weight_i)

with values normalised into [0, 1] by each metric's min/max. sticky_value is
1 and sticky_weight the configured weight (default 0.1) on a cluster the
subject runs on now, both 0 elsewhere. A candidate without metrics scores
``sticky_value·sticky_weight``. Candidates with metrics are preferred over
those without (a higher tier), which for a single placement is Krake's
"the clusters without metrics are filtered out". A candidate whose values
are missing, expired or errored counts as without metrics; the reason of
each metric is kept for the explanation.

The metric part of a candidate's score does not depend on the subject: it
is computed once per snapshot epoch; stickiness is a sparse per-subject
override of the one or few clusters the subject runs on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from msgspec import Meta

from berth.controllers.scheduler.framework import (
    Candidate,
    CycleState,
    Fleet,
    MetricReading,
    Plugin,
    Snapshot,
    Subject,
)
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.plugin import NoArgs
from berth.controllers.scheduler.framework.types import candidate_key


class MetricScoreArgs(NoArgs, frozen=True):
    # how much a subject's current cluster is preferred (the scheduler's stickiness_weight)
    stickiness_weight: Annotated[float, Meta(ge=0)] = 0.1


NAME = "MetricScore"


class _Base:
    __slots__ = ("described", "epoch", "readings", "sum_vw", "sum_w", "usable")

    def __init__(self, epoch: int, readings: list[MetricReading]) -> None:
        self.epoch = epoch
        self.readings = readings
        self.described: dict[str, Any] | None = None  # the explanation's entry, built once
        self.usable = bool(readings) and all(r.usable for r in readings)
        self.sum_w = sum((r.weight for r in readings), 0.0) if self.usable else 0.0
        self.sum_vw = sum(((r.normalized or 0.0) * r.weight for r in readings), 0.0) if (
            self.usable) else 0.0
        if self.usable and self.sum_w <= 0:
            self.usable = False  # all weights zero: the formula is undefined

    def score(self, sticky_value: float, sticky_weight: float) -> float:
        if not self.usable:
            return sticky_value * sticky_weight
        return (sticky_value * sticky_weight + self.sum_vw) / (sticky_weight + self.sum_w)


class MetricScore(Plugin, points.Score, points.ScoreBase, points.Tier, points.Adjust,
                  points.Describe):
    name = NAME
    cacheable = True
    Args = MetricScoreArgs

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.sticky_weight = self.typed(MetricScoreArgs).stickiness_weight
        self._bases: dict[str, _Base] = {}

    def base(self, candidate: Candidate, snapshot: Snapshot) -> _Base:
        epoch = snapshot.epoch
        b = self._bases.get(candidate.key)
        if b is None or b.epoch != epoch:
            b = _Base(epoch, [snapshot.metric(candidate, ref) for ref in candidate.metrics])
            self._bases[candidate.key] = b
        return b

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        return self.base(candidate, snapshot).score(0.0, 0.0)

    def bases(self, fleet: Fleet, snapshot: Snapshot) -> list[_Base]:
        """Every candidate's metric part, once per fleet and metric values."""
        return fleet.cached(NAME, lambda: [
            _Base(0, [snapshot.metric(c, ref) for ref in c.metrics]) for c in fleet.candidates],
            metric=True)

    def score_base(self, fleet: Fleet, snapshot: Snapshot) -> tuple[list[float], list[int]]:
        bases = self.bases(fleet, snapshot)
        return [b.score(0.0, 0.0) for b in bases], [1 if b.usable else 0 for b in bases]

    def tier(self, state: CycleState, subject: Subject, candidate: Candidate) -> int:
        b = self._bases.get(candidate.key)
        return 1 if b is not None and b.usable else 0

    def adjust(self, state: CycleState, subject: Subject, scores: Mapping[str, float],
               snapshot: Snapshot) -> dict[str, float]:
        out: dict[str, float] = {}
        if not self.sticky_weight:
            return out
        fleet = state.fleet
        for target in snapshot.current_targets(subject):
            key = candidate_key(target.kind, target.namespace, target.name)
            if key not in scores:
                continue
            i = fleet.by_key.get(key) if fleet is not None else None
            if fleet is not None and i is not None:
                b = self.bases(fleet, snapshot)[i]
            else:
                candidate = snapshot.candidate_by_key(key)
                if candidate is None:
                    continue
                b = self.base(candidate, snapshot)
            out[key] = b.score(1.0, self.sticky_weight)
        return out

    def describe(self, state: CycleState, subject: Subject, candidate: Candidate,
                 snapshot: Snapshot) -> dict[str, Any]:
        fleet = state.fleet
        i = fleet.by_key.get(candidate.key) if fleet is not None else None
        b = (self.bases(fleet, snapshot)[i] if fleet is not None and i is not None
             else self.base(candidate, snapshot))
        if b.described is not None:  # the same for every subject in this epoch
            return b.described
        metrics: dict[str, Any] = {}
        for r in b.readings:
            entry: dict[str, Any] = {"weight": r.weight}
            if r.value is not None:
                entry["value"] = r.value
            if r.normalized is not None:
                entry["normalized"] = round(r.normalized, 6)
            if r.reason:
                entry["reason"] = r.reason
            if r.message:  # why it is unusable, or how it is used (clamped, kept after an error)
                entry["message"] = r.message
            metrics[r.name] = entry
        b.described = {"metrics": metrics, "with_metrics": b.usable}
        return b.described
