"""A metric's values over a fleet, sorted, for set-at-a-time thresholds (a helper).

``load < 5`` over 10,000 clusters is a range of the clusters sorted by their
value of ``load``: two bisects and a prefix bitset answer it. Prefixes are
kept every 64 positions (a full table would cost n² bits per metric); the
rest of a range is OR-ed in. Built once per fleet and metric values, per
metric a constraint names.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import Final

from berth.controllers.scheduler.framework.fleet import Fleet
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.types import Candidate, MetricReading
from berth.store.constraints import Op
from berth.store.documents import MetricRef

STEP: Final = 64


def metric_of(candidate: Candidate, name: str, snapshot: Snapshot,
              measures: dict[tuple[str, str | None], str] | None = None
              ) -> tuple[MetricRef, MetricReading | None] | None:
    """The metric of ``candidate`` a constraint naming ``name`` is judged by: the one
    it lists by that name (Krake's meaning), else the first it lists whose definition
    measures ``name`` (label ``berth.dev/measures``) — each cluster by its own metric
    that measures it (renewable share per grid zone). The reading when it was read.
    ``measures``: what each metric definition measures, as far as already read (a
    fleet's columns share it, so a definition is read once per metric epoch)."""
    ref = next((m for m in candidate.metrics if m.name == name), None)
    if ref is not None:
        return ref, None
    for m in candidate.metrics:
        key = (m.name, candidate.ref.namespace if m.namespaced else None)
        measure = measures.get(key) if measures is not None else None
        reading = None
        if measure is None:
            reading = snapshot.metric(candidate, m)
            measure = reading.measures
            if measures is not None:
                measures[key] = measure
        if measure == name:
            return m, reading
    return None


class MetricColumn:
    """One metric's readings over a fleet: who lacks it, who errs, who has which value."""

    __slots__ = ("fleet", "has", "nan", "order", "prefix", "reasons", "usable", "values")

    def __init__(self, fleet: Fleet, metric: str, snapshot: Snapshot) -> None:
        self.fleet = fleet
        self.has = 0  # candidates listing the metric
        self.reasons: dict[str, int] = {}  # why a value cannot be compared → candidates
        self.nan = 0
        pairs: list[tuple[float, int]] = []
        measures: dict[tuple[str, str | None], str] = fleet.cached(
            ("metric-measures",), dict, metric=True)
        for i, c in enumerate(fleet.candidates):
            found = metric_of(c, metric, snapshot, measures)
            if found is None:
                continue
            self.has |= 1 << i
            ref, reading = found
            reading = reading or snapshot.metric(c, ref)
            if reading.value is None or reading.reason:
                why = reading.reason or "no value"
                self.reasons[why] = self.reasons.get(why, 0) | (1 << i)
            elif math.isnan(reading.value):
                self.nan |= 1 << i
            else:
                pairs.append((reading.value, i))
        pairs.sort()
        self.values = [v for v, _ in pairs]
        self.order = [i for _, i in pairs]
        self.prefix = [0]
        acc = 0
        for k, i in enumerate(self.order, 1):
            acc |= 1 << i
            if k % STEP == 0:
                self.prefix.append(acc)
        self.usable = acc

    def _upto(self, k: int) -> int:
        """The candidates at the first ``k`` sorted positions."""
        bits = self.prefix[k // STEP]
        for i in self.order[k - k % STEP : k]:
            bits |= 1 << i
        return bits

    def _range(self, lo: int, hi: int) -> int:
        if lo >= hi:
            return 0
        if lo == 0:
            return self._upto(hi)
        if hi == len(self.order):
            return self.usable & ~self._upto(lo)
        return self._upto(hi) & ~self._upto(lo)

    def satisfying(self, op: Op, value: float) -> int:
        """The candidates whose comparable value satisfies ``<metric> <op> value``."""
        v = self.values
        match op:
            case Op.GT:
                return self._range(bisect_right(v, value), len(v))
            case Op.GE:
                return self._range(bisect_left(v, value), len(v))
            case Op.LT:
                return self._range(0, bisect_left(v, value))
            case Op.LE:
                return self._range(0, bisect_right(v, value))
            case Op.EQ:
                return self._range(bisect_left(v, value), bisect_right(v, value))
            case Op.NE:
                equal = self._range(bisect_left(v, value), bisect_right(v, value))
                return (self.usable & ~equal) | self.nan
        return 0


def column(fleet: Fleet, metric: str, snapshot: Snapshot) -> MetricColumn:
    return fleet.cached(("metric-column", metric), lambda: MetricColumn(fleet, metric, snapshot),
                        metric=True)


__all__ = ["MetricColumn", "column"]
