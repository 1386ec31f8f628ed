"""The scheduler's cache: what it assumes of a cluster's capacity, and for how long."""

from __future__ import annotations

import random
import time

import msgspec

from berth.controllers.scheduler.cache import Cache
from berth.controllers.scheduler.framework import Fleet
from berth.store import Store, encode, keys
from berth.store.documents import Binding, BindingMeta, BindingSpec, BindingStatus, Target
from berth.store.documents.base import ObjectRef
from berth_testkit.scheduler_env import application, cluster, put, wait_for


def _status(store: Store, name: str, placed: dict[str, int]) -> int:
    """``name`` reports 2 CPUs, none requested but by the pods ``placed`` lists."""
    requested = {"cpu": 1500} if placed else {}
    return put(store, keys.status_key("Cluster", "default", name), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster", "metadata": {"name": name,
                                                              "namespace": "default"},
        "status": {"state": "ONLINE", "capacity": {
            "allocatable": {"cpu": 2000, "memory": 8 << 30, "pods": 110},
            "requested": requested, "nodes": 1, "placed": placed}}}))


def _application(store: Store, name: str, requests: dict[str, object]) -> None:
    """Application ``name``: one Deployment of one replica asking for ``requests``."""
    labels = {"app": name}
    application(store, name, manifest=[{
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"requests": requests}}]}}}}])


def _bind(store: Store, name: str, cluster: str) -> int:
    return put(store, keys.binding_key("Application", "default", name), encode(Binding(
        BindingMeta(name, "default"),
        BindingSpec(ObjectRef("Application", name, "default"), 1,
                    [Target("Cluster", cluster, "default")]),
        BindingStatus("Scheduled"))))


def _synced_fleet(cache: Cache, app: str) -> Fleet:
    """The fleet of application ``app`` once ``cache`` has read everything."""
    assert cache.wait_synced(10)
    subject = cache.subject(keys.resource_key("Application", app, "default"))
    assert subject is not None
    return cache.fleet(subject)


def _app(store: Store, name: str) -> None:
    """``name`` asking for 1.5 CPUs, placed on c1."""
    _application(store, name, {"cpu": "1500m"})
    _bind(store, name, "c1")


def test_an_assumption_expires_on_time_without_anything_else_changing(store: Store) -> None:
    """What berth placed on a cluster that has not reported its pods counts against the
    cluster's free capacity for ``assume_ttl`` seconds; then the report is believed —
    in the fleet's index too, though nothing was written meanwhile. A report that counts
    the pods ends the assumption at once."""
    cluster(store, "c1", online=False)
    _status(store, "c1", {})
    _app(store, "web")
    cache = Cache(store, assume_ttl=2.0)
    cache.start()
    try:
        fleet = _synced_fleet(cache, "web")
        assert [c.ref.name for c in fleet.candidates] == ["c1"]

        def free_cpu() -> int:
            room = cache.rooms(fleet).rooms[0]
            assert room is not None
            return room.free.cpu

        seen = time.time()
        assert free_cpu() == 500  # 2 CPUs less the 1.5 web asks for, assumed
        wait_for(lambda: free_cpu() == 2000 or None, timeout=10)
        assert time.time() - seen > 1.0  # not before (the binding was seen at `seen`)

        _app(store, "api")  # a second placement, assumed again ...
        wait_for(lambda: free_cpu() == 500 or None, timeout=10)
        revision = _status(store, "c1", {"default/api": 1})  # ... until the report counts
        skey = keys.status_key("Cluster", "default", "c1")
        wait_for(lambda: ((item := cache.status.item(skey)) is not None
                 and item.mod_revision >= revision) or None, timeout=10)
        assert free_cpu() == 500  # its pod, in the report: no longer assumed too
    finally:
        cache.stop()


def test_the_room_kept_after_each_placement_is_the_room_summed_afresh(store: Store) -> None:
    """The Room of a cluster is kept up to date by the changes to its placements, not
    summed again after each: through random moves, removals, bursts of more changes than
    are kept and a report that starts counting some pods, each cluster's free capacity
    is always its report less every placement it does not count yet."""
    rng = random.Random(7)
    names = ["c1", "c2", "c3"]
    for name in names:
        cluster(store, name, online=False)
    asks = {f"a{i}": (rng.choice((100, 250, 500)), rng.choice((0, 0, 1, 2)))
            for i in range(24)}
    placed: dict[str, int] = {}  # pods running, by application, as reports will count them
    reported: dict[str, set[str]] = {}  # cluster → the applications its report counts

    def report(name: str) -> int:
        reported[name] = {k for k in placed if where.get(k[8:]) == name}
        return put(store, keys.status_key("Cluster", "default", name), msgspec.json.encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"},
            "status": {"state": "ONLINE", "capacity": {
                "allocatable": {"cpu": 64000, "memory": 8 << 30, "pods": 110,
                                "nvidia.com/gpu": 64},
                "requested": {}, "nodes": 1,
                "placed": {k: placed[k] for k in reported[name]}}}}))

    where: dict[str, str | None] = {}
    for name in names:
        report(name)
    for app, (cpu, gpu) in asks.items():
        requests: dict[str, object] = {"cpu": f"{cpu}m"}
        if gpu:
            requests["nvidia.com/gpu"] = gpu
        _application(store, app, requests)

    cache = Cache(store, assume_ttl=3600.0)
    cache.start()
    try:
        fleet = _synced_fleet(cache, "a0")
        at = {c.ref.name: i for i, c in enumerate(fleet.candidates)}
        assert sorted(at) == names

        def bind(app: str, target: str | None) -> int:
            where[app] = target
            if target is None:
                return store.delete(keys.binding_key("Application", "default", app))
            return _bind(store, app, target)

        def check(revision: int, step: int) -> None:
            wait_for(lambda: cache.bindings.revision >= revision or None, timeout=10)
            rooms = cache.rooms(fleet).rooms
            for name in names:
                unseen = [a for a, w in where.items()
                          if w == name and f"default/{a}" not in reported[name]]
                room = rooms[at[name]]
                assert room is not None
                assert room.free.cpu == 64000 - sum(asks[a][0] for a in unseen), (step, name)
                assert room.free.get("nvidia.com/gpu") == 64 - sum(
                    asks[a][1] for a in unseen), name

        for step in range(60):
            if step % 15 == 14:  # more changes than are kept, before the next read
                for _ in range(45):
                    last = bind(rng.choice(sorted(asks)), rng.choice(names))
            elif step == 30:  # the report now counts some pods
                for app in rng.sample([a for a, w in where.items() if w], 5):
                    placed[f"default/{app}"] = 1
                revisions = {name: report(name) for name in names}
                wait_for(lambda wanted=revisions: all(
                    (item := cache.status.item(keys.status_key("Cluster", "default", n)))
                    is not None and item.mod_revision >= r for n, r in wanted.items())
                    or None)
                last = max(revisions.values())
            else:
                app = rng.choice(sorted(asks))
                target = rng.choice([*names, None]) if where.get(app) else rng.choice(names)
                last = bind(app, target)
            check(last, step)
    finally:
        cache.stop()
