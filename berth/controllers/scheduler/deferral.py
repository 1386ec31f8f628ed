"""Deferrable work: the cheapest (cluster, start) before a deadline, by forecasts.

An application with ``placement.startBefore`` (or ``maxDelay`` from its
creation) and ``costMetric`` may wait. Each feasible cluster's cost is the
metric it lists that is named ``costMetric`` or whose definition is labelled
``berth.dev/measures: <costMetric>``: its value now, then the forecast the
metrics-cache published with it (each point in effect from its time on).
The plan looks at every feasible cluster's costs from now to the latest
start (the deadline less ``margin``, the time binding and applying take) and
picks the lowest, the earliest of equals. It defers only when that is at
least ``min_saving`` (a fraction) below the cheapest start now: a forecast
a few percent lower is within its error and not worth a wait. Otherwise the
work starts now, on the cheapest cluster now; clusters without a cost value
follow those with one, in rank order. While no feasible cluster has a cost
value at all (the metrics-cache starting, a provider down, a metric no
cluster lists), it waits for values until its latest start. Cluster groups come first: the cheapest
in the first group that has a feasible cluster. Once started, it is placed as any
application is: deferral decides when work starts, not where it runs later.

Costs are compared as raw values (one metric, one unit across clusters);
lower is better, negative prices included. The costs of a fleet are built
once per published metric values.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace

from berth.controllers.scheduler.framework import Candidate, Fleet, Ranked, Snapshot, Subject
from berth.controllers.scheduler.framework.helpers.replicas import GROUP_TIER
from berth.store.documents.durations import DurationError, seconds

NOW_SLACK = 1.0  # a point due within this many seconds counts as now


@dataclass(frozen=True, slots=True)
class Costs:
    """One cluster's costs over time: ``values[k]`` holds from ``times[k]`` on."""

    times: tuple[float, ...]  # times[0] is -inf: the value now
    values: tuple[float, ...]

    def window(self, now: float, latest: float) -> tuple[float, float, float]:
        """(cost now, lowest cost from now to ``latest``, the earliest start at it)."""
        i = bisect_right(self.times, now + NOW_SLACK) - 1
        cost_now = best = self.values[i]
        start = now
        for k in range(i + 1, len(self.times)):
            if self.times[k] > latest:
                break
            if self.values[k] < best:
                best, start = self.values[k], self.times[k]
        return cost_now, best, start


def latest_start(subject: Subject, margin: float) -> float | None:
    """When the subject must be bound at the latest (seconds since the epoch); None when it
    is not deferrable (or its deadline cannot be known: ``maxDelay`` without a creation
    time)."""
    p = subject.placement
    if not p.deferrable:
        return None
    if p.start_before is not None:
        deadline = p.start_before.timestamp()
    else:
        if not subject.created or p.max_delay is None:
            return None
        try:
            deadline = subject.created + seconds(p.max_delay)
        except DurationError:
            return None
    return deadline - margin


def costs_of(candidate: Candidate, metric: str, snapshot: Snapshot) -> Costs | None:
    """The candidate's costs by ``metric``; None when it has no usable value of it."""
    for ref in candidate.metrics:
        reading = snapshot.metric(candidate, ref)
        if reading.name != metric and reading.measures != metric:
            continue
        if reading.value is None or reading.reason or math.isnan(reading.value):
            return None
        times, values = [-math.inf], [reading.value]
        for point in reading.forecast:
            times.append(point.at.timestamp())
            values.append(point.value)
        return Costs(tuple(times), tuple(values))
    return None


def fleet_costs(fleet: Fleet, metric: str, snapshot: Snapshot) -> list[Costs | None]:
    """Every candidate's costs, once per fleet and published metric values."""
    return fleet.cached(("costs", metric), lambda: [
        costs_of(c, metric, snapshot) for c in fleet.candidates], metric=True)


@dataclass(slots=True)
class Plan:
    """When and where deferrable work should start."""

    ranked: list[Ranked]  # the cheapest now first; those without a cost after, by rank
    latest: float  # the latest start
    start: float | None = None  # a later start worth waiting for; None: now
    at: Ranked | None = None  # where it would start then
    cost: float | None = None  # the cost then
    cost_now: float | None = None  # the cheapest cost now


def plan(subject: Subject, ranked: Sequence[Ranked], snapshot: Snapshot, fleet: Fleet | None,
         now: float, latest: float, min_saving: float) -> Plan:
    metric = subject.placement.cost_metric or ""
    table = fleet_costs(fleet, metric, snapshot) if fleet is not None else None
    priced: list[tuple[float, int, Ranked]] = []
    unpriced: list[Ranked] = []
    best: tuple[int, float, float, int, Ranked] | None = None  # (group, cost, start, rank, where)
    for rank, r in enumerate(ranked):
        i = fleet.by_key.get(r.candidate.key) if fleet is not None else None
        costs = (table[i] if table is not None and i is not None
                 else costs_of(r.candidate, metric, snapshot))
        if costs is None:
            unpriced.append(r)
            continue
        cost_now, cheapest, start = costs.window(now, latest)
        priced.append((cost_now, rank, r))
        if best is None or (-(r.tier // GROUP_TIER), cheapest, start, rank) < best[:4]:
            best = (-(r.tier // GROUP_TIER), cheapest, start, rank, r)
    # Cluster groups stay first (a group's tier is above any cost); within a group the
    # cheapest now leads. Tiers are renumbered to the order so that selection keeps it.
    priced.sort(key=lambda p: (-(p[2].tier // GROUP_TIER), p[0], p[1]))
    order = [r for _, _, r in priced]
    order += sorted(unpriced, key=lambda r: -(r.tier // GROUP_TIER))
    out = Plan([replace(r, tier=len(order) - k, shared=False) for k, r in enumerate(order)],
               latest)
    if best is None:
        # No feasible cluster has a cost value (yet: a metrics-cache starting, a
        # provider down): wait for values up to the latest start, not start blindly.
        if now < latest and out.ranked:
            out.start, out.at = latest, out.ranked[0]
        return out
    out.cost_now = priced[0][0]
    _, cost, start, _, where = best
    if start > now and now < latest and cost < out.cost_now - min_saving * abs(out.cost_now):
        out.start, out.at, out.cost = start, where, cost
    return out


__all__ = ["Costs", "Plan", "costs_of", "latest_start", "plan"]
