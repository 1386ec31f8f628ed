"""The reconcile loop: the plan's steps carried out until it finishes.

:func:`run` asks the plan (``plan.py``) for a step, has it carried out — by the
:class:`~controllers.propagator.execute.Executor` on a cluster's API, by the
pull clusters' works (``pull.py``), or by a :class:`Router` between them — and
asks again until the plan finishes; status writes go through a
:class:`StatusSink`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from berth.controllers.propagator.plan import (
    App,
    Apply,
    Clear,
    Confirm,
    Facts,
    Finish,
    Progress,
    Write,
    plan,
)
from berth.controllers.runtime import Retry
from berth.store.documents import ApplicationState

MAX_STEPS = 1000  # a plan that has not finished by then is a bug: stop and say so


class StatusSink(Protocol):
    def write(self, state: ApplicationState) -> Retry | None:
        """Write the status if it changed; a Retry if it could not be written."""
        ...


class Steps(Protocol):
    """What carries out a plan's steps: the :class:`Executor` on the clusters' API, the
    pull clusters' works (``pull.py``), or a :class:`Router` between them."""

    def apply(self, step: Apply, app: App, progress: Progress,
              record: Callable[[ApplicationState], Retry | None]) -> Retry | None: ...

    def confirm(self, step: Confirm, progress: Progress) -> None: ...

    def clear(self, step: Clear, progress: Progress, propagation: str = "Background"
              ) -> None: ...


class Router:
    """Each step to where its cluster is reached: its API (``push``), or its agent's
    work (``pull``) when ``is_pull`` says so."""

    def __init__(self, push: Steps, pull: Steps, is_pull: Callable[[str], bool]) -> None:
        self.push = push
        self.pull = pull
        self.is_pull = is_pull

    def _of(self, cid: str) -> Steps:
        return self.pull if self.is_pull(cid) else self.push

    def apply(self, step: Apply, app: App, progress: Progress,
              record: Callable[[ApplicationState], Retry | None]) -> Retry | None:
        return self._of(step.cluster).apply(step, app, progress, record)

    def confirm(self, step: Confirm, progress: Progress) -> None:
        pulled = tuple(c for c in step.clusters if self.is_pull(c))
        pushed = tuple(c for c in step.clusters if c not in pulled)
        for steps, clusters in ((self.push, pushed), (self.pull, pulled)):
            if clusters and progress.confirmed is not False:
                progress.confirmed = None
                steps.confirm(Confirm(clusters, step.owner), progress)
        if progress.confirmed is None:
            progress.confirmed = True  # nothing to check

    def clear(self, step: Clear, progress: Progress, propagation: str = "Background") -> None:
        self._of(step.cluster).clear(step, progress, propagation)


def run(facts: Facts, progress: Progress, executor: Steps, sink: StatusSink
        ) -> Finish | Retry:
    """Execute the plan's steps until it finishes; a status write that failed ends it
    early with its Retry."""
    app = facts.app if facts.app is not None else App(0)
    for _ in range(MAX_STEPS):
        step = plan(facts, progress)
        halt: Retry | None = None
        if isinstance(step, Finish):
            return step
        if isinstance(step, Apply):
            progress.rollout = step.rollout or progress.rollout  # as decided for it
            halt = executor.apply(step, app, progress, sink.write)
        elif isinstance(step, Confirm):
            executor.confirm(step, progress)
        elif isinstance(step, Clear):
            executor.clear(step, progress, app.propagation)
        elif isinstance(step, Write):
            halt = sink.write(step.state)
            if halt is None:
                progress.status = step.state
        if halt is not None:
            return halt
    raise RuntimeError(f"the plan did not finish in {MAX_STEPS} steps: {progress}")
