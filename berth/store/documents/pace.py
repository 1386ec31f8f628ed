"""The pace: how much change the fleet takes at once, moves and rollouts alike.

One document, ``/berth/v1/paces/fleet`` (docs/pace.md):

- ``inTransition``: at most so many copies in transition at once, fleet-wide
  (0: no limit). A copy is in transition (:func:`in_transition`) while it is
  a target of an application that already runs somewhere and it is not yet
  available there: a move decided but not applied yet, a move's new copy
  not yet available, a rollout's step not yet healthy on its new generation.
  A first placement is not a change: it does not count. A copy that stopped
  being available on its own (a crash) is not a change either (:func:`steady`).
- ``perMinute``: at most so many moves started per minute (0: no limit).
- ``windows``: times (UTC) when no optional change starts: no optional move,
  no rollout step.

An application may set its own (``spec.pace``, :class:`PaceOverride`): each
field it gives replaces the fleet's for its own optional moves and rollout
steps (:func:`effective`); the count and the moves per minute stay
fleet-wide. A forced move (its cluster OFFLINE, or no longer feasible) is
never held, and it counts. What waits says why: a held move in its Binding,
a rollout step in the application's status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Literal, Protocol

import msgspec

from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.documents.decisions import HealthState
from berth.store.documents.rollouts import RolloutPhase

FLEET = "fleet"  # the one Pace in force
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
Day = Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


class PaceWindow(CamelStrict):
    """From ``start`` to ``end`` ("HH:MM", UTC; "24:00" is midnight at the end; an end
    before the start runs past midnight), on ``days`` (the day it starts; none: every
    day)."""

    start: str
    end: str
    days: list[Day] = []


class PaceSpec(CamelStrict):
    in_transition: int = 0
    per_minute: int = 0
    windows: list[PaceWindow] = []


class PaceOverride(CamelStrict):
    """An application's own pace: a field given (0 and ``[]`` included) replaces the
    fleet's for this application; one left out keeps the fleet's."""

    in_transition: int | None = None
    per_minute: int | None = None
    windows: list[PaceWindow] | None = None


def effective(fleet: PaceSpec | None, own: PaceOverride | None) -> PaceSpec | None:
    """The pace an application's optional changes keep: the fleet's with the
    application's own over it (None: neither is set, nothing is paced)."""
    if own is None:
        return fleet
    base = fleet if fleet is not None else PaceSpec()
    return PaceSpec(
        in_transition=base.in_transition if own.in_transition is None else own.in_transition,
        per_minute=base.per_minute if own.per_minute is None else own.per_minute,
        windows=base.windows if own.windows is None else own.windows)


class Pace(Strict, tag_field="kind", tag="Pace"):
    metadata: Metadata
    spec: PaceSpec = msgspec.field(default_factory=PaceSpec)
    api: str = "core"


def minutes(text: str) -> int:
    """Minutes after midnight of "HH:MM" ("24:00" is 1440); ValueError otherwise."""
    hours, sep, mins = text.partition(":")
    if not sep or not (hours.isdigit() and mins.isdigit() and len(mins) == 2):
        raise ValueError(f"{text!r}: give a time as HH:MM")
    h, m = int(hours), int(mins)
    if not (0 <= h <= 24 and 0 <= m < 60) or (h == 24 and m):
        raise ValueError(f"{text!r}: not a time of day (00:00 to 24:00)")
    return h * 60 + m


def closed_until(windows: Iterable[PaceWindow], now: datetime) -> datetime | None:
    """The end of the window ``now`` (aware, UTC) is in (the latest, if several); None
    when it is in none: optional changes may start."""
    latest: datetime | None = None
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for w in windows:
        start, end = minutes(w.start), minutes(w.end)
        length = end - start if end > start else end + 1440 - start  # equal: all day
        for back in (0, 1):  # a window that began today, or yesterday and runs past midnight
            begun = midnight - timedelta(days=back) + timedelta(minutes=start)
            if w.days and DAYS[begun.weekday()] not in w.days:
                continue
            ends = begun + timedelta(minutes=length)
            if begun <= now < ends and (latest is None or ends > latest):
                latest = ends
    return latest


class CopyLike(Protocol):
    """What :func:`steady` reads of one copy of an application (a status's
    ``applied.<cluster>``, or a process's view of it)."""

    @property
    def generation(self) -> int: ...

    @property
    def health(self) -> HealthState | None: ...

    @property
    def new(self) -> bool: ...


# rollout phases whose steps go on
IN_PROGRESS = (RolloutPhase.PROGRESSING, RolloutPhase.PAUSED, RolloutPhase.WAITING)


def steady(applied: Mapping[str, CopyLike], rollout_generation: int = 0,
           rollout_phase: str | None = None) -> list[str] | None:
    """The clusters where an application's copy is not in transition (None: it runs
    nowhere yet, a first placement). A copy is in transition while it is new there and
    not yet Healthy, or, while a rollout of ``rollout_generation`` goes on, a copy of it
    not yet Healthy. A target with no copy is in transition too: with the targets, this
    gives the count (:class:`berth.controllers.runtime.transit.Transit`)."""
    if not any(c.generation > 0 for c in applied.values()):
        return None
    rolling = rollout_phase in IN_PROGRESS
    return [cid for cid, c in applied.items() if c.generation > 0 and (
        c.health == HealthState.HEALTHY
        or not (c.new or (rolling and c.generation == rollout_generation)))]
