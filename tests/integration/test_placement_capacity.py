"""Capacity that is real, and replicas divided by it, on two working clusters.

Each cluster's Nodes are kwok's, and its Pods are made by its controllers and placed
by its kube-scheduler (``testkit/berth_testkit/servers/kube.py``). The propagator watches them and
reports them in the cluster's status; the scheduler divides replicas by that
capacity, never over-commits a cluster in a burst (what it placed and the cluster
has not reported yet is assumed), and the propagator gives each cluster its share of
the Deployment.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding

from berth.store import Store, decode, keys
from berth.store.documents import ApplicationStatus, ClusterStatus
from berth_testkit.rbac import RBAC, cluster_admin, deployer, in_kube_system
from berth_testkit.scheduler_env import (
    BerthProcess,
    PropagatorProcess,
    SchedulerProcess,
    binding,
    put,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import kube_clients, serving_all
from tests.integration.test_propagator import register

PROPAGATOR = ("probe_interval: 0.5\nprobe_timeout: 1\ngrace: 2\nrequest_timeout: 3\n"
              "retry_base_delay: 0.2\nretry_max_delay: 1\nresync_interval: 600\n"
              "capacity_interval: 0.2\n")
SCHEDULER = "reschedule_after: 600\nanti_flap:\n  settle: 0\n"


SIZES = {"small": {"node_cpu": "2", "node_memory": "8Gi"},  # room for 4 replicas of 500m
         "large": {"node_cpu": "8", "node_memory": "32Gi"}}  # room for 16


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(lambda name: KubeCluster(f"cap-{name}", nodes=1, **SIZES[name]),
                           ("small", "large"))


@pytest.fixture
def kube(clusters: dict[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    clients = kube_clients(clusters)
    made = next(clients)
    yield made
    for name, client in made.items():  # leave the clusters as found
        # Deleted outright, the Pods too: left to the garbage collector, they took over
        # a minute to go on a loaded machine.
        client.deletecollection(Deployment, namespace="default")
        client.deletecollection(ReplicaSet, namespace="default")
        client.deletecollection(Pod, namespace="default", grace_period=0)
        for n in client.list(Node):
            if n.metadata.name != f"cap-{name}-node-0":
                client.delete(Node, n.metadata.name)
            elif n.spec is not None and n.spec.unschedulable:
                client.patch(Node, n.metadata.name, {"spec": {"unschedulable": False}})
    for client in made.values():
        wait_for(lambda client=client: not list(client.list(Pod, namespace="default")) or None,
                 timeout=60)
    clients.close()


@pytest.fixture
def processes(etcd_server: EtcdServer, store: Store, tmp_path: Path,
              clusters: dict[str, KubeCluster]) -> Iterator[dict[str, BerthProcess]]:
    for name, server in clusters.items():
        register(store, name, server.kubeconfig())
    prop = PropagatorProcess(etcd_server.url, tmp_path, config=PROPAGATOR).start()
    sched = SchedulerProcess(etcd_server.url, tmp_path, config=SCHEDULER).start()
    yield {"propagator": prop, "scheduler": sched}
    for proc in (sched, prop):
        proc.stop()
        print(proc.output()[-3000:])


def pods(client: Client, name: str, replicas: int, cpu: str, owner: str = "") -> None:
    """A Deployment applied directly (not through berth): its Pods, placed by the
    cluster's scheduler, are what the observer counts; ``owner``: as berth marks them."""
    annotations = {"berth.dev/application": owner} if owner else {}
    labels = {"app": name}
    client.create(from_dict({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                "requests": {"cpu": cpu, "memory": "64Mi"}}}]}}}}))


def capacity(store: Store, name: str) -> Any:
    kv = store.get(keys.status_key("Cluster", "default", name))
    if kv is None:
        return None
    return decode(kv.value, ClusterStatus, kv.key).status.capacity


def workload(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "c", "image": "nginx:1.27",
                          "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}}}


def application(store: Store, name: str, manifest: list[Any], placement: dict[str, Any],
                generation: int = 1) -> None:
    put(store, keys.resource_key("Application", name, "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": name, "namespace": "default", "generation": generation},
        "spec": {"manifest": manifest, "placement": placement}}))


