"""PrioritySort: the queue's order — higher ``spec.priority`` first, then the oldest."""

from __future__ import annotations

from berth.controllers.scheduler.plugins.priority_sort import PrioritySort
from berth_testkit.fakes.scheduler import app


def test_higher_priority_first_then_the_oldest_in_the_queue() -> None:
    sort = PrioritySort()
    waiting = [(app("late-high", priority=10), 3.0), (app("old-low"), 1.0),
               (app("new-low"), 2.0), (app("early-high", priority=10), 0.5),
               (app("negative", priority=-1), 0.0)]
    ordered = sorted(waiting, key=lambda w: sort.sort_key(*w))
    assert [s.ref.name for s, _ in ordered] == [
        "early-high", "late-high", "old-low", "new-low", "negative"]
