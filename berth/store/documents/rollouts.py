"""Rollouts: how a new generation of an application reaches its clusters.

``spec.rollout`` of an Application says how (docs/rollouts.md):

- ``All`` (the default): every cluster gets the new generation at once;
- ``Rolling``: at most ``maxUnavailable`` clusters (a count or a percentage
  of the targets) are on the new generation and not yet healthy at a time;
- ``Staged``: ordered ``stages``, each choosing clusters by name or label.
  A stage starts once every earlier stage is healthy on the new generation,
  the previous stage's ``soak`` has passed and, when it asks for one, an
  operator's ``approval`` was given; at most ``maxConcurrency`` of its
  clusters are in progress at once. Targets no stage chooses form a last
  stage of their own (``(rest)``).

For every strategy: a cluster still not healthy ``progressDeadline`` after
the new generation was applied there has failed; more than ``maxFailures``
failures end the rollout, with ``onFailure``: ``Halt`` (clusters not yet
reached keep the previous generation) or ``Rollback`` (those reached get the
previous generation again). ``pace``: at most so many clusters started per
minute.

Three documents carry a rollout, each with one writer:

- :class:`ApplicationHistory` at ``/berth/v1/history/applications/<ns>/<name>``
  (``berth apply``, in the transaction that writes the generation): the last
  manifests, newest last, which etcd compaction does not erase;
- :class:`RolloutControl` at ``/berth/v1/rollouts/applications/<ns>/<name>``
  (the operator, ``berth rollout pause|resume|approve``);
- :class:`RolloutState` in the application's status (the propagator).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal

import msgspec

from berth.store.documents.base import CamelStrict
from berth.store.documents.selection import ClusterChoice

HISTORY_LIMIT = 10  # manifests kept per application unless spec.rollout says otherwise
HISTORY_BYTES = 512 * 1024  # and at most so many bytes of them (etcd's request limit)
REST = "(rest)"  # the stage of the targets no stage chooses

class RolloutPhase(StrEnum):
    """Where a rollout stands (``RolloutState.phase``; docs/rollouts.md lists them). A
    closed set (the package's note says how code branches on one)."""

    PROGRESSING = "Progressing"
    PAUSED = "Paused"
    WAITING = "Waiting"  # for an approval, a soak or the pace
    HALTED = "Halted"
    ROLLED_BACK = "RolledBack"
    COMPLETE = "Complete"


PROGRESSING: Final = RolloutPhase.PROGRESSING
PAUSED: Final = RolloutPhase.PAUSED
WAITING: Final = RolloutPhase.WAITING
HALTED: Final = RolloutPhase.HALTED
ROLLED_BACK: Final = RolloutPhase.ROLLED_BACK
COMPLETE: Final = RolloutPhase.COMPLETE
ENDED = (HALTED, ROLLED_BACK)  # nothing moves on until a new generation


class Stage(CamelStrict):
    name: str
    clusters: ClusterChoice = msgspec.field(default_factory=ClusterChoice)
    max_concurrency: int | str | None = None  # a count or "50%"; None: the whole stage
    soak: str | float | None = None  # healthy this long before the next stage starts
    approval: bool = False  # an operator approves before the stage starts


class RolloutStrategy(StrEnum):
    """How a new generation reaches the targets (docs/rollouts.md). A closed set (the
    package's note says how code branches on one)."""

    ALL = "All"  # every target at once
    ROLLING = "Rolling"  # at most maxUnavailable targets not yet healthy on it at a time
    STAGED = "Staged"  # stage by stage, each healthy (soaked, approved) before the next


class RolloutPolicy(CamelStrict):
    strategy: RolloutStrategy = RolloutStrategy.ALL
    max_unavailable: int | str = 1  # Rolling: a count or a percentage of the targets
    stages: list[Stage] = []
    sort_by: str | None = None  # a cluster label: the order within a stage (then name)
    progress_deadline: str | float | None = None  # None: the propagator's move_timeout
    max_failures: int = 0
    on_failure: Literal["Halt", "Rollback"] = "Halt"
    pace: int = 0  # clusters started per minute at most (0: no limit)
    history_limit: int = HISTORY_LIMIT


def count(value: int | str | None, total: int) -> int:
    """A count or a percentage of ``total`` (rounded down, at least 1); None: total."""
    if value is None:
        return max(total, 1)
    if isinstance(value, str):
        return max(1, total * int(value.rstrip("%")) // 100)
    return max(1, value)


def stages(policy: RolloutPolicy, order: list[str], labels: Mapping[str, Mapping[str, str]]
           ) -> list[tuple[Stage, list[str]]]:
    """Each stage with the targets it chooses, in order; a target chosen by two goes in
    the first; those none chooses make a last stage, ``(rest)``."""
    left = list(order)
    out: list[tuple[Stage, list[str]]] = []
    for stage in policy.stages:
        mine = [c for c in left if stage.clusters.selects(c, labels.get(c, {}))]
        left = [c for c in left if c not in mine]
        out.append((stage, mine))
    if left:
        out.append((Stage(name=REST), left))
    return out


# -- the history of manifests ------------------------------------------------------


class HistoryMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str | None = None


class Revision(msgspec.Struct, omit_defaults=True):
    """One generation's manifest, as written (Secrets' data stored apart)."""

    generation: int
    manifest: list[dict[str, Any]] = []
    written: datetime | None = None


class ApplicationHistory(msgspec.Struct, tag_field="kind", tag="ApplicationHistory",
                         omit_defaults=True):
    metadata: HistoryMeta
    revisions: list[Revision] = []  # oldest first; the last is the current generation
    api: str = "kubernetes"

    def revision(self, generation: int) -> Revision | None:
        return next((r for r in self.revisions if r.generation == generation), None)


# -- what the operator says --------------------------------------------------------


class Approval(msgspec.Struct, omit_defaults=True):
    generation: int
    stage: str
    by: str = ""
    at: datetime | None = None


class RolloutControl(msgspec.Struct, tag_field="kind", tag="RolloutControl",
                     omit_defaults=True):
    metadata: HistoryMeta
    paused: bool = False
    approved: list[Approval] = []
    api: str = "kubernetes"

    def approves(self, generation: int, stage: str) -> bool:
        return any(a.generation == generation and a.stage == stage for a in self.approved)


# -- what the propagator records -----------------------------------------------------


class RolloutState(msgspec.Struct, omit_defaults=True):
    """Where the rollout of ``generation`` stands, in the application's status."""

    generation: int
    stable: int = 0  # the generation it rolls from: the last one on every target
    phase: RolloutPhase | None = None
    reason: str = ""  # what it waits for, or why it ended
    stage: str = ""  # Staged: the stage reached
    healthy: dict[str, datetime] = {}  # cluster → when first seen healthy on it
    failed: dict[str, str] = {}  # cluster → why it failed (past its deadline)
