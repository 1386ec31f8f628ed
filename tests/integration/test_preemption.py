"""Making room on working clusters (kwok nodes: Pods become Ready): a full fleet, a
more important application arrives; the victim that fits elsewhere is moved there and,
sampled every 0.2 s, never has fewer available replicas than it wants; the one that
fits nowhere is stopped; Never is honoured; a scheduler killed mid-plan is replaced by
one that carries the plan on; a plan that cannot finish releases its room at its
deadline (docs/scheduler.md "Priority and preemption")."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Node, Pod

from berth.store import Store, keys
from berth.store.documents import Binding, Yield
from berth_testkit.scheduler_env import (
    PropagatorProcess,
    SchedulerProcess,
    binding,
    put,
    targets,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import kube_clients, serving_all
from tests.integration.test_propagator import register

PROPAGATOR = ("probe_interval: 0.5\nprobe_timeout: 1\ngrace: 2\nrequest_timeout: 3\n"
              "retry_base_delay: 0.2\nretry_max_delay: 1\nresync_interval: 600\n"
              "capacity_interval: 0.2\nmove_timeout: 20\n")
SCHEDULER = ("reschedule_after: 600\nanti_flap:\n  settle: 0\n"
             "preemption:\n  deadline: 45\n")


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(lambda name: KubeCluster(f"pre-{name}", nodes=1, node_cpu="4",
                                                    node_memory="16Gi"), ("a", "b"))


@pytest.fixture
def kube(clusters: dict[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    clients = kube_clients(clusters)
    made = next(clients)
    yield made
    for client in made.values():  # leave the clusters as found
        client.deletecollection(Deployment, namespace="default")
        client.deletecollection(ReplicaSet, namespace="default")
        client.deletecollection(Pod, namespace="default", grace_period=0)
        for n in client.list(Node):
            if n.spec is not None and n.spec.taints and n.metadata is not None:
                client.patch(Node, n.metadata.name, {"spec": {"taints": None}})
    for client in made.values():
        wait_for(lambda client=client: not list(client.list(Pod, namespace="default")) or None,
                 timeout=60)
    clients.close()


class Fleet:
    def __init__(self, etcd: EtcdServer, store: Store, workdir: Path) -> None:
        self.etcd, self.store, self.workdir = etcd, store, workdir
        self.scheduler = SchedulerProcess(etcd.url, workdir, config=SCHEDULER).start()
        self.propagator = PropagatorProcess(etcd.url, workdir, config=PROPAGATOR).start()

    def restart_scheduler(self) -> None:
        self.scheduler.kill()
        self.scheduler = SchedulerProcess(self.etcd.url, self.workdir, config=SCHEDULER,
                                          name="s2").start()

    def stop(self) -> None:
        for proc in (self.scheduler, self.propagator):
            proc.stop()
            print(proc.output()[-4000:])


@pytest.fixture
def fleet(etcd_server: EtcdServer, store: Store, tmp_path: Path,
          clusters: dict[str, KubeCluster], kube: dict[str, Client]) -> Iterator[Fleet]:
    for name, server in clusters.items():
        register(store, name, server.kubeconfig())
    f = Fleet(etcd_server, store, tmp_path)
    yield f
    f.stop()


def app(store: Store, name: str, replicas: int, cpu: str, generation: int = 1,
        **spec: Any) -> None:
    labels = {"app": name}
    put(store, keys.resource_key("Application", name, "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": name, "namespace": "default", "generation": generation},
        "spec": {"manifest": [{
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {"containers": [{
                    "name": "c", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}}}],
            **spec}}))


def on(cluster: str) -> dict[str, Any]:
    return {"placement": {"policy": "PickFixed", "clusterNames": [cluster]}}


def available(client: Client, name: str) -> int:
    try:
        d = client.get(Deployment, name, namespace="default")
    except Exception:  # not there (yet, or any more)
        return 0
    return (d.status.availableReplicas or 0) if d.status is not None else 0


def running(store: Store, kube: dict[str, Client], name: str, cluster: str,
            replicas: int, timeout: float = 90) -> Binding:
    """``name`` placed on ``cluster`` with ``replicas`` available there."""
    b = wait_for(lambda: binding(store, name), lambda b: targets(b) == [cluster],
                 timeout=timeout)
    wait_for(lambda: available(kube[cluster], name) or None, lambda n: n >= replicas,
             timeout=timeout)
    return b


class Sampler:
    """Every 0.2 s, an application's available replicas summed over every cluster."""

    def __init__(self, kube: dict[str, Client], name: str) -> None:
        self.kube, self.name = kube, name
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.samples.append(sum(available(c, self.name) for c in self.kube.values()))

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join()
        return self.samples


