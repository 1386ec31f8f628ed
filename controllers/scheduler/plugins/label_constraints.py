"""LabelConstraints: seed 000's label constraints on the candidates' labels.

Expressions are parsed in pre-filter; one that does not parse makes the
subject unresolvable with a reason quoting it (it cannot fit anywhere until
the user fixes it), never a crash.
"""

from __future__ import annotations

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
from controllers.scheduler.plugins.expressions import parse_into, parse_label

NAME = "LabelConstraints"


class LabelConstraints(Plugin):
    name = NAME
    cacheable = True

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return parse_into(state, NAME, subject.label_constraints, parse_label, "label")

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for c in state.data[NAME]:
            if not c.matches(candidate.labels):
                return unschedulable(f"label constraint '{c}'")
        return SUCCESS
