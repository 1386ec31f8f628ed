"""What describe, explain and the console say of making room (one function for all)."""

from __future__ import annotations

from datetime import UTC, datetime

from berth.actions.explain import render
from berth.actions.resources import room
from berth.store.documents import (
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    BindingStatus,
    ObjectRef,
    Preemption,
    Victim,
    Yield,
)

PLAN = Preemption(cluster="default/a", deadline=datetime(2026, 11, 30, 9, 12, tzinfo=UTC),
                  victims=[Victim("default/low", 1, Yield.MOVE, ["default/b"]),
                           Victim("default/pinned", 2, Yield.STOP)],
                  reserved={"cpu": 3500}, plan="20261130T090200.000000Z")


def binding(status: BindingStatus) -> Binding:
    return Binding(BindingMeta("high", "default"),
                   BindingSpec(ObjectRef("Application", "high", "default"), 1), status)


def test_a_plan_running_victim_by_victim() -> None:
    b = binding(BindingStatus(BindingState.UNSCHEDULABLE, "making room", preemption=PLAN))
    assert room(b) == [
        "Making room: on default/a until 2026-11-30 09:12:00Z (plan 20261130T090200.000000Z)",
        "  default/low (priority 1): move to default/b",
        "  default/pinned (priority 2): stop"]
    assert "  default/pinned (priority 2): stop" in render(b).splitlines()


def test_the_plan_that_placed_it_and_the_one_a_victim_made_room_for() -> None:
    placed = binding(BindingStatus(BindingState.SCHEDULED, explanation=[{"room_made": {
        "on": "default/a", "plan": PLAN.plan, "by": ["default/low (move to default/b)"]}}]))
    assert room(placed) == ["Room made:   on default/a (plan 20261130T090200.000000Z) by "
                            "default/low (move to default/b)"]
    victim = binding(BindingStatus(BindingState.SCHEDULED, yielded_to="default/high",
                                   yielded_plan=PLAN.plan))
    assert room(victim) == ["Made room:   for default/high (plan 20261130T090200.000000Z)"]
    assert room(None) == []
