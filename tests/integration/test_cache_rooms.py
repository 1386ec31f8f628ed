"""The scheduler's cache: what it assumes of a cluster's capacity, and for how long."""

from __future__ import annotations

import time

import msgspec

from berth.controllers.scheduler.cache import Cache
from berth.store import Store, encode, keys
from berth.store.documents import Binding, BindingMeta, BindingSpec, BindingStatus, Target
from berth.store.documents.base import ObjectRef
from tests.integration.scheduler_env import cluster, put, wait_for


def _status(store: Store, name: str, placed: dict[str, int]) -> int:
    """``name`` reports 2 CPUs, none requested but by the pods ``placed`` lists."""
    requested = {"cpu": 1500} if placed else {}
    return put(store, keys.status_key("Cluster", "default", name), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster", "metadata": {"name": name,
                                                              "namespace": "default"},
        "status": {"state": "ONLINE", "capacity": {
            "allocatable": {"cpu": 2000, "memory": 8 << 30, "pods": 110},
            "requested": requested, "nodes": 1, "placed": placed}}}))


def _app(store: Store, name: str) -> None:
    labels = {"app": name}
    put(store, keys.resource_key("Application", name, "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"manifest": [{
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {"containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {
                        "cpu": "1500m"}}}]}}}}]}}))
    put(store, keys.binding_key("Application", "default", name), encode(Binding(
        BindingMeta(name, "default"),
        BindingSpec(ObjectRef("Application", name, "default"), 1,
                    [Target("Cluster", "c1", "default")]),
        BindingStatus("Scheduled"))))


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
        assert cache.wait_synced(10)
        subject = cache.subject(keys.resource_key("Application", "web", "default"))
        assert subject is not None
        fleet = cache.fleet(subject)
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
