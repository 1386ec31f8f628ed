"""MetricConstraints: Krake's metric constraints, on the current raw value.

The value compared is the metric's raw value as the provider gave it (Krake's
documentation: "the value of a metric") — not Krake's weight times normalised value, which
surprises its users. A candidate that does not use the metric, or whose
value is missing, expired or errored, fails the constraint.

A constraint names a metric, or what metrics measure: a cluster that lists no
metric of that name is judged by its first metric whose definition is labelled
``berth.dev/measures: <name>`` (``renewable_share > 0.6`` over clusters that
each list the renewable share of their own grid zone).
"""

from __future__ import annotations

from functools import partial

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
from berth.controllers.scheduler.framework.helpers.expressions import parse_into, parse_metric
from berth.controllers.scheduler.framework.helpers.metric_columns import column, metric_of

NAME = "MetricConstraints"


class MetricConstraints(Plugin, points.PreFilter, points.Filter, points.FilterSet):
    name = NAME
    cacheable = True

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return parse_into(state, NAME, subject.metric_constraints, parse_metric, "metric")

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for c in state.data[NAME]:
            found = metric_of(candidate, c.metric, snapshot)
            if found is None:
                return unschedulable(f"metric constraint '{c}': no metric {c.metric}")
            ref, reading = found
            reading = reading or snapshot.metric(candidate, ref)
            if reading.value is None or reading.reason:
                why = reading.reason or "no value"
                return unschedulable(f"metric constraint '{c}': {why}")
            if not c.matches(reading.value):
                return unschedulable(f"metric constraint '{c}'")
        return SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        out: list[tuple[Status, int]] = []
        for c in state.data[NAME]:
            if not within:
                break
            col = column(fleet, c.metric, snapshot)
            lacking = within & ~col.has
            if lacking:
                out.append((unschedulable(f"metric constraint '{c}': no metric {c.metric}"),
                            lacking))
                within &= col.has
            for why, bits in col.reasons.items():
                if within & bits:
                    out.append((unschedulable(f"metric constraint '{c}': {why}"), within & bits))
                    within &= ~bits
            passing = fleet.cached(("metric-passing", c.metric, c.op, c.value),
                                   partial(col.satisfying, c.op, c.value), metric=True)
            if within & ~passing:
                out.append((unschedulable(f"metric constraint '{c}'"), within & ~passing))
                within &= passing
        return out
