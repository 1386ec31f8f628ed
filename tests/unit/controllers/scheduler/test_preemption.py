"""Making room, carried out by the Scheduler over etcd in memory: the plan in the
preemptor's Binding, its room reserved, the victim moved, the preemptor placed once
the cluster reports the room free; Never, refusals, and no chain reaction."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from berth.controllers.scheduler.config import Preemption, SchedulerConfig
from berth.store import events, keys, ledger
from berth.store.documents import Binding, Yield
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import application, binding, cluster, in_memory, put, targets


def deployment(name: str, cpu: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
             "spec": {"replicas": 1, "template": {"spec": {"containers": [
                 {"name": "c", "resources": {"requests": {"cpu": f"{cpu}m"}}}]}}}}]


def report(store: MemoryStore, name: str, size: int, placed: dict[str, int]) -> None:
    """Cluster ``name`` reports ``size`` millicores and these applications' pods
    (name → millicores) running."""
    body = {"api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"},
            "status": {"state": "ONLINE", "capacity": {
                "allocatable": {"cpu": size, "pods": 110}, "nodes": 1,
                "requested": {"cpu": sum(placed.values()), "pods": len(placed)},
                "placed": {f"default/{a}": 1 for a in placed}}}}
    put(store, keys.status_key("Cluster", "default", name), msgspec.json.encode(body))


def app(store: MemoryStore, name: str, cpu: int, **spec: Any) -> None:
    application(store, name, manifest=deployment(name, cpu), **spec)


def until(store: MemoryStore, name: str, check: Any, timeout: float = 10.0) -> Binding:
    store.memory.wait_until(lambda: (b := binding(store, name)) is not None and check(b),
                            timeout=timeout)
    b = binding(store, name)
    assert b is not None
    return b


def pinned(store: MemoryStore, **held: tuple[str, int, int]) -> None:
    """Clusters of 4000 millicores, each holding one application (name, millicores,
    priority) placed there by name."""
    for where, (name, cpu, priority) in held.items():
        cluster(store, where)
        report(store, where, 4000, {})
        app(store, name, cpu, priority=priority,
            placement={"policy": "PickFixed", "clusterNames": [where]})


def fleet(store: MemoryStore) -> None:
    """a holds low (3000 of 4000), b holds busy (1000 of 4000): high (3500) fits nowhere."""
    pinned(store, a=("low", 3000, 1), b=("busy", 1000, 50))


def test_a_victim_is_moved_and_the_preemptor_placed_where_it_left(
        store: MemoryStore, clock: FakeClock) -> None:
    fleet(store)
    with in_memory(store, clock):
        until(store, "low", lambda b: targets(b) == ["a"])
        until(store, "busy", lambda b: targets(b) == ["b"])
        report(store, "a", 4000, {"low": 3000})
        report(store, "b", 4000, {"busy": 1000})
        # low may now go anywhere: its placement no longer pins it
        app(store, "low", 3000, priority=1, generation=2)
        app(store, "high", 3500, priority=100)
        b = until(store, "high", lambda b: b.status.preemption is not None)
        plan = b.status.preemption
        assert plan is not None and plan.cluster == "default/a"
        assert [(v.application, v.action, v.to) for v in plan.victims] == [
            ("default/low", Yield.MOVE, ["default/b"])]
        assert plan.reserved == {"cpu": 3500, "pods": 1}
        assert b.status.state == "Unschedulable" and b.spec.targets == []
        assert b.status.reason.startswith("making room on default/a until ")
        moved = until(store, "low", lambda b: targets(b) == ["b"])
        # a change that sends every waiting subject back to the queue (a cluster
        # relabelled): high's plan goes on, not replaced by another
        cluster(store, "b", labels={"zone": "2"})
        time.sleep(0.5)
        again = binding(store, "high")
        assert again is not None and again.status.preemption == plan
        assert moved.status.yielded_to == "default/high"
        assert moved.status.yielded_plan == plan.plan
        # low's copy still runs on a (make-before-break): high waits
        report(store, "b", 4000, {"busy": 1000, "low": 3000})
        assert binding(store, "high").status.preemption is not None  # type: ignore[union-attr]
        # a reports low gone: high is placed there, the plan done
        report(store, "a", 4000, {})
        placed = until(store, "high", lambda b: targets(b) == ["a"])
        assert placed.status.preemption is None and placed.status.state == "Scheduled"
        assert placed.status.explanation[0] == {"room_made": {
            "on": "default/a", "plan": plan.plan, "by": ["default/low (move to default/b)"]}}


def test_never_and_refusals_make_no_room(store: MemoryStore, clock: FakeClock) -> None:
    fleet(store)
    for name, cpu in (("low", 3000), ("busy", 1000)):
        application(store, name, manifest=deployment(name, cpu), priority=1,
                    placement={"policy": "PickFixed",
                               "clusterNames": ["a" if name == "low" else "b"]},
                    preemptible={"move": False, "stop": False})
    with in_memory(store, clock):
        until(store, "low", lambda b: targets(b) == ["a"])
        report(store, "a", 4000, {"low": 3000})
        report(store, "b", 4000, {"busy": 1000})
        app(store, "never", 3500, priority=100, preemptionPolicy="Never")
        b = until(store, "never", lambda b: b.status.state == "Unschedulable")
        assert b.status.preemption is None and "no room can be made" not in b.status.reason
        app(store, "high", 3500, priority=100)
        b = until(store, "high", lambda b: "no room can be made" in b.status.reason)
        assert b.status.preemption is None
        assert targets(until(store, "low", lambda b: True)) == ["a"]


def test_a_stopped_victim_makes_no_room_in_turn(store: MemoryStore, clock: FakeClock) -> None:
    """No chain reaction: low is stopped for high (it fits nowhere else) and, though more
    important than lower, it takes nothing from it."""
    pinned(store, a=("low", 3000, 10), b=("lower", 3000, 1))
    with in_memory(store, clock, SchedulerConfig(preemption=Preemption(deadline=60))):
        until(store, "low", lambda b: targets(b) == ["a"])
        until(store, "lower", lambda b: targets(b) == ["b"])
        report(store, "a", 4000, {"low": 3000})
        report(store, "b", 4000, {"lower": 3000})
        app(store, "high", 3500, priority=100, placement={"policy": "PickFixed",
                                                          "clusterNames": ["a"]})
        stopped = until(store, "low", lambda b: b.status.state == "Unschedulable")
        assert stopped.spec.targets == [] and stopped.status.yielded_to == "default/high"
        assert "to make room for default/high" in stopped.status.reason
        records, _ = ledger.history(store, "Application", "default", "low")
        last = records[-1][1]
        assert (last.event, last.trigger) == ("Unschedulable", "preemption")
        assert last.detail.startswith("for default/high (plan ")
        store.memory.wait_until(lambda: any(
            e.reason == "Preempted" and e.involvedObject.name == "low"
            for _, e in events.listed(store)[0]))
        report(store, "a", 4000, {})
        until(store, "high", lambda b: targets(b) == ["a"])
        # low, free to go anywhere now, fits nowhere, and would fit on b without lower
        # (priority 1 < 10): it takes nothing from it
        app(store, "low", 3000, priority=10, generation=2)
        again = until(store, "low", lambda b: b.spec.generation == 2)
        assert again.status.state == "Unschedulable" and again.spec.targets == []
        assert again.status.preemption is None and again.status.yielded_to == "default/high"
        assert targets(binding(store, "lower")) == ["b"]  # type: ignore[arg-type]


def test_two_preemptors_never_take_the_same_room(store: MemoryStore, clock: FakeClock) -> None:
    """One victim's room, two arrivals that each need it: the first plans and reserves
    it; the second finds it taken (reserved, its victim promised) and makes none."""
    pinned(store, a=("low", 3000, 1), b=("busy", 4000, 100))
    with in_memory(store, clock):
        until(store, "low", lambda b: targets(b) == ["a"])
        until(store, "busy", lambda b: targets(b) == ["b"])
        report(store, "a", 4000, {"low": 3000})
        report(store, "b", 4000, {"busy": 4000})
        app(store, "first", 3500, priority=100)
        first = until(store, "first", lambda b: b.status.preemption is not None)
        assert first.status.preemption is not None
        app(store, "second", 3500, priority=100)
        second = until(store, "second", lambda b: b.status.state == "Unschedulable")
        assert second.status.preemption is None and second.spec.targets == []
        # low (pinned to a) is stopped for first alone
        stopped = until(store, "low", lambda b: b.status.state == "Unschedulable")
        assert stopped.status.yielded_to == "default/first"
