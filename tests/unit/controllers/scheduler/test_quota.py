"""A namespace's quota of the fleet (docs/teams.md), in the scheduler over etcd in memory:
what its applications ask together — every copy on every cluster, decisions not yet
written included — never goes over it; one that would stays Unschedulable (kept where
it runs), makes no room by preemption, and is placed once the namespace's use falls;
a new leader counts the use again from the Bindings.

(The real-server twin, a quota on the scheduler and etcd processes: tests/integration/
test_placement_capacity.py.)"""

from __future__ import annotations

from typing import Any

import msgspec

from berth.store import keys
from berth.store.documents import Binding
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import application, binding, cluster, in_memory, put


def policy(store: MemoryStore, namespace: str, **spec: Any) -> None:
    put(store, keys.resource_key("NamespacePolicy", namespace), msgspec.json.encode({
        "api": "core", "kind": "NamespacePolicy", "metadata": {"name": namespace},
        "spec": spec}))


def app(store: MemoryStore, name: str, cpu: int, namespace: str = "team-a",
        replicas: int = 1, **spec: Any) -> None:
    application(store, name, namespace=namespace, manifest=[{
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": f"{cpu}m"}}}]}}}}], **spec)


def until(store: MemoryStore, name: str, state: str, namespace: str = "team-a") -> Binding:
    store.memory.wait_until(lambda: (b := binding(store, name, namespace)) is not None
                            and b.status.state == state, timeout=10)
    b = binding(store, name, namespace)
    assert b is not None
    return b


def on(b: Binding) -> list[str]:
    return sorted(t.name for t in b.spec.targets)


def test_a_namespace_never_goes_over_its_quota_and_a_freed_share_is_used(
        store: MemoryStore, clock: FakeClock) -> None:
    for name in ("a", "b"):
        cluster(store, name, namespace="team-a")
    cluster(store, "other", namespace="team-b")
    policy(store, "team-a", quota={"cpu": "2", "nvidia.com/gpu": 1})
    app(store, "x", 1000)
    app(store, "y", 500, replicas=2)
    with in_memory(store, clock):
        until(store, "x", "Scheduled")
        until(store, "y", "Scheduled")
        app(store, "z", 250)  # 2 cores used of 2
        b = until(store, "z", "Unschedulable")
        assert b.spec.targets == []
        assert b.status.reason == ("over the quota of namespace team-a: cpu 250m asked, "
                                   "0 of 2 left")
        app(store, "big", 3000, namespace="team-b")  # no policy: no quota
        until(store, "big", "Scheduled", namespace="team-b")
        store.delete(keys.resource_key("Application", "x", "team-a"))  # 1 core freed
        assert on(until(store, "z", "Scheduled")) in (["a"], ["b"])
        # every copy counts: on both clusters, 2 x 500m, with 750m left
        app(store, "both", 500, placement={"policy": "PickAll"})
        b = until(store, "both", "Unschedulable")
        assert b.status.reason == ("over the quota of namespace team-a: cpu 1 asked, "
                                   "750m of 2 left")
        # a share freed by asking less, not by leaving: y scaled down to one replica
        app(store, "y", 500, replicas=1, generation=2)
        assert on(until(store, "both", "Scheduled")) == ["a", "b"]  # 1 of 1.25 left


def test_a_new_leader_counts_the_use_from_the_bindings_and_a_policy_change_counts_at_once(
        store: MemoryStore, clock: FakeClock) -> None:
    cluster(store, "a", namespace="team-a")
    policy(store, "team-a", quota={"cpu": "1", "memory": "1Gi"})
    app(store, "first", 600)
    with in_memory(store, clock):
        until(store, "first", "Scheduled")
    # the leader gone before it decided the second; its successor starts from etcd
    app(store, "second", 600)
    with in_memory(store, clock):
        b = until(store, "second", "Unschedulable")
        assert b.status.reason == ("over the quota of namespace team-a: cpu 600m asked, "
                                   "400m of 1 left")  # memory: asked none
        policy(store, "team-a", quota={"cpu": "1200m"})  # raised: counted at once
        assert on(until(store, "second", "Scheduled")) == ["a"]
        policy(store, "team-a", quota={"cpu": "1"})  # lowered: what runs stays
        app(store, "first", 600, generation=2)
        b = until(store, "first", "Unschedulable")
        assert on(b) == ["a"] and "over the quota" in b.status.reason


def test_a_policy_key_that_holds_garbage_allows_nothing_more(
        store: MemoryStore, clock: FakeClock) -> None:
    """It stands for the narrowest policy, whose quota is nothing: what asks for CPU, memory
    or Pods is not placed; what asks for none is."""
    cluster(store, "a", namespace="team-a")
    put(store, keys.resource_key("NamespacePolicy", "team-a"), b'{"spec": "garbage"}')
    app(store, "web", 100)
    application(store, "config", namespace="team-a")  # a ConfigMap: asks nothing
    with in_memory(store, clock):
        assert until(store, "web", "Unschedulable").status.reason == (
            "over the quota of namespace team-a: cpu 100m asked, 0 of 0 left; "
            "pods 1 asked, 0 of 0 left")
        assert on(until(store, "config", "Scheduled")) == ["a"]


def test_a_quota_counts_applications_and_copies_too(store: MemoryStore,
                                                    clock: FakeClock) -> None:
    for name in ("a", "b"):
        cluster(store, name, namespace="team-a")
    policy(store, "team-a", quota={"applications": 3, "copies": 3})
    application(store, "both", namespace="team-a", placement={"policy": "PickAll"})
    application(store, "one", namespace="team-a")
    with in_memory(store, clock):
        assert on(until(store, "both", "Scheduled")) == ["a", "b"]
        until(store, "one", "Scheduled")
        application(store, "third", namespace="team-a")  # a ConfigMap: a copy all the same
        assert until(store, "third", "Unschedulable").status.reason == (
            "over the quota of namespace team-a: copies 1 asked, 0 of 3 left")


def test_a_sets_quota_counts_the_copies_on_its_clusters_alone(
        store: MemoryStore, clock: FakeClock) -> None:
    """``setQuotas`` (Karmada's staticAssignments, per cluster set): team a may run two
    copies on the GPU set and 1500m of CPU there; its copies elsewhere are not counted,
    and an application counts once in the set where it has a copy."""
    cluster(store, "own", namespace="team-a", labels={"pool": "own"})
    for name in ("g1", "g2"):
        cluster(store, name, namespace="platform", labels={"pool": "gpu"})
    put(store, keys.resource_key("ClusterSet", "gpu"), msgspec.json.encode({
        "api": "core", "kind": "ClusterSet", "metadata": {"name": "gpu"},
        "spec": {"namespaces": ["platform"], "clusters": {"matchLabels": {"pool": "gpu"}}}}))
    policy(store, "team-a", clusterSets=["gpu"],
           setQuotas={"gpu": {"copies": 2, "cpu": "1500m"}})
    gpu = {"constraints": {"cluster": {"labels": ["pool is gpu"]}}}
    with in_memory(store, clock):
        app(store, "everywhere", 500, placement={"policy": "PickAll"})  # 2 copies on gpu
        assert on(until(store, "everywhere", "Scheduled")) == ["g1", "g2", "own"]
        app(store, "more", 100, **gpu)
        b = until(store, "more", "Unschedulable")
        assert b.status.reason == ("over the quota of namespace team-a in cluster set gpu: "
                                   "copies 1 asked, 0 of 2 left"), b.status.reason
        app(store, "home", 4000, constraints={"cluster": {"labels": ["pool is own"]}})
        assert on(until(store, "home", "Scheduled")) == ["own"]  # outside the set: free
        store.delete(keys.resource_key("Application", "everywhere", "team-a"))
        assert on(until(store, "more", "Scheduled")) in (["g1"], ["g2"])
        app(store, "heavy", 1500, **gpu)  # 100m used of 1500m
        b = until(store, "heavy", "Unschedulable")
        assert b.status.reason == ("over the quota of namespace team-a in cluster set gpu: "
                                   "cpu 1500m asked, 1400m of 1500m left"), b.status.reason
