"""An agent removes at most a share of its cluster at once (karmada #5406: an agent that
came back carried out every queued deletion at once and emptied its cluster)."""

from __future__ import annotations

from berth.controllers.propagator.agent.budget import Budget


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_removals_beyond_the_share_wait_for_the_window_and_say_why() -> None:
    clock = Clock()
    budget = Budget(share=0.25, least=2, window=60.0, clock=clock)
    assert budget.allowed(40) == 10 and budget.allowed(4) == 2  # never fewer than least
    taken = [budget.take(40)[0] for _ in range(12)]
    assert taken[:10] == [""] * 10
    assert taken[10:] == ["held: 10 applications removed in the last 60 s, at most 10 at "
                          "once (25% of the 40 here)"] * 2
    assert budget.retry_after() == 60.0
    clock.now += 30
    assert budget.take(40)[0] != ""  # the window has not moved past the first removals
    clock.now += 30
    assert budget.take(40) == ("", 1060.0)  # it has now


def test_removals_kept_from_before_count() -> None:
    """A restarted agent starts from the removals it recorded, not afresh."""
    clock = Clock()
    budget = Budget(share=0.25, least=2, window=60.0, clock=clock, taken=[990.0, 995.0])
    assert budget.take(4)[0].startswith("held: 2 applications removed")
    clock.now = 1051.0
    assert budget.take(4) == ("", 1051.0) and budget.times() == [995.0, 1051.0]
    budget.give_back(1051.0)
    assert budget.times() == [995.0]
