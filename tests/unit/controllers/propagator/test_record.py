"""Which status changes the propagator records in the ledger (pure: no store)."""

from __future__ import annotations

from datetime import UTC, datetime

from berth.controllers.propagator.record import copy_record
from berth.store.documents import ApplicationState, ClusterApplied
from berth.store.documents.rollouts import RolloutState

AT = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)


def state(rollout: RolloutState | None = None, **health: str) -> ApplicationState:
    return ApplicationState(state="RUNNING", applied={
        f"default/{c}": ClusterApplied(generation=1, health=h) for c, h in health.items()},
        rollout=rollout)


def test_a_copy_turning_unhealthy_and_one_removed_are_recorded_a_wording_change_is_not() -> None:
    r = copy_record(state(de="Healthy", fr="Healthy"), state(de="Unhealthy"), AT)
    assert r is not None and r.event == "Health"
    assert [(c.cluster, c.was, c.now) for c in r.changes if c.what == "health"] == [
        ("default/de", "Healthy", "Unhealthy"), ("default/fr", "Healthy", "removed")]
    same = state(de="Healthy")
    reworded = state(de="Healthy")
    reworded.reason = "3/3 available"
    assert copy_record(same, reworded, AT) is None
    assert copy_record(state(de="Healthy"), state(de=""), AT) is None  # not judged yet


def test_rollout_steps_are_recorded_and_an_approval_is_the_operators() -> None:
    waiting = RolloutState(generation=2, phase="Waiting", stage="canary",
                           reason="stage eu waits for approval (berth rollout approve web eu)")
    started = copy_record(state(), state(RolloutState(generation=2, phase="Progressing",
                                                      stage="canary")), AT)
    assert started is not None and started.event == "Rollout"
    assert started.changes[0].now == "started: Progressing/canary"
    approved = copy_record(state(waiting), state(RolloutState(
        generation=2, phase="Progressing", stage="eu")), AT)
    assert approved is not None and approved.trigger == "operator"
    assert approved.changes[0].now.startswith("approved")
    done = copy_record(state(RolloutState(generation=2, phase="Progressing", stage="eu")),
                       state(RolloutState(generation=2, phase="Complete")), AT)
    assert done is not None and done.changes[0].now == "done: Complete"
    assert done.trigger == ""
    halted = copy_record(state(waiting), state(RolloutState(generation=2, phase="Halted",
                                                            reason="failed on eu-1")), AT)
    assert halted is not None and halted.changes[0].now == "halted: Halted"
    assert halted.changes[0].detail == "failed on eu-1"


def test_a_copy_beginning_and_ending_its_wait_for_dependencies_is_recorded_and_told() -> None:
    from berth.controllers.propagator.record import events_of

    why = "waits for default/db to run on default/de"
    waiting = ApplicationState(state="WAITING", reason=f"default/de: {why}",
                               waits_for={"default/de": why})
    r = copy_record(ApplicationState(), waiting, AT)
    assert r is not None
    assert [(c.what, c.cluster, c.was, c.now, c.detail) for c in r.changes] == [
        ("state", "", "", "WAITING", ""), ("waits", "default/de", "", "waiting", why)]
    assert ("Normal", "WaitingForDependency", f"default/de: {why}") in events_of(
        r, None, waiting)
    reworded = ApplicationState(state="WAITING", reason="x", waits_for={"default/de": "other"})
    assert copy_record(waiting, reworded, AT) is None  # the same wait, worded anew
    ready = state(de="Healthy")
    r = copy_record(waiting, ready, AT)
    assert r is not None
    assert ("waits", "default/de", "waiting", "ready") in [
        (c.what, c.cluster, c.was, c.now) for c in r.changes]
