"""The Scheduler over etcd in memory and a clock the test moves: no server, no sleep.

(The same promises against a real etcd and the real process are in
tests/integration/test_scheduler.py; these hold the scheduler's own logic to
them where time is what decides.)"""

from __future__ import annotations

import time

from prometheus_client import REGISTRY

from berth.controllers.scheduler.config import PluginSpec, SchedulerConfig
from berth.store.documents import Binding
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import (
    application,
    binding,
    cluster,
    in_memory,
    metric,
    picture,
    targets,
    value,
)


def bound(store: MemoryStore, name: str, state: str = "Scheduled") -> Binding:
    """The application's Binding once it is in ``state`` (waiting on writes, not time)."""
    store.memory.wait_until(lambda: (b := binding(store, name)) is not None
                            and b.status.state == state)
    b = binding(store, name)
    assert b is not None
    return b


def test_an_application_is_bound_where_it_fits_at_the_clocks_time(
        store: MemoryStore, clock: FakeClock) -> None:
    cluster(store, "de", labels={"location": "DE"})
    cluster(store, "fr", labels={"location": "FR"})
    application(store, "web", constraints={"cluster": {"labels": ["location is DE"]}})
    with in_memory(store, clock):
        b = bound(store, "web")
        assert targets(b) == ["de"]
        assert b.spec.scheduled == clock.now() and b.metadata.created == clock.now()
        assert b.status.reason == "1/2 clusters are available: 1 label constraint 'location == DE'"


def test_an_incomplete_gang_is_given_up_when_the_clock_passes_its_timeout(
        store: MemoryStore, clock: FakeClock) -> None:
    config = SchedulerConfig(plugins={"permit": [PluginSpec("Gang", args={"timeout": 30})]})
    cluster(store, "c")
    gang = {"name": "pair-of-three", "minMember": 3}
    application(store, "g1", gang=gang)
    application(store, "g2", gang=gang)
    application(store, "probe")  # decided after both members (queued in key order)
    with in_memory(store, clock, config) as s:
        bound(store, "probe")
        assert binding(store, "g1") is None and binding(store, "g2") is None  # waiting
        assert set(s._waiting) == {"/berth/v1/applications/default/g1",
                                   "/berth/v1/applications/default/g2"}
        clock.advance(29.0)
        application(store, "probe-2")  # the loop turns, the members still wait
        bound(store, "probe-2")
        assert binding(store, "g1") is None
        clock.advance(2.0)
        for name in ("g1", "g2"):
            b = bound(store, name, "Unschedulable")
            assert b.status.reason == "gang pair-of-three: not enough members in time"
            assert b.spec.targets == []


def _awaited() -> float:
    return REGISTRY.get_sample_value("berth_scheduler_attempts_total",
                                     {"result": "awaiting-values"}) or 0.0


def _looked(at_least: float) -> None:
    """Until the scheduler has looked at a waiting placement ``at_least`` times in all
    (an attempt writes nothing: polled, not waited on as writes are)."""
    deadline = time.monotonic() + 10
    while _awaited() < at_least:
        assert time.monotonic() < deadline, "the scheduler never looked"
        time.sleep(0.01)


def test_a_first_placement_waits_for_the_first_whole_picture_of_its_metrics(
        store: MemoryStore, clock: FakeClock) -> None:
    """A new fleet: placed before the values came, web would go to whichever cluster and
    move a moment later (the demo's, dresden then paris in the same second)."""
    cluster(store, "dresden", metrics={"green-de": 1.0})
    cluster(store, "paris", metrics={"green-fr": 1.0})
    metric(store, "green-de")
    metric(store, "green-fr")
    picture(store, complete=False)  # the metrics-cache is gathering its first
    application(store, "web")
    before = _awaited()
    with in_memory(store, clock):
        _looked(before + 2)  # looked at twice, and waited
        assert binding(store, "web") is None
        value(store, "green-de", 0.1, publish=False)
        value(store, "green-fr", 0.9, publish=False)
        picture(store)  # whole: the values count
        assert targets(bound(store, "web")) == ["paris"]


def test_the_wait_for_the_first_picture_is_bounded(store: MemoryStore,
                                                   clock: FakeClock) -> None:
    cluster(store, "dresden", metrics={"green-de": 1.0})
    picture(store, complete=False)  # a provider that never answers
    application(store, "web")
    before = _awaited()
    with in_memory(store, clock, SchedulerConfig(first_picture_wait=30)):
        _looked(before + 1)
        clock.advance(31.0)
        b = bound(store, "web")
        assert targets(b) == ["dresden"]


def test_nothing_waits_without_a_metrics_cache_gathering(store: MemoryStore,
                                                         clock: FakeClock) -> None:
    cluster(store, "dresden", metrics={"green-de": 1.0})  # no marker: no metrics-cache
    application(store, "web")
    before = _awaited()
    with in_memory(store, clock):
        assert targets(bound(store, "web")) == ["dresden"]
    assert _awaited() == before