def test_the_observer_reports_nodes_and_pods_as_they_change(
        store: Store, kube: dict[str, Client], clusters: dict[str, KubeCluster],
        processes: dict[str, BerthProcess]) -> None:
    client = kube["small"]
    cap = wait_for(lambda: capacity(store, "small"), lambda c: c.nodes == 1, timeout=30)
    assert (cap.allocatable["cpu"], cap.allocatable["memory"], cap.allocatable["pods"]) == (
        2000, 8 << 30, 110)
    clusters["small"].add_node("n1", cpu="4", memory="8Gi")
    cap = wait_for(lambda: capacity(store, "small"), lambda c: c.nodes == 2, timeout=30)
    assert (cap.allocatable["cpu"], cap.allocatable["memory"], cap.allocatable["pods"]) == (
        6000, 16 << 30, 220)
    pods(client, "shop", 2, "500m", owner="default/shop")
    pods(client, "other", 1, "1")
    cap = wait_for(lambda: capacity(store, "small"), lambda c: c.requested.get("pods") == 3)
    assert cap.requested["cpu"] == 2000 and cap.requested["memory"] == 3 * (64 << 20)
    assert cap.placed == {"default/shop": 2}
    client.delete(Deployment, "other", namespace="default")  # its Pod goes with it
    cap = wait_for(lambda: capacity(store, "small"), lambda c: c.requested.get("pods") == 2,
                   timeout=30)
    assert cap.requested["cpu"] == 1000
    # Cordoned: the node's allocatable no longer counts.
    client.patch(Node, "n1", {"spec": {"unschedulable": True}})
    cap = wait_for(lambda: capacity(store, "small"), lambda c: c.nodes == 1)
    assert cap.allocatable["cpu"] == 2000


def test_clusters_that_are_namespaces_of_one_server_share_its_pod_watch(
        store: Store, kube: dict[str, Client], clusters: dict[str, KubeCluster],
        processes: dict[str, BerthProcess]) -> None:
    server = clusters["small"]
    wait_for(lambda: capacity(store, "small"), lambda c: c.nodes == 1, timeout=30)
    before = server.watches("pods")
    config = server.kubeconfig()
    config["contexts"][0]["context"]["namespace"] = "team-b"
    register(store, "small-b", config)  # the same server, as the same user
    cap = wait_for(lambda: capacity(store, "small-b"), lambda c: c.nodes == 1, timeout=30)
    assert cap.allocatable == capacity(store, "small").allocatable
    # One watch of the server's Pods serves both (kube-scheduler's and the others' are
    # counted too; berth's would be one more).
    for _ in range(10):
        assert server.watches("pods") == before
        time.sleep(0.2)
    # The first cluster goes: the second still follows the server.
    store.delete(keys.resource_key("Cluster", "small", "default"))
    wait_for(lambda: store.get(keys.status_key("Cluster", "default", "small")) is None or None,
             timeout=30)
    server.add_node("n1", cpu="4", memory="8Gi")
    cap = wait_for(lambda: capacity(store, "small-b"), lambda c: c.nodes == 2, timeout=30)
    assert cap.allocatable["cpu"] == 6000
    pods(kube["small"], "shop", 1, "250m", owner="default/shop")
    cap = wait_for(lambda: capacity(store, "small-b"),
                   lambda c: c.placed.get("default/shop") == 1, timeout=30)
    assert cap.requested["cpu"] == 250
    # The last one goes: nothing of berth's watches the server's Pods any more.
    store.delete(keys.resource_key("Cluster", "small-b", "default"))
    wait_for(lambda: server.watches("pods"), lambda n: n == before - 1, timeout=30)


