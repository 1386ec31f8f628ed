"""LabelConstraints: seed 000's label constraints on the candidates' labels.

Expressions are parsed in pre-filter; one that does not parse makes the
subject unresolvable with a reason quoting it (it cannot fit anywhere until
the user fixes it), never a crash.
"""

from __future__ import annotations

from functools import lru_cache

from controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Plugin,
    Snapshot,
    Status,
    Subject,
    unresolvable,
    unschedulable,
)
from store.constraints import ConstraintError, LabelConstraint

NAME = "LabelConstraints"


@lru_cache(maxsize=4096)
def parse(expression: str) -> LabelConstraint:
    return LabelConstraint.parse(expression)


class LabelConstraints(Plugin):
    name = NAME
    cacheable = True

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        if not subject.label_constraints:
            return SKIP
        try:
            state.data[NAME] = [parse(e) for e in subject.label_constraints]
        except ConstraintError as exc:
            return unresolvable(f"invalid label constraint: {exc}")
        return SUCCESS

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for c in state.data[NAME]:
            if not c.matches(candidate.labels):
                return unschedulable(f"label constraint '{c}'")
        return SUCCESS