def test_a_victim_is_moved_without_dropping_a_replica_another_stopped_never_honoured(
        store: Store, kube: dict[str, Client], fleet: Fleet) -> None:
    # a: mover (priority 1, 2 x 1 CPU) and big-a (50, 1.5 CPU): 0.5 of 4 CPUs free
    # b: stopper (1, 1 CPU, only ever on b) and big-b (50, 1 CPU): 2 free
    app(store, "mover", 2, "1", priority=1, **on("a"))
    app(store, "big-a", 1, "1500m", priority=50, **on("a"))
    app(store, "stopper", 1, "1", priority=1, **on("b"))
    app(store, "big-b", 1, "1", priority=50, **on("b"))
    for name, cluster, n in (("mover", "a", 2), ("big-a", "a", 1), ("stopper", "b", 1),
                             ("big-b", "b", 1)):
        running(store, kube, name, cluster, n)
    app(store, "mover", 2, "1", generation=2, priority=1)  # free to go anywhere now
    wait_for(lambda: binding(store, "mover"), lambda b: b.spec.generation == 2, timeout=30)
    # never: it fits nowhere, and makes no room
    app(store, "never", 1, "2500m", priority=100, preemptionPolicy="Never")
    never = wait_for(lambda: binding(store, "never"),
                     lambda b: b.status.state == "Unschedulable", timeout=30)
    assert never.status.preemption is None
    sampler = Sampler(kube, "mover")
    # high (2.5 CPUs) fits nowhere: on a, mover goes (to b, 2 free); on b, stopper
    # would be stopped — a wins (none stopped)
    app(store, "high", 1, "2500m", priority=100)
    planned = wait_for(lambda: binding(store, "high"),
                       lambda b: b.status.preemption is not None, timeout=30)
    plan = planned.status.preemption
    assert plan is not None and plan.cluster == "default/a"
    assert [(v.application, v.action, v.to) for v in plan.victims] == [
        ("default/mover", Yield.MOVE, ["default/b"])]
    running(store, kube, "mover", "b", 2)
    running(store, kube, "high", "a", 1)
    samples = sampler.stop()
    assert samples and min(samples) >= 2, samples  # never below what it wants
    moved = binding(store, "mover")
    assert moved is not None and moved.status.yielded_to == "default/high"
    # never still makes no room (the plan's room was high's)
    assert binding(store, "never").status.preemption is None  # type: ignore[union-attr]
    # high2 (1 CPU): on b stopper goes (nowhere else: only ever on b); on a big-a (50)
    # would be stopped too — b wins (the lower priority stopped)
    app(store, "high2", 1, "1", priority=100)
    stopped = wait_for(lambda: binding(store, "stopper"),
                       lambda b: b.status.state == "Unschedulable", timeout=60)
    assert stopped.spec.targets == [] and stopped.status.yielded_to == "default/high2"
    wait_for(lambda: available(kube["b"], "stopper") == 0 or None, timeout=60)
    running(store, kube, "high2", "b", 1)
    assert targets(binding(store, "big-a")) == ["a"]  # type: ignore[arg-type]
    assert targets(binding(store, "big-b")) == ["b"]  # type: ignore[arg-type]


def test_a_new_leader_carries_a_plan_on_and_one_that_cannot_finish_ends_at_its_deadline(
        store: Store, kube: dict[str, Client], fleet: Fleet) -> None:
    app(store, "mover", 2, "1", priority=1, **on("a"))
    app(store, "big-a", 1, "1500m", priority=50, **on("a"))
    app(store, "big-b", 1, "2", priority=50, **on("b"))
    for name, cluster, n in (("mover", "a", 2), ("big-a", "a", 1), ("big-b", "b", 1)):
        running(store, kube, name, cluster, n)
    app(store, "mover", 2, "1", generation=2, priority=1)
    wait_for(lambda: binding(store, "mover"), lambda b: b.spec.generation == 2, timeout=30)
    # b's node takes no new Pod (a NoSchedule taint; its room still counts): mover's
    # new copy there never becomes available
    kube["b"].patch(Node, "pre-b-node-0", {"spec": {"taints": [
        {"key": "full", "value": "yes", "effect": "NoSchedule"}]}})
    app(store, "high", 1, "2500m", priority=100)
    planned = wait_for(lambda: binding(store, "high"),
                       lambda b: b.status.preemption is not None, timeout=30)
    fleet.restart_scheduler()  # killed mid-plan
    # the new leader carries the plan on: the reservation stands until its deadline,
    # then goes, and high says why; mover still runs on a
    assert planned.status.preemption is not None
    released = wait_for(lambda: binding(store, "high"),
                        lambda b: b.status.preemption is None, timeout=120)
    assert "was not made by" in released.status.reason
    assert released.status.state == "Unschedulable"
    assert available(kube["a"], "mover") == 2
    assert available(kube["a"], "high") == 0
