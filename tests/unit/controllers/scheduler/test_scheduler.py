"""The Scheduler over etcd in memory and a clock the test moves: no server, no sleep.

(The same promises against a real etcd and the real process are in
tests/integration/test_scheduler.py; these hold the scheduler's own logic to
them where time is what decides.)"""

from __future__ import annotations

from berth.controllers.scheduler.config import PluginSpec, SchedulerConfig
from berth.store.documents import Binding
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import application, binding, cluster, in_memory, targets


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