def test_replicas_divided_by_capacity_and_a_burst_never_over_commits(
        store: Store, kube: dict[str, Client], clusters: dict[str, KubeCluster],
        processes: dict[str, BerthProcess]) -> None:
    for name in ("small", "large"):
        wait_for(lambda name=name: capacity(store, name), lambda c: c.nodes == 1, timeout=30)
    divided = {"policy": "PickAll", "replicaScheduling": {"type": "Divided",
                                                           "division": "Capacity"}}
    application(store, "web", [workload("web", 10, "500m")], divided)
    b = wait_for(lambda: binding(store, "web"), lambda b: bool(b.spec.targets), timeout=30)
    shares = {t.name: t.replicas for t in b.spec.targets}
    assert shares == {"small": 2, "large": 8}  # weights 4 : 16, Webster

    def replicas_on(cluster: str, name: str = "web") -> int | None:
        try:
            dep = kube[cluster].get(Deployment, name, namespace="default")
        except Exception:
            return None
        return dep.spec.replicas if dep.spec else None

    wait_for(lambda: (replicas_on("small"), replicas_on("large")), lambda r: r == (2, 8),
             timeout=30)
    # Free now: small 2 - 1 = 1 CPU, large 8 - 4 = 4 CPUs (assumed, until the clusters
    # report the Pods their controllers made and their schedulers placed). A burst of six
    # applications of one CPU each: five fit, the sixth must wait.
    for i in range(6):
        application(store, f"batch-{i}", [workload(f"batch-{i}", 1, "1")], {})
    found = [wait_for(lambda i=i: binding(store, f"batch-{i}"),
                      lambda b: b.status.state in ("Scheduled", "Unschedulable"), timeout=30)
             for i in range(6)]
    placed = [b.spec.targets[0].name for b in found if b.status.state == "Scheduled"]
    waiting = [b for b in found if b.status.state == "Unschedulable"]
    assert sorted(placed) == ["large"] * 4 + ["small"], placed
    assert len(waiting) == 1 and "insufficient cpu" in waiting[0].status.reason
    # Scaling web up keeps every replica where it was and adds where there is room:
    # only large has some (4 CPUs were free, batch took them): it waits for room.
    application(store, "web", [workload("web", 12, "500m")], divided, generation=2)
    b = wait_for(lambda: binding(store, "web"), lambda b: b.spec.generation == 2)
    shares = {t.name: t.replicas for t in b.spec.targets}
    assert shares == {"small": 2, "large": 8}, shares
    assert b.status.reason.startswith("2 replicas wait for room")
    # A node joins the large cluster: the waiting replicas and the waiting batch land.
    clusters["large"].add_node("l2", cpu="4", memory="16Gi")
    b = wait_for(lambda: binding(store, "web"),
                 lambda b: sum(t.replicas or 0 for t in b.spec.targets) == 12, timeout=30)
    assert {t.name: t.replicas for t in b.spec.targets}["small"] == 2
    wait_for(lambda: replicas_on("large"), lambda r: r == 10, timeout=30)


