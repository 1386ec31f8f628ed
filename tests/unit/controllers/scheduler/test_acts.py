"""What the scheduler does with an outcome, as a table (acts.act): each row an outcome,
what is bound, the rules and what the looks answer; the act it makes, and the looks it
asked. The real-server twins are tests/integration/test_scheduler.py (hold, defer,
place, Unschedulable) and test_preemption.py (make room, follow the plan)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from berth.controllers.scheduler import acts
from berth.controllers.scheduler.antiflap import Held
from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, Deferred, NoFit, decide
from berth.controllers.scheduler.deferral import Plan as DeferralPlan
from berth.controllers.scheduler.framework import Evaluation, Framework, Subject
from berth.controllers.scheduler.plugins import REGISTRY
from berth.controllers.scheduler.preempt import NoPlan
from berth.controllers.scheduler.preempt import Plan as RoomPlan
from berth.controllers.scheduler.priorities import NONE, Priority
from berth.controllers.scheduler.views import BindingView
from berth.store.documents import (
    BindingMeta,
    BindingSpec,
    HeldBy,
    ObjectRef,
    Preemption,
    Target,
)
from berth.store.documents.pace import PaceSpec
from berth.store.documents.priority import PreemptionPolicy
from berth.store.documents.resources import Resources
from berth_testkit.fakes.scheduler import app, cluster, ranked_fleet

T0 = datetime(2026, 12, 1, tzinfo=UTC)
SUBJECT = app()
FW = Framework(SchedulerConfig(), REGISTRY)


def target(name: str) -> Target:
    return Target("Cluster", name, "default")


def decided(current: list[str]) -> Decision:
    """The real decision for the app on c0..c4 (c0 the best), running on ``current``."""
    out = decide(FW, SUBJECT, ranked_fleet(), [target(n) for n in current])
    assert isinstance(out, Decision)
    return out


def binding(on: list[str], *, generation: int = 0, plan: Preemption | None = None,
            yielded_to: str = "") -> BindingView:
    view = BindingView(BindingMeta("app", "default"), BindingSpec(
        ObjectRef("Application", "app", "default"), generation, [target(n) for n in on],
        scheduled=T0))
    view.status.preemption, view.status.yielded_to = plan, yielded_to
    return view


EVALUATION: Evaluation = decided([]).evaluation
NOFIT = NoFit("0/5 clusters are available", EVALUATION)
DEFERRED = Deferred(DeferralPlan([], 9e9, start=2e9), EVALUATION, SUBJECT)
PLAN = Preemption("default/c1", T0, [])
HELD = Held(HeldBy.MARGIN, "held back: gains 0.1 or less in score (margin)", 30.0)
LOW = Priority(100, PreemptionPolicy.PREEMPT_LOWER_PRIORITY, "its own")
ROOM = RoomPlan(cluster("c1"), [], decided([]), Resources(cpu=500))  # as the looks found it
NO_ROOM = NoPlan({"Cluster/default/c0": "its victims would not fit elsewhere"})


@dataclass
class Looks:
    """What the scheduler's cache would answer; every question asked is noted."""

    priority_is: Priority = NONE
    pace_is: PaceSpec | None = None
    below: bool = True
    room_is: Any = field(default_factory=lambda: NO_ROOM)
    held_is: Held | None = None
    asked: list[str] = field(default_factory=list)

    def priority(self, subject: Subject) -> Priority:
        self.asked.append("priority")
        return self.priority_is

    def pace(self, subject: Subject) -> PaceSpec | None:
        self.asked.append("pace")
        return self.pace_is

    def anything_below(self, priority: int) -> bool:
        self.asked.append("below")
        return self.below

    def room(self, subject: Subject, priority: int, evaluation: Evaluation) -> Any:
        self.asked.append("room")
        return self.room_is

    def held(self, move: acts.OptionalMove) -> Held | None:
        self.asked.append(f"held {move.names} gain {move.gain:.2f}")
        return self.held_is


ON = acts.Rules(preemption=True, antiflap=True)
OFF = acts.Rules()

