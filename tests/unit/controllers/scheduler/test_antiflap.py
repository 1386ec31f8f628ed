"""The anti-flap policy: each rule holds an optional move back, and only that."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from berth.controllers.propagator.observer import _joined, _returned
from berth.controllers.runtime import Event, EventType
from berth.controllers.scheduler.antiflap import AntiFlap, AntiFlapConfig
from berth.controllers.scheduler.cache import Cache
from berth.store import EtcdConfig, Store, keys
from berth.store.documents import ClusterState, ClusterStatus, MovesStarted, StatusMeta
from berth.store.documents.pace import PaceSpec

A = frozenset({("Cluster", "default", "a")})
B = frozenset({("Cluster", "default", "b")})
T0 = datetime(2026, 11, 23, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return T0 + timedelta(seconds=self.t)


def policy(**kw: float) -> tuple[AntiFlap, Clock]:
    clock = Clock()
    return AntiFlap(AntiFlapConfig(**kw), clock=clock, now=clock.wall), clock  # type: ignore[arg-type]


def test_the_defaults_hold_nothing_but_a_move_to_a_cluster_just_back() -> None:
    p, clock = policy()
    assert p.config.active and p.config.settle == 60.0
    assert p.check("k", B, "b", 0.0, T0) is None  # a metric change among steady clusters
    assert p.check("k", B, "b", 0.0, T0, returned=clock.t - 70) is None


def test_settle_holds_a_move_to_a_cluster_back_online_until_it_has_stayed() -> None:
    p, clock = policy(settle=30)
    held = p.check("k", B, "b", 1.0, None, returned=clock.t - 10)
    assert held is not None and held.rule == "settle" and held.retry_after == 20
    assert "came back ONLINE" in held.reason and "would move to b" in held.reason
    clock.t += 20
    assert p.check("k", B, "b", 1.0, None, returned=clock.t - 30) is None
    off, clock = policy(settle=0)
    assert not off.config.active
    assert off.check("k", B, "b", 1.0, None, returned=clock.t) is None


def test_margin_holds_a_small_gain_and_lets_a_large_one_go() -> None:
    p, _ = policy(margin=0.1)
    held = p.check("k", B, "b", 0.05, None)
    assert held is not None and held.rule == "margin" and held.retry_after is None
    assert "would move to b" in held.reason
    assert p.check("k", B, "b", 0.2, None) is None
    assert p.check("k", B, "b", float("inf"), None) is None  # a better tier


def test_hold_waits_until_the_same_move_stayed_better_long_enough() -> None:
    p, clock = policy(hold=10)
    held = p.check("k", B, "b", 1.0, None)
    assert held is not None and held.rule == "hold" and held.retry_after == pytest.approx(10)
    clock.t += 6
    held = p.check("k", B, "b", 1.0, None)
    assert held is not None and held.retry_after == pytest.approx(4)
    other = frozenset({("Cluster", "default", "c")})
    assert p.check("k", other, "c", 1.0, None) is not None  # another move starts over
    clock.t += 6
    assert p.check("k", other, "c", 1.0, None) is not None
    clock.t += 4
    assert p.check("k", other, "c", 1.0, None) is None
    p.settled("k")  # the better one went away: the next one waits the full time again
    assert p.check("k", other, "c", 1.0, None) is not None


def test_min_dwell_counts_from_the_last_move() -> None:
    p, clock = policy(min_dwell=30)
    moved_at = clock.wall() - timedelta(seconds=20)
    held = p.check("k", B, "b", 1.0, moved_at)
    assert held is not None and held.rule == "min_dwell"
    assert held.retry_after == pytest.approx(10)
    assert p.check("k", B, "b", 1.0, moved_at - timedelta(seconds=11)) is None
    assert p.check("k", B, "b", 1.0, None) is None  # never moved


def test_the_budget_is_fleet_wide_per_interval() -> None:
    p, clock = policy(budget=2, budget_interval=60)
    for key in ("x", "y"):
        assert p.check(key, B, "b", 1.0, None) is None
        p.moved(key, A, B, optional=True)
    p.moved("forced", A, B, optional=False)  # a forced move does not spend the budget
    held = p.check("z", B, "b", 1.0, None)
    assert held is not None and held.rule == "budget"
    assert held.retry_after == pytest.approx(60)
    clock.t += 60
    assert p.check("z", B, "b", 1.0, None) is None


def test_the_record_of_moves_carries_the_pace_and_the_budget_to_the_next_leader() -> None:
    """By the second each move started in (counted to its end); every move of the last
    minute and no older, the optional ones the budget counts and no more than it does."""
    p, clock = policy(budget=2, budget_interval=300)
    clock.t = 100.4
    p.moved("first", frozenset(), A, optional=False)  # a placement: no move
    p.moved("x", A, B, optional=True)
    p.moved("y", A, B, optional=True)
    clock.t = 130.0
    p.moved("z", B, A, optional=True)
    p.moved("forced", B, A, optional=False)
    at = int((T0 + timedelta(seconds=101)).timestamp())
    record = p.record()
    assert record.started == [(at, 2), (at + 29, 2)]
    assert record.optional == [(at, 2), (at + 29, 1)]  # holding the newest two
    nxt, later = policy(budget=2, budget_interval=300)
    later.t = 150.0  # the next leader, 20 s on
    nxt.started_before(record)
    held = nxt.check("w", B, "b", 1.0, None, pace=PaceSpec(per_minute=4))
    assert held is not None and held.rule == "per_minute"
    assert held.retry_after == pytest.approx(11.0)  # the first two: second 101 + 60 - 150
    held = nxt.check("w", B, "b", 1.0, None)
    assert held is not None and held.rule == "budget"
    assert nxt.record() == record  # handed on as it came
    later.t = 162.0  # the pace lets it go; the budget does not yet
    held = nxt.check("w", B, "b", 1.0, None, pace=PaceSpec(per_minute=4))
    assert held is not None and held.rule == "budget"
    moved = nxt.record()
    assert moved.started == [(at + 29, 2)] and moved.optional == [(at, 2), (at + 29, 1)]
    later.t = 402.0  # 300 s after the first two: they no longer count
    assert nxt.record().optional == [(at + 29, 1)]


def test_a_record_from_a_clock_ahead_counts_from_now() -> None:
    p, clock = policy()
    ahead = int((T0 + timedelta(seconds=clock.t + 30)).timestamp())
    p.started_before(MovesStarted(started=[(ahead, 1), (ahead - 3600, 5)]))
    held = p.check("w", B, "b", 1.0, None, pace=PaceSpec(per_minute=1))
    assert held is not None and held.retry_after == pytest.approx(60.0)


def flaps() -> float:
    return REGISTRY.get_sample_value("berth_scheduler_flaps_total") or 0.0


def test_a_move_back_within_the_window_is_a_flap() -> None:
    p, clock = policy(flap_window=300)
    before = flaps()
    p.moved("k", A, B, optional=True)
    clock.t += 10
    p.moved("k", B, A, optional=True)  # back to where it was 10 s ago
    assert flaps() == before + 1
    clock.t += 400
    p.moved("k", A, B, optional=True)  # back, but long after
    assert flaps() == before + 1


@pytest.mark.parametrize("bad", [{"margin": -1}, {"budget_interval": 0}, {"budget": -2}])
def test_bad_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="anti_flap"):
        AntiFlapConfig(**bad)  # type: ignore[arg-type]


def _status(state: str, returned: datetime | None = None, joined: datetime | None = T0,
            probed: datetime | None = None) -> ClusterStatus:
    return ClusterStatus(StatusMeta("c", "default"), ClusterState(
        state, returned=returned, joined=joined, probed=probed))


def test_the_observer_records_when_a_cluster_came_back_and_keeps_it_while_online() -> None:
    now = datetime.now(UTC)
    assert _returned(None, "ONLINE", now) is None  # first seen: it came back from nothing
    assert _returned(_status("OFFLINE"), "ONLINE", now) == now
    assert _returned(_status("UNHEALTHY"), "ONLINE", now) == now
    assert _returned(_status("ONLINE", T0), "ONLINE", now) == T0
    assert _returned(_status("ONLINE", T0), "OFFLINE", now) is None
    # OFFLINE only while its agent had not joined yet (a run on two workers: the move to
    # it was held for a minute by `settle`): its first ONLINE is no return
    assert _returned(_status("OFFLINE", joined=None), "ONLINE", now) is None


def test_the_observer_records_when_a_cluster_was_first_online_and_keeps_it() -> None:
    now = datetime.now(UTC)
    assert _joined(None, "OFFLINE", now) is None
    assert _joined(None, "ONLINE", now) == now
    assert _joined(_status("OFFLINE", joined=None), "ONLINE", now) == now
    assert _joined(_status("ONLINE", joined=T0), "OFFLINE", now) == T0
    # written by a berth before `joined`, while ONLINE: joined when it was probed so
    ago = now - timedelta(minutes=5)
    assert _joined(_status("ONLINE", joined=None, probed=ago), "OFFLINE", now) == ago


def test_a_scheduler_knows_a_cluster_came_back_from_its_status_alone() -> None:
    """A scheduler that starts (or starts leading) after the cluster came back reads when
    from the status, so `settle` holds as it would have in the leader that saw it."""
    cache = Cache(Store(EtcdConfig(url="http://127.0.0.1:1")))
    key = keys.status_key("Cluster", "default", "c")
    ago = datetime.now(UTC) - timedelta(seconds=20)
    cache._on_cluster_status(Event(EventType.ADDED, key, _status("ONLINE", ago), None, 5))
    back = cache.returned("Cluster", "default", "c")
    assert back is not None and 19 < time.monotonic() - back < 25
    cache._on_cluster_status(Event(EventType.MODIFIED, key, _status("OFFLINE"),
                                   _status("ONLINE", ago), 6))
    assert cache.returned("Cluster", "default", "c") is None
    # ONLINE for the first time once its agent joined (the observer records `joined` and
    # no return): no return here either (a two-worker CI run: settle held a move to a
    # pull cluster for a minute, this process taking OFFLINE → ONLINE for a return)
    cache._on_cluster_status(Event(EventType.MODIFIED, key, _status("ONLINE"),
                                   _status("OFFLINE", joined=None), 7))
    assert cache.returned("Cluster", "default", "c") is None
    # an observer that records neither (an older berth): the transition as seen here
    cache._on_cluster_status(Event(EventType.MODIFIED, key, _status("ONLINE", joined=None),
                                   _status("OFFLINE", joined=None), 7))
    back = cache.returned("Cluster", "default", "c")
    assert back is not None and time.monotonic() - back < 5
    # a cluster first seen ONLINE did not come back from anything
    cache._on_cluster_status(Event(EventType.ADDED, keys.status_key("Cluster", "default", "d"),
                                   _status("ONLINE"), None, 8))
    assert cache.returned("Cluster", "default", "d") is None
