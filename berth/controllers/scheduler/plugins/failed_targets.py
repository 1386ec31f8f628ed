"""FailedTargets: a cluster the application could not become available on is avoided.

When a move's new copy is not available within the propagator's
``move_timeout`` (Pods that never become Ready, an image that cannot be
pulled, no room on the cluster's nodes), the propagator keeps the old copy
and records the cluster as failed in the application's status, for the
generation it tried. This filter rejects that cluster for that generation of
the application for ``backoff`` seconds (the plugin's args; default 900), so
the scheduler places it elsewhere — or back where it still runs — and does
not send it there again meanwhile. A new generation is free to try again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any

from msgspec import Meta

from berth.controllers.scheduler.framework import (
    SKIP,
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
from berth.controllers.scheduler.framework.plugin import NoArgs


class FailedTargetsArgs(NoArgs, frozen=True):
    # seconds a cluster an application could not become available on is avoided
    backoff: Annotated[float, Meta(ge=0)] = 900.0


NAME = "FailedTargets"
FAILED = "failed-targets"  # the cycle state's entry: candidate key → seconds left


class FailedTargets(Plugin, points.PreFilter, points.Filter, points.FilterSet):
    name = NAME
    Args = FailedTargetsArgs

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.backoff = self.typed(FailedTargetsArgs).backoff

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        now = time.time()
        left = {key: self.backoff - (now - at) for key, at in snapshot.failed(subject).items()}
        left = {key: s for key, s in left.items() if s > 0}
        if not left:
            return SKIP
        state.data[FAILED] = left
        return SUCCESS

    def _why(self, seconds: float) -> Status:
        return unschedulable(f"could not become available here in time: avoided for "
                             f"{seconds:.0f} s more")

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        left: dict[str, float] = state.data[FAILED]
        seconds = left.get(candidate.key)
        return SUCCESS if seconds is None else self._why(seconds)

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        left: dict[str, float] = state.data[FAILED]
        by_key = fleet.group("key", lambda c: c.key)
        return [(self._why(seconds), within & by_key[key]) for key, seconds in left.items()
                if key in by_key]
