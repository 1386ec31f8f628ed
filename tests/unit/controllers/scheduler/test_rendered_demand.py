"""The scheduler counts what a cluster will really run: each cluster's demand as the
overrides that select it make it (docs/scheduler.md "Capacity"), over etcd in memory."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from berth.controllers.scheduler.framework import Room
from berth.controllers.scheduler.plugins.capacity import Capacity
from berth.store import keys
from berth.store.documents.resources import Demand, Resources
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, rejected_both_ways
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import application, binding, in_memory, put, targets
from berth_testkit.scheduler_env import cluster as stored_cluster
from tests.unit.controllers.scheduler.test_preemption import deployment, report, until


def override(store: MemoryStore, name: str, app_name: str, cluster_name: str,
             operations: list[dict[str, Any]]) -> None:
    put(store, keys.resource_key("Override", name, "default"), msgspec.json.encode({
        "api": "core", "kind": "Override", "metadata": {"name": name, "namespace": "default"},
        "spec": {"applications": {"names": [app_name]}, "clusters": {"names": [cluster_name]},
                 "rules": [{"patch": {"object": {"kind": "Deployment", "name": app_name},
                                      "operations": operations}}]}}))


def test_capacity_judges_each_cluster_by_its_own_demand_both_ways() -> None:
    """The set form and the one-by-one filter agree when one cluster's demand differs."""
    snap = FakeSnapshot([cluster(f"c{i}") for i in range(4)],
                        room_of={f"c{i}": Room(Resources(cpu=4000), Resources(cpu=3000))
                                 for i in range(4)})
    web = app("web", demand=Demand(whole=Resources(cpu=2000)))
    snap.demands[("web", "c2")] = Demand(whole=Resources(cpu=4000))  # doubled there
    by_set, one_by_one = rejected_both_ways(Capacity(), web, snap)
    assert by_set == one_by_one == ["c2"]


def test_an_override_that_doubles_replicas_on_one_cluster_changes_where_it_fits(
        store: MemoryStore, clock: FakeClock) -> None:
    stored_cluster(store, "a")
    stored_cluster(store, "b")
    report(store, "a", 8000, {})  # the emptier: chosen as written
    report(store, "b", 6000, {})
    override(store, "double-on-a", "web", "a",
             [{"op": "replace", "path": "/spec/replicas", "value": 2}])
    # 2 replicas of 5 CPUs fit on neither; 1 (as written) fits on both
    with in_memory(store, clock):
        application(store, "web", manifest=[_deployment("web", 1, 5000)])
        placed = until(store, "web", lambda b: bool(targets(b)))
        assert targets(placed) == ["b"]
        # the override goes: a (emptier) is where it would go now; it stays on b (no
        # cluster is better by capacity alone: a placed application never chases room)
        store.delete(keys.resource_key("Override", "double-on-a", "default"))
        application(store, "other", manifest=[_deployment("other", 1, 5000)])
        other = until(store, "other", lambda b: bool(targets(b)))
        assert targets(other) == ["a"]


def test_a_divided_share_wins_over_an_overrides_replicas_its_requests_count(
        store: MemoryStore, clock: FakeClock) -> None:
    """As the propagator renders: the overrides first, then the share — an override's
    replicas on a divided application's workload do not count, its requests do."""
    for name in ("a", "b"):
        stored_cluster(store, name)
        report(store, name, 4000, {})
    override(store, "bigger-on-a", "web", "a", [
        {"op": "replace", "path": "/spec/replicas", "value": 100},
        {"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/cpu",
         "value": "2"}])
    divided = {"policy": "PickAll", "replicaScheduling": {"type": "Divided",
                                                          "division": "Capacity"}}
    with in_memory(store, clock):
        application(store, "web", manifest=[_deployment("web", 6, 1000)], placement=divided)
        b = until(store, "web", lambda b: bool(targets(b)))
        shares = {t.name: t.replicas for t in b.spec.targets}
        # a fits 2 replicas of 2 CPUs (the override's requests), b 4 of 1 CPU
        assert shares == {"a": 2, "b": 4}, shares
        assert binding(store, "web") is not None


def _deployment(name: str, replicas: int, cpu: int) -> dict[str, Any]:
    d = deployment(name, cpu)[0]
    d["spec"]["replicas"] = replicas
    return d


def test_what_a_placement_takes_is_counted_as_rendered_and_again_when_overrides_change(
        store: MemoryStore, clock: FakeClock) -> None:
    stored_cluster(store, "a")
    report(store, "a", 8000, {})
    override(store, "double-on-a", "web", "a",
             [{"op": "replace", "path": "/spec/replicas", "value": 2}])
    with in_memory(store, clock) as s:
        application(store, "web", manifest=[_deployment("web", 1, 3000)])
        until(store, "web", lambda b: targets(b) == ["a"])

        def free() -> int:
            c = s.cache.candidate_by_key("Cluster/default/a")
            room = s.cache.capacity(c) if c is not None else None
            assert room is not None
            return room.free.cpu

        assert free() == 8000 - 2 * 3000  # assumed as rendered: two replicas there
        store.delete(keys.resource_key("Override", "double-on-a", "default"))
        deadline = time.monotonic() + 10
        while free() != 8000 - 3000:  # counted again, as written: one replica
            assert time.monotonic() < deadline, free()
            time.sleep(0.01)
