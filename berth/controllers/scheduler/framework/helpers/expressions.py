"""Parsing Krake's constraint expressions once, for the constraint plugins (a helper).

An expression that does not parse makes the subject unresolvable with a
reason quoting it (it cannot fit anywhere until the user fixes it), never a
crash. Parsed constraints are cached by their text (65,536 of each kind):
applications share expressions, and each is parsed again at every attempt.
A subject's whole list is cached too, but only the last 4,096 lists: built
from the cached expressions it is cheap, and one entry per subject would
hold memory in proportion to the subjects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TypeVar

from berth.controllers.scheduler.framework.state import CycleState
from berth.controllers.scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable
from berth.store.constraints import ConstraintError, LabelConstraint, MetricConstraint

T = TypeVar("T")

parse_label = lru_cache(maxsize=1 << 16)(LabelConstraint.parse)
parse_metric = lru_cache(maxsize=1 << 16)(MetricConstraint.parse)


@lru_cache(maxsize=1 << 12)
def _parse_all(expressions: tuple[str, ...], parse: Callable[[str], T]) -> tuple[T, ...] | str:
    try:
        return tuple(parse(e) for e in expressions)
    except ConstraintError as exc:
        return str(exc)


def parse_into(state: CycleState, name: str, expressions: Sequence[str],
               parse: Callable[[str], T], what: str) -> Status:
    """Parse ``expressions`` into ``state.data[name]``; SKIP when there are none."""
    if not expressions:
        return SKIP
    parsed = _parse_all(tuple(expressions), parse)
    if isinstance(parsed, str):
        return unresolvable(f"invalid {what} constraint: {parsed}")
    state.data[name] = parsed
    return SUCCESS
