"""The scheduling queue (the Kubernetes scheduler): activeQ order, backoffQ, unschedulableQ; a fake clock."""

from __future__ import annotations

from berth.controllers.scheduler.queue import SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


PRIORITY = {"low": 0, "high": 10}


def make(clock: Clock, flush: float = 60.0) -> SchedulingQueue:
    return SchedulingQueue(lambda key, t: (-PRIORITY.get(key, 0), t), clock=clock,
                           flush_every=flush)


def test_active_is_ordered_by_priority_then_age() -> None:
    clock = Clock()
    q = make(clock)
    q.add("old")
    clock.now += 1
    q.add("low")
    q.add("high")
    assert [q.pop(0), q.pop(0), q.pop(0)] == ["high", "old", "low"]


def test_backoff_doubles_from_one_to_ten_seconds() -> None:
    clock = Clock()
    q = make(clock)
    delays = []
    for _ in range(6):
        q.add("k")
        assert q.pop(0) == "k"
        delays.append(q.failed("k"))
        q.done("k")
    assert delays == [1, 2, 4, 8, 10, 10]
    q.succeeded("k")
    assert q.backoff.delay("k") == 1


def test_a_backed_off_subject_returns_when_due() -> None:
    clock = Clock()
    q = make(clock)
    q.add("k")
    q.pop(0)
    q.failed("k")
    q.done("k")
    assert q.pop(0) is None
    clock.now += 1.0
    assert q.pop(0) == "k"


def test_unschedulable_waits_for_a_change_or_the_periodic_flush() -> None:
    clock = Clock()
    q = make(clock, flush=60)
    for key in ("a", "b"):
        q.add(key)
        q.pop(0)
        q.unschedulable_now(key)
        q.done(key)
    assert q.pop(0) is None
    q.activate({"a"})  # a change that concerns only "a"
    assert q.pop(0) == "a"
    q.done("a")
    assert q.pop(0) is None
    clock.now += 61
    assert q.pop(0) == "b"  # the periodic flush


def test_a_metric_picture_tries_again_only_those_new_values_can_help() -> None:
    clock = Clock()
    q = make(clock, flush=60)
    for key, blind in (("labels", True), ("metrics", False), ("was-blind", True)):
        q.add(key)
        q.pop(0)
        q.unschedulable_now(key, metric_blind=blind)
        q.done(key)
    q.add("was-blind")  # tried again for another reason, and metric values help it now
    q.pop(0)
    q.unschedulable_now("was-blind", metric_blind=False)
    q.done("was-blind")
    q.move_all_to_active(metrics_only=True)
    assert sorted([q.pop(0), q.pop(0)]) == ["metrics", "was-blind"]  # type: ignore[type-var]
    for key in ("metrics", "was-blind"):
        q.done(key)
    assert q.pop(0) is None and "labels" in q.unschedulable  # it waits out the picture
    clock.now += 61
    assert q.pop(0) == "labels"  # the periodic flush takes it all the same
    q.unschedulable_now("labels", metric_blind=True)
    q.done("labels")
    q.move_all_to_active()  # any other change: every one
    assert q.pop(0) == "labels"


def test_one_attempt_per_subject_and_latest_wins() -> None:
    clock = Clock()
    q = make(clock)
    q.add("k")
    assert q.pop(0) == "k"
    q.add("k")
    q.add("k")
    assert q.pop(0) is None
    q.done("k")
    assert q.pop(0) == "k"
    q.done("k")
    assert q.pop(0) is None


def test_rescheduling_later_and_forgetting() -> None:
    clock = Clock()
    q = make(clock)
    q.add_after("k", 60)
    assert q.pop(0) is None
    clock.now += 60
    assert q.pop(0) == "k"
    q.done("k")
    q.add_after("gone", 1)
    q.forget("gone")
    clock.now += 2
    assert q.pop(0) is None and len(q) == 0
