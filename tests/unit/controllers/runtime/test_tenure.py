"""A lease's tenure by this process's own clock: from when the renewal was sent, for the
TTL etcd answered, less the margin a request needs to arrive."""

from __future__ import annotations

from berth.controllers.runtime.tenure import Tenure, margin_for


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_holds_from_the_renewal_sent_for_its_ttl_less_the_margin() -> None:
    clock = Clock()
    tenure = Tenure(0.5, clock)
    assert not tenure.holds()  # never granted
    tenure.renewed(clock.now, 10)  # sent now, 10 s left in etcd's answer
    clock.now += 9.4
    assert tenure.holds() and round(tenure.left(), 6) == 0.6
    clock.now += 0.2  # within the margin: a request sent now might arrive too late
    assert not tenure.holds()


def test_a_paused_process_does_not_hold_when_it_resumes() -> None:
    """SIGSTOP past the lease: the monotonic clock ran on, and nothing renewed."""
    clock = Clock()
    tenure = Tenure(margin_for(2), clock)
    tenure.renewed(clock.now, 2)
    assert tenure.holds()
    clock.now += 5.0
    assert not tenure.holds() and tenure.left() < 0


def test_a_renewal_counts_from_when_it_was_sent_and_an_older_one_never_shortens() -> None:
    clock = Clock()
    tenure = Tenure(0.0, clock)
    sent = clock.now
    clock.now += 3.0  # etcd was slow to answer: its TTL counts from before that
    tenure.renewed(sent, 10)
    assert round(tenure.left(), 6) == 7.0
    tenure.renewed(sent - 5, 10)  # a late answer to an older renewal
    assert round(tenure.left(), 6) == 7.0


def test_an_ended_lease_holds_no_more_until_renewed() -> None:
    clock = Clock()
    tenure = Tenure(0.0, clock)
    tenure.renewed(clock.now, 10)
    tenure.end()
    assert not tenure.holds()
    tenure.renewed(clock.now, 10)  # a new term
    assert tenure.holds()


def test_the_margin_is_a_tenth_of_the_ttl_at_most_a_second() -> None:
    assert (margin_for(2), margin_for(15), margin_for(60)) == (0.2, 1.0, 1.0)
