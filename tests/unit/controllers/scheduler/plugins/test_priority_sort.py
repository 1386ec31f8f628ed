"""PrioritySort: the queue's order — the higher priority first (a class's, or the
application's own), then the oldest."""

from __future__ import annotations

from berth.controllers.scheduler.plugins.priority_sort import PrioritySort
from berth.controllers.scheduler.priorities import resolve
from berth.store.documents import Metadata, PriorityClass
from berth.store.documents.priority import PreemptionPolicy, PriorityClassSpec
from berth_testkit.fakes.scheduler import app


def test_higher_priority_first_then_the_oldest_in_the_queue() -> None:
    sort = PrioritySort()
    critical = PriorityClass(Metadata("critical"), PriorityClassSpec(value=20))
    low = PriorityClass(Metadata("low"), PriorityClassSpec(value=-5, global_default=True))
    classes = {"critical": critical, "low": low}
    waiting = [(app("late-high", priority=10), 3.0), (app("old-default"), 1.0),
               (app("new-zero", priority=0), 2.0), (app("early-high", priority=10), 0.5),
               (app("negative", priority=-1), 0.0),
               (app("classed", priority_class="critical"), 4.0)]
    ordered = sorted(waiting, key=lambda w: sort.sort_key(
        w[0], w[1], resolve(w[0], classes, low).value))
    # the class's 20 first; an application that gives 0 is above the default class's -5
    assert [s.ref.name for s, _ in ordered] == [
        "classed", "early-high", "late-high", "new-zero", "negative", "old-default"]


def test_an_applications_own_never_is_honoured_under_any_class() -> None:
    """#72: ``preemptionPolicy: Never`` beside a class name was ignored silently (the
    class's PreemptLowerPriority won). Never can only make it less aggressive, so it
    wins; the class's Never wins over an application's PreemptLowerPriority."""
    never, lower = PreemptionPolicy.NEVER, PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    critical = PriorityClass(Metadata("critical"), PriorityClassSpec(value=20))
    gentle = PriorityClass(Metadata("gentle"), PriorityClassSpec(
        value=5, preemption_policy=never, global_default=True))
    classes = {"critical": critical, "gentle": gentle}
    cases = [  # (class named, its own policy) → (value, policy)
        (("critical", never), (20, never)),
        (("critical", lower), (20, lower)),
        (("critical", None), (20, lower)),
        (("gentle", lower), (5, never)),
        ((None, never), (5, never)),  # the default class, and its own Never
    ]
    for (cls, own), want in cases:
        got = resolve(app("a", priority_class=cls, preemption_policy=own), classes, gentle)
        assert (got.value, got.policy) == want, (cls, own, got)
        assert got.may_preempt is (want[1] is lower)
    under = resolve(app("a", priority_class="critical", preemption_policy=never), classes,
                    None)
    assert under.source == "class critical, its own Never"
