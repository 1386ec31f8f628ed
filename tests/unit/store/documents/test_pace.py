"""The fleet's pace (docs/pace.md): what counts as in transition, the count kept
as Bindings and statuses change, windows, and the scheduler's rules for moves."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from berth.controllers.runtime.transit import Transit, transit_id
from berth.controllers.scheduler.antiflap import AntiFlap, AntiFlapConfig
from berth.store.documents import Application, ClusterApplied, MovesStarted
from berth.store.documents.pace import (
    PaceOverride,
    PaceSpec,
    PaceWindow,
    closed_until,
    effective,
    minutes,
    steady,
)
from berth.store.documents.validate import problems
from tests.unit.controllers.scheduler.test_antiflap import A, B, Clock


def copy(gen: int, health: str = "Healthy", *, new: bool = False) -> ClusterApplied:
    return ClusterApplied(gen, health=health, new=new)


def test_a_copy_is_in_transition_while_new_or_rolling_and_not_yet_healthy() -> None:
    assert steady({}) is None  # runs nowhere yet: a first placement is no change
    assert steady({"a": copy(0)}) is None  # objects recorded, nothing applied
    applied = {"a": copy(1), "b": copy(1, "Progressing", new=True),
               "c": copy(1, "Unhealthy"), "d": copy(2, "Progressing")}
    # b: a move's new copy, not yet available; c: crashed on its own, no change
    assert steady(applied) == ["a", "c", "d"]
    # while generation 2 rolls out, d's copy of it is a step in progress
    assert steady(applied, 2, "Progressing") == ["a", "c"]
    assert steady(applied, 2, "Halted") == ["a", "c", "d"]  # an ended rollout: no change


def test_the_count_follows_targets_and_statuses_whichever_comes_first() -> None:
    t = Transit()
    key = transit_id("/berth/v1/bindings/applications/default/web")
    assert key == transit_id("/berth/v1/status/applications/default/web")
    t.targets(key, ["default/a"])
    assert t.count() == 0  # placed for the first time: runs nowhere yet
    t.status(key, ["default/a"])
    assert t.count() == 0
    t.decided(key, ["default/b"])  # a move decided: b has no copy yet
    assert t.count() == 1 and t.of(key) == 1
    t.targets(key, ["default/a"])  # the Binding of before, seen late: the decision stands
    assert t.count() == 1
    t.targets(key, ["default/b"])  # its Binding, seen
    t.status(key, ["default/a"])  # b's copy applied, not yet available
    t.targets("applications/default/api", ["default/a", "default/b"])
    t.status("applications/default/api", [])  # rolling out on both, neither healthy yet
    assert t.count() == 3
    t.status(key, ["default/a", "default/b"])  # available: the old copy goes next
    assert t.count() == 2
    t.targets("applications/default/api", None)  # gone
    assert t.count() == 0


def test_windows_in_utc_across_midnight_and_by_day() -> None:
    night = PaceWindow(start="22:00", end="06:00")
    weekend = PaceWindow(start="00:00", end="24:00", days=["Sat", "Sun"])
    fri_late = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)  # a Friday
    assert closed_until([night], fri_late) == datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    assert closed_until([night], fri_late.replace(hour=12)) is None
    # the latest end of the windows it is in
    assert closed_until([night, weekend], datetime(2026, 11, 28, 3, 0, tzinfo=UTC)) == (
        datetime(2026, 11, 29, 0, 0, tzinfo=UTC))
    # a window is on the day it starts: Sunday 22:00 runs into Monday
    sunday_night = PaceWindow(start="22:00", end="02:00", days=["Sun"])
    assert closed_until([sunday_night], datetime(2026, 11, 30, 1, 0, tzinfo=UTC)) is not None
    assert closed_until([sunday_night], datetime(2026, 11, 27, 1, 0, tzinfo=UTC)) is None
    assert minutes("24:00") == 1440
    for bad in ("25:00", "7", "07:5", "24:30"):
        with pytest.raises(ValueError):
            minutes(bad)


def paced() -> tuple[AntiFlap, Clock]:
    clock = Clock()
    return AntiFlap(AntiFlapConfig(settle=0), clock=clock, now=clock.wall), clock


def test_an_optional_move_waits_for_the_pace_and_a_forced_one_counts() -> None:
    p, clock = paced()
    pace = PaceSpec(in_transition=2, per_minute=3)
    assert p.check("x", B, "b", 1.0, None, None, pace, 1) is None
    held = p.check("x", B, "b", 1.0, None, None, pace, 2)
    assert held is not None and held.rule == "in_transition" and "inTransition" in held.reason
    for key in ("f1", "f2"):
        p.moved(key, A, B, optional=False)  # forced: never held, and counted
    p.moved("o1", A, B, optional=True)
    held = p.check("x", B, "b", 1.0, None, None, pace, 0)
    assert held is not None and held.rule == "per_minute"
    assert held.retry_after == pytest.approx(60)
    p.moved("new", frozenset(), B, optional=False)  # a first placement is not a move
    clock.t += 60
    assert p.check("x", B, "b", 1.0, None, None, pace, 0) is None
    # a window holds every optional move until it ends
    window = PaceSpec(windows=[PaceWindow(start="00:00", end="01:00")])
    held = p.check("x", B, "b", 1.0, None, None, window, 0)  # T0 + 160 s is 00:02:40
    assert held is not None and held.rule == "window"
    assert held.retry_after == pytest.approx(3600 - 160)


def test_a_new_leader_counts_the_moves_its_predecessor_started_in_the_last_minute() -> None:
    """From its predecessor's record of moves: a leader change resets neither
    ``perMinute`` nor the budget."""
    p, clock = paced()
    now = int(clock.wall().timestamp())
    p.started_before(MovesStarted(started=[(now - s, 1) for s in (50, 20, 5, 90)]))  # 90: old
    pace = PaceSpec(per_minute=3)
    held = p.check("x", B, "b", 1.0, None, None, pace, 0)
    assert held is not None and held.rule == "per_minute"
    assert held.retry_after == pytest.approx(10)  # the oldest of the three, 50 s ago
    clock.t += 10
    assert p.check("x", B, "b", 1.0, None, None, pace, 0) is None
    # ... and for the anti-flap budget, over its interval (its optional moves alone)
    budgeted = AntiFlap(AntiFlapConfig(settle=0, budget=2, budget_interval=120), clock=clock,
                        now=clock.wall)
    now = int(clock.wall().timestamp())
    budgeted.started_before(MovesStarted(
        started=[(now - 5, 4)], optional=[(now - s, 1) for s in (100, 30, 130)]))
    held = budgeted.check("x", B, "b", 1.0, None, None)
    assert held is not None and held.rule == "budget"
    assert held.retry_after == pytest.approx(20)


def test_an_applications_own_pace_replaces_the_fleets_field_by_field() -> None:
    fleet = PaceSpec(in_transition=20, per_minute=60,
                     windows=[PaceWindow(start="22:00", end="06:00")])
    assert effective(None, None) is None  # nothing set: nothing paced
    assert effective(fleet, None) is fleet
    # a field given replaces the fleet's, 0 and [] included; one left out keeps it
    own = effective(fleet, PaceOverride(in_transition=0, windows=[]))
    assert own == PaceSpec(in_transition=0, per_minute=60, windows=[])
    # without a fleet's pace, the application's own holds alone
    alone = effective(None, PaceOverride(windows=[PaceWindow(start="00:00", end="24:00")]))
    assert alone is not None and alone.in_transition == 0 and len(alone.windows) == 1
    # what the scheduler then holds: an exempt application moves past the fleet's count
    p, _ = paced()
    assert p.check("x", B, "b", 1.0, None, None, fleet, 20) is not None
    window_free = effective(PaceSpec(in_transition=20), PaceOverride(in_transition=0))
    assert p.check("x", B, "b", 1.0, None, None, window_free, 20) is None


def test_an_applications_own_pace_is_checked_at_apply() -> None:
    app = msgspec.convert({"metadata": {"name": "a", "namespace": "n"}, "spec": {
        "pace": {"inTransition": -1, "windows": [{"start": "25:00", "end": "01:00"}]}}},
        Application)
    found = [(p.path, p.message) for p in problems(app)]
    assert ("spec.pace.inTransition", "must be >= 0 (0: no limit)") in found
    assert any(f == "spec.pace.windows[0].start" for f, _ in found), found
