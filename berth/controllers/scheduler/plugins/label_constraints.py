"""LabelConstraints: Krake's label constraints on the candidates' labels.

Expressions are parsed in pre-filter; one that does not parse makes the
subject unresolvable with a reason quoting it (it cannot fit anywhere until
the user fixes it), never a crash.
"""

from __future__ import annotations

from functools import lru_cache

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
from berth.controllers.scheduler.framework.helpers.expressions import parse_into, parse_label
from berth.store.constraints import LabelConstraint, Op

NAME = "LabelConstraints"


class LabelConstraints(Plugin, points.PreFilter, points.Filter, points.FilterSet):
    name = NAME
    cacheable = True
    reads_metric_values = False  # its verdict follows the candidates alone

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return parse_into(state, NAME, subject.label_constraints, parse_label, "label")

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for c in state.data[NAME]:
            if not c.matches(candidate.labels):
                return _rejection(c)
        return SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        return sieve(within, ((_matching(fleet, c), _rejection(c)) for c in state.data[NAME]))


@lru_cache(maxsize=8192)
def _rejection(c: LabelConstraint) -> Status:
    return unschedulable(f"label constraint '{c}'").named(NAME)


def _matching(fleet: Fleet, c: LabelConstraint) -> int:
    """The candidates whose labels satisfy ``c`` (a missing label never does)."""
    named = fleet.label_in(c.label, c.values)
    if c.op in (Op.EQ, Op.IN):
        return named
    return fleet.has_label(c.label) & ~named
