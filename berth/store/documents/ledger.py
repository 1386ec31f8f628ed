"""The ledger's records: what berth did to a resource, when and why, kept after etcd
has compacted the revisions that did it (docs/ledger.md).

A :class:`Record` is written by the process that acted, in the transaction of
its act: the scheduler with the Binding it changes (a placement, a move, a held
move, nothing fitting, deferred work), the propagator with the status it
writes (each copy's health per cluster, each rollout step). Records are small
on purpose — the candidates in short, not the Binding's whole explanation —
because a fleet writes many of them.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Final

import msgspec

from berth.store.documents.decisions import HeldBy, Target


class LedgerEvent(StrEnum):
    """What a record says happened (``Record.event``). A closed set (the package's note
    says how code branches on one)."""

    # the scheduler's: a first placement, a move, a new decision for a changed spec
    # that kept its clusters, a move the anti-flap policy or the pace held back and the
    # end of that hold, nothing fitting, work deferred to a later start
    PLACED = "Placed"
    MOVED = "Moved"
    KEPT = "Kept"
    HELD = "Held"
    RELEASED = "Released"
    UNSCHEDULABLE = "Unschedulable"
    DEFERRED = "Deferred"
    # the propagator's: a copy's health changed, a rollout took a step
    HEALTH = "Health"
    ROLLOUT = "Rollout"


PLACED: Final = LedgerEvent.PLACED
MOVED: Final = LedgerEvent.MOVED
KEPT: Final = LedgerEvent.KEPT
HELD: Final = LedgerEvent.HELD
RELEASED: Final = LedgerEvent.RELEASED
UNSCHEDULABLE: Final = LedgerEvent.UNSCHEDULABLE
DEFERRED: Final = LedgerEvent.DEFERRED
HEALTH: Final = LedgerEvent.HEALTH
ROLLOUT: Final = LedgerEvent.ROLLOUT

# Why the scheduler decided again (``Record.trigger``).
TRIGGERS = {
    "new": "the resource had no placement yet",
    "spec": "its spec changed (a new generation)",
    "failed-target": "it could not become available on a cluster it was placed on",
    "taint": "a cluster it was placed on got a taint it does not tolerate",
    "cluster": "a cluster it was placed on became infeasible or went away",
    "metrics": "metric values changed the candidates' scores",
    "scores": "the candidates' scores changed (labels, capacity, spread)",
    "operator": "an operator acted (a rollout approved, paused or resumed)",
    "preemption": "it was moved or stopped to make room for a more important application",
}


class Candidate(msgspec.Struct, omit_defaults=True):
    """A candidate as the decision saw it, in short: its score and the metric values it
    was scored by (chosen ones), or why it was not feasible (where it ran before)."""

    name: str  # namespace/name
    score: float | None = None
    chosen: bool = False
    metrics: dict[str, float] = {}
    rejected: str = ""


class Change(msgspec.Struct, omit_defaults=True):
    """One thing the propagator saw change: the application's state (``RUNNING`` →
    ``DEGRADED``), a copy's health on one cluster (``Healthy`` → ``Unhealthy``), or a
    rollout's step (``started``, ``done``, ``halted``, ``rolled back``, ``approved``)."""

    cluster: str  # namespace/name ("" for the application's state and its rollout)
    what: str  # "state", "health", "waits" (for its dependencies there) or "rollout"
    was: str = ""
    now: str = ""
    detail: str = ""


class Record(msgspec.Struct, tag_field="kind", tag="LedgerRecord", omit_defaults=True):
    """One entry of a resource's ledger. Its key names the resource and the process
    that wrote it (:mod:`berth.store.ledger`): the value does not repeat them."""

    time: datetime
    event: LedgerEvent
    generation: int = 0
    trigger: str = ""  # one of TRIGGERS (scheduler records)
    detail: str = ""  # the trigger's particulars: which cluster, which taint
    source: list[Target] = []  # where it was placed before (with shares)
    targets: list[Target] = []  # where it is placed now
    state: str = ""
    reason: str = ""
    rule: HeldBy = HeldBy.NOTHING  # the anti-flap or pace rule that held a move back
    candidates: list[Candidate] = []
    changes: list[Change] = []  # propagator records
    # The id of the scheduler's record that placed what this one reports on, when
    # another's: a hold or a kept placement names the move it keeps.
    decision: str = ""


__all__ = ["DEFERRED", "HEALTH", "HELD", "KEPT", "MOVED", "PLACED", "RELEASED", "ROLLOUT",
           "TRIGGERS", "UNSCHEDULABLE", "Candidate", "Change", "LedgerEvent", "Record"]