# (name, outcome, running on, binding, rules, planned start, looks, act, what it says, asked)
ROWS: list[tuple[str, Any, list[str], BindingView | None, acts.Rules, float | None, Looks,
                 type, str, list[str]]] = [
    ("deferred, a start not planned before: come back then", DEFERRED, [], None, ON, None,
     Looks(), acts.Defer, "replan=True", []),
    ("deferred to the start already planned: nothing to add", DEFERRED, [], None, ON, 2e9,
     Looks(), acts.Defer, "replan=False", []),
    ("a plugin failed: retry", NoFit("boom", EVALUATION, retry=True), [], None, ON, None,
     Looks(), acts.Retry, "", []),
    ("its plan runs: follow it", NOFIT, [], binding([], plan=PLAN), ON, None, Looks(),
     acts.FollowPlan, "default/c1", []),
    ("a class that does not exist makes no room", NOFIT, [], None, ON, None,
     Looks(priority_is=Priority(0, PreemptionPolicy.NEVER, "class gold", "no class gold")),
     acts.Unschedulable, "no class gold: it makes no room; 0/5", ["priority"]),
    ("nothing fits, something less important placed: room made", NOFIT, [], None, ON, None,
     Looks(priority_is=LOW, room_is=ROOM), acts.MakeRoom, "", ["priority", "below", "room"]),
    ("over its namespace's quota: no room is made (a quota is the namespace's own)",
     NoFit("over the quota of namespace default: cpu 1 asked, 0 of 1 left", EVALUATION,
           quota=True), [], None, ON, None, Looks(priority_is=LOW, room_is=ROOM),
     acts.Unschedulable, "over the quota", ["priority"]),
    ("no plan makes room: said why", NOFIT, [], None, ON, None, Looks(priority_is=LOW),
     acts.Unschedulable, "no room can be made: 1 cluster: its victims would not fit",
     ["priority", "below", "room"]),
    ("nothing less important anywhere: no plan sought", NOFIT, [], None, ON, None,
     Looks(priority_is=LOW, below=False), acts.Unschedulable, "0/5 clusters",
     ["priority", "below"]),
    ("preemption off: Unschedulable, nothing sought", NOFIT, [], None, OFF, None,
     Looks(priority_is=LOW), acts.Unschedulable, "0/5 clusters", ["priority"]),
    ("running somewhere: kept there, no room made", NOFIT, ["c2"], binding(["c2"]), ON,
     None, Looks(priority_is=LOW), acts.Unschedulable, "0/5 clusters", ["priority"]),
    ("it made room for another lately: makes none in turn", NOFIT, [],
     binding([], yielded_to="Application/default/other"), ON, None, Looks(priority_is=LOW),
     acts.Unschedulable, "0/5 clusters", ["priority"]),
    ("where it runs: placed, settled, nothing asked", decided(["c0"]), ["c0"], binding(["c0"]),
     ON, None, Looks(), acts.Place, "settled=True", []),
    ("a move, no anti-flap and no pace: placed", decided(["c3"]), ["c3"], binding(["c3"]),
     OFF, None, Looks(), acts.Place, "settled=False", ["pace"]),
    ("a move for a new spec is not optional: placed", decided(["c3"]), ["c3"],
     binding(["c3"], generation=7), ON, None, Looks(), acts.Place, "settled=False", ["pace"]),
    ("a first placement is not optional: placed", decided([]), [], None, ON, None, Looks(),
     acts.Place, "settled=False", ["pace"]),
    ("an optional move the rules let go: placed", decided(["c3"]), ["c3"], binding(["c3"]),
     ON, None, Looks(), acts.Place, "settled=False", ["pace", "held c0 gain 0.30"]),
    ("an optional move held back: written where it runs", decided(["c3"]), ["c3"],
     binding(["c3"]), ON, None, Looks(held_is=HELD), acts.Hold, "retry_in",
     ["pace", "held c0 gain 0.30"]),
    ("the pace alone judges a move too", decided(["c3"]), ["c3"], binding(["c3"]), OFF,
     None, Looks(pace_is=PaceSpec(in_transition=1), held_is=HELD), acts.Hold, "margin",
     ["pace", "held c0 gain 0.30"]),
]


@pytest.mark.parametrize(("outcome", "running", "bound", "rules", "planned", "looks", "kind",
                          "says", "asked"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_an_outcome_makes_one_act(outcome: Decision | Deferred | NoFit, running: list[str],
                                  bound: BindingView | None, rules: acts.Rules,
                                  planned: float | None, looks: Looks, kind: type, says: str,
                                  asked: list[str]) -> None:
    done = acts.act(SUBJECT, outcome, acts.Bound(bound, [target(n) for n in running]),
                    rules=rules, planned_start=planned, looks=looks)
    assert isinstance(done, kind), done
    assert says in _said(done), _said(done)
    assert looks.asked == asked


def _said(done: acts.Act) -> str:
    match done:
        case acts.Defer(replan=replan):
            return f"replan={replan}"
        case acts.Retry():
            return ""
        case acts.FollowPlan(plan=plan):
            return plan.cluster
        case acts.Unschedulable(reason=reason):
            return reason
        case acts.MakeRoom(plan=plan):
            assert plan is ROOM
            return ""
        case acts.Hold(held=held, note=note):
            assert note["would_move_to"] == ["Cluster/default/c0"]
            return f"{held.rule} {' '.join(note)}"
        case acts.Place(settled=settled):
            return f"settled={settled}"


def test_a_move_to_a_better_tier_gains_without_bound() -> None:
    d = decided(["c3"])
    assert acts.gain(d, [target("c3")]) == pytest.approx(0.3)
    d.chosen[0] = replace(d.chosen[0], tier=d.chosen[0].tier + 1)
    assert acts.gain(d, [target("c3")]) == float("inf")