def test_a_teams_application_runs_only_where_its_namespaces_policy_lets_it(
        store: Store, kube: dict[str, Client], clusters: dict[str, KubeCluster],
        processes: dict[str, BerthProcess]) -> None:
    """Team a has no cluster of its own: its policy binds a set holding the large cluster
    (of namespace default) alone. Its application is placed and applied there, never on
    small (which scores the same); forbidden by the policy, its copy goes, and comes back
    once allowed; over the namespace's quota a second is not placed,
    nor after the scheduler is killed and started again, until the quota is raised;
    applied as the identity its policy names, what large's RBAC forbids that identity is
    refused there and said, the rest applied;
    unbound, the set's cluster is left though nothing else fits. (The rules in memory:
    tests/unit/controllers/scheduler/test_tenancy.py and test_quota.py.)"""
    for name in ("small", "large"):
        wait_for(lambda name=name: capacity(store, name), lambda c: c.nodes == 1, timeout=30)

    def policy(*sets: str, **limits: Any) -> None:
        put(store, keys.resource_key("NamespacePolicy", "team-a"), msgspec.json.encode({
            "api": "core", "kind": "NamespacePolicy", "metadata": {"name": "team-a"},
            "spec": {"clusterSets": list(sets), **limits}}))

    put(store, keys.resource_key("ClusterSet", "big"), msgspec.json.encode({
        "api": "core", "kind": "ClusterSet", "metadata": {"name": "big"},
        "spec": {"namespaces": ["default"], "clusters": {"names": ["large"]}}}))
    policy("big")
    put(store, keys.resource_key("Application", "api", "team-a"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": "api", "namespace": "team-a", "generation": 1},
        "spec": {"manifest": [workload("api", 1, "100m")], "placement": {"policy": "PickAll"}}}))
    b = wait_for(lambda: binding(store, "api", "team-a"), lambda b: bool(b.spec.targets),
                 timeout=30)
    assert [(t.namespace, t.name) for t in b.spec.targets] == [("default", "large")]

    def deployed(cluster: str) -> bool:
        return any(d.metadata is not None and d.metadata.name == "api"
                   for d in kube[cluster].list(Deployment, namespace="default"))

    wait_for(lambda: deployed("large") or None, timeout=30)
    assert not deployed("small")

    def deployed_as(name: str) -> bool:
        return any(d.metadata is not None and d.metadata.name == name
                   for d in kube["large"].list(Deployment, namespace="default"))

    # the kinds and Kubernetes namespaces its objects may have: a ClusterRoleBinding to
    # cluster-admin is applied nowhere, and says why; the Deployment stays
    policy("big", kinds=["apps/Deployment"], targetNamespaces=["default"])
    grab = cluster_admin("team-a-admin", "team-a")
    put(store, keys.resource_key("Application", "grab", "team-a"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": "grab", "namespace": "team-a", "generation": 1},
        "spec": {"manifest": [grab]}}))

    def said(name: str) -> ApplicationStatus | None:
        kv = store.get(keys.status_key("Application", "team-a", name))
        return decode(kv.value, ApplicationStatus) if kv is not None else None

    st = wait_for(lambda: said("grab"), lambda st: st.status.state == "FAILED", timeout=30)
    assert "not allowed by the policy of namespace team-a: ClusterRoleBinding team-a-admin" in (
        st.status.reason), st.status.reason
    assert not [b for b in kube["large"].list(ClusterRoleBinding)
                if b.metadata is not None and b.metadata.name == "team-a-admin"]
    # api's Deployment names no Kubernetes namespace, which the policy now forbids: the
    # copy that ran there goes
    wait_for(lambda: not deployed("large") or None, timeout=30)
    st = wait_for(lambda: said("api"), lambda st: "not allowed" in st.status.reason)
    assert "Deployment api: no namespace, not one of default" in st.status.reason
    # its quota: api asks 100m of 150m; a second of 100m is not placed
    limits = {"kinds": ["apps/Deployment"]}
    policy("big", quota={"cpu": "150m"}, **limits)
    wait_for(lambda: deployed("large") or None, timeout=30)  # allowed again: back

    def more(generation: int) -> None:
        put(store, keys.resource_key("Application", "more", "team-a"), msgspec.json.encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": "more", "namespace": "team-a", "generation": generation},
            "spec": {"manifest": [workload("more", 1, "100m")]}}))

    more(1)
    refused = "over the quota of namespace team-a: cpu 100m asked, 50m of 150m left"
    b = wait_for(lambda: binding(store, "more", "team-a"),
                 lambda b: b.status.state == "Unschedulable", timeout=30)
    assert b.status.reason == refused and not b.spec.targets
    processes["scheduler"].kill()  # its successor counts the use again, from etcd
    processes["scheduler"].start()
    more(2)  # decided by the new leader
    b = wait_for(lambda: binding(store, "more", "team-a"),
                 lambda b: b.spec.generation == 2, timeout=30)
    assert (b.status.state, b.status.reason) == ("Unschedulable", refused)
    assert not deployed_as("more")
    policy("big", quota={"cpu": "200m"}, **limits)
    wait_for(lambda: deployed_as("more") or None, timeout=30)

    # applied as the namespace's identity: large's RBAC lets team a's deployer manage
    # Deployments and ConfigMaps of Kubernetes namespace default alone (berth's own
    # credential there impersonates it): of one application, a ClusterRoleBinding and
    # a ConfigMap in kube-system are refused by large's API server and said, the rest
    # applied; api and more, applied as the deployer too, run on
    large = clusters["large"]
    policy("big", quota={"cpu": "200m"}, identity=deployer(large))
    system = in_kube_system("team-a-system")
    put(store, keys.resource_key("Application", "mixed", "team-a"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": "mixed", "namespace": "team-a", "generation": 1},
        "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "team-a-ok", "namespace": "default"}},
                              grab, system]}}))
    st = wait_for(lambda: said("mixed"), lambda st: "forbidden to" in st.status.reason,
                  timeout=30)
    reason = st.status.reason
    assert ("forbidden to ServiceAccount default/deployer by cluster default/large's RBAC"
            in reason), reason
    assert "ClusterRoleBinding team-a-admin" in reason and "ConfigMap kube-system/" in (
        reason), reason
    assert large.request("GET", "/api/v1/namespaces/default/configmaps/team-a-ok")
    assert large.request("GET", "/api/v1/namespaces/kube-system/configmaps/team-a-system",
                         ok=(404,)) == {}
    assert large.request("GET", f"{RBAC}/clusterrolebindings/team-a-admin", ok=(404,)) == {}
    assert deployed("large") and deployed_as("more")
    for name in ("api", "more"):  # applied again as the deployer, at once
        wait_for(lambda name=name: said(name), lambda st: st.status.applied[
            "default/large"].identity == "system:serviceaccount:default:deployer",
            timeout=30)
    put(store, keys.resource_key("Application", "mixed", "team-a"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": "mixed", "namespace": "team-a", "generation": 1,
                     "deleted": "2026-12-03T00:00:00Z"}, "spec": {"manifest": []}}))
    mixed = keys.resource_key("Application", "mixed", "team-a")
    wait_for(lambda: store.get(mixed) is None or None, timeout=30)  # nothing refused waits
    assert large.request("GET", "/api/v1/namespaces/default/configmaps/team-a-ok",
                         ok=(404,)) == {}  # removed as the deployer
    policy()  # the set unbound: team a may use no cluster now
    b = wait_for(lambda: binding(store, "api", "team-a"),
                 lambda b: b.status.state == "Unschedulable" and not b.spec.targets, timeout=30)
    wait_for(lambda: not deployed("large") or None, timeout=30)
    assert not deployed("small")
