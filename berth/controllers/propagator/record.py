"""What the propagator writes in the ledger with an application's status: each copy's
health changing on its cluster, and each step of a rollout (docs/ledger.md).

:func:`copy_record` is pure: from the status as it was and as it is about to be
written, the changes an operator would want remembered — the application's
state (``RUNNING`` → ``DEGRADED``), a copy becoming Healthy, Unhealthy or
removed, a copy beginning or ending its wait for its dependencies there, a
rollout starting, pausing, resuming, moving to a stage (an approval, when it
waited for one), completing, halting or rolling back. A status rewritten for
anything else (its reason's wording, the available count) is not recorded.
"""

from __future__ import annotations

from datetime import datetime

from berth.store.documents import ApplicationState, AppState, HealthState
from berth.store.documents import ledger as L
from berth.store.documents.rollouts import (
    COMPLETE,
    HALTED,
    PAUSED,
    ROLLED_BACK,
    WAITING,
    RolloutState,
)
from berth.store.events import NORMAL, WARNING

_STEPS = {COMPLETE: "done", HALTED: "halted", ROLLED_BACK: "rolled back", PAUSED: "paused"}


def health_changes(old: ApplicationState | None, new: ApplicationState) -> list[L.Change]:
    """Each cluster whose copy's judged health changed, or whose copy went away."""
    before = old.applied if old is not None else {}
    out: list[L.Change] = []
    for cid in sorted(set(before) | set(new.applied)):
        was = before[cid].health or "" if cid in before else ""
        now = new.applied[cid].health or "" if cid in new.applied else "removed"
        if was != now and now:
            detail = new.applied[cid].reason if cid in new.applied else ""
            out.append(L.Change(cluster=cid, what="health", was=was, now=now, detail=detail))
    return out


def wait_changes(old: ApplicationState | None, new: ApplicationState) -> list[L.Change]:
    """Each cluster whose copy began or ended waiting for its dependencies there (a new
    wording of the same wait is not one)."""
    before = old.waits_for if old is not None else {}
    return [L.Change(cluster=cid, what="waits", was="waiting" if cid in before else "",
                     now="waiting" if cid in new.waits_for else "ready",
                     detail=new.waits_for.get(cid, ""))
            for cid in sorted(set(before) ^ set(new.waits_for))]


def _where(r: RolloutState) -> str:
    phase = r.phase or "-"
    return f"{phase}/{r.stage}" if r.stage else phase


def rollout_changes(old: RolloutState | None, new: RolloutState | None
                    ) -> tuple[list[L.Change], bool]:
    """The rollout's step, if it took one, and whether an operator made it (a resume,
    or a stage entered that waited for an approval)."""
    if new is None or (old is not None and old.generation == new.generation
                       and old.phase == new.phase and old.stage == new.stage):
        return [], False
    if old is None or old.generation != new.generation:
        step, was = "started", (f"generation {old.generation}" if old is not None else "")
    elif new.phase in _STEPS:
        step, was = _STEPS[new.phase], _where(old)
    elif old.phase == PAUSED:
        step, was = "resumed", _where(old)
    elif old.stage != new.stage:
        step, was = ("approved" if old.phase == WAITING and "approv" in old.reason
                     else "stage"), _where(old)
    else:
        step, was = (new.phase or "-").lower(), _where(old)
    operator = step in ("resumed", "approved", "paused")
    return [L.Change(cluster="", what="rollout", was=was, now=f"{step}: {_where(new)}",
                     detail=new.reason)], operator


def copy_record(old: ApplicationState | None, new: ApplicationState, at: datetime
                ) -> L.Record | None:
    """The record of writing ``new`` over ``old``; None: nothing to remember."""
    steps, operator = rollout_changes(old.rollout if old is not None else None, new.rollout)
    changes = health_changes(old, new) + wait_changes(old, new) + steps
    was = old.state if old is not None else None
    if was != new.state:
        changes.insert(0, L.Change(cluster="", what="state", was=was or "",
                                   now=new.state or ""))
        # (its reason is the record's)
    if not changes:
        return None
    return L.Record(time=at, event=L.ROLLOUT if steps else L.HEALTH,
                    generation=new.rollout.generation if new.rollout else new.generation,
                    trigger="operator" if operator else "", state=new.state or "",
                    reason=new.reason, changes=changes)


_WARNING_STATES = (AppState.DEGRADED, AppState.FAILED)
# the event a copy's new health is told by ("removed": the copy went away)
_HEALTH_EVENTS: dict[str, str] = {
    HealthState.HEALTHY: "Available", HealthState.UNHEALTHY: "Unhealthy",
    HealthState.PROGRESSING: "Applied", "removed": "Removed"}
_WARNING_STEPS = ("halted", "rolled back")


def events_of(record: L.Record | None, old: ApplicationState | None, new: ApplicationState
              ) -> list[tuple[str, str, str]]:
    """The events a status write says (type, reason, message): the record's changes, and
    each cluster whose apply error is new or changed."""
    out: list[tuple[str, str, str]] = []
    for c in record.changes if record is not None else []:
        if c.what == "state":
            out.append((WARNING if c.now in _WARNING_STATES else NORMAL, c.now.title(),
                        new.reason or c.now))
        elif c.what == "waits":
            out.append((NORMAL, "WaitingForDependency" if c.now == "waiting" else
                        "DependencyReady", f"{c.cluster}: {c.detail}" if c.detail
                        else c.cluster))
        elif c.what == "health":
            reason = _HEALTH_EVENTS.get(c.now, c.now)
            out.append((WARNING if c.now == HealthState.UNHEALTHY else NORMAL, reason,
                        f"{c.cluster}: {c.detail}" if c.detail else c.cluster))
        else:
            step = c.now.split(":", 1)[0]
            out.append((WARNING if step in _WARNING_STEPS else NORMAL,
                        "Rollout" + step.title().replace(" ", ""),
                        f"{c.now}{': ' + c.detail if c.detail else ''}"))
    before = old.errors if old is not None else {}
    out += [(WARNING, "FailedApply", f"{cid}: {error}") for cid, error in sorted(
        new.errors.items()) if before.get(cid) != error]
    return out


__all__ = ["copy_record", "events_of", "health_changes", "rollout_changes", "wait_changes"]
