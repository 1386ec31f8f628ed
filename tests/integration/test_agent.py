"""`berth agent` carrying out a pull cluster's work beside a push cluster (#61): the
propagator writes the work, the agent applies it with the cluster's own credentials
and reports, and moves between the two modes are made before they are broken. On
real kube-apiservers with kwok nodes (Pods become Ready)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from berth.store import Store, decode, keys
from berth.store.documents import ApplicationStatus, ClusterStatus
from berth.store.documents.work import Heartbeat, Report, Work
from berth_testkit.scheduler_env import AgentProcess, PropagatorProcess, put, record_puts, wait_for
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import kube_clients, serving_all
from tests.integration.test_propagator import register
from tests.integration.test_propagator_apply import (
    CONFIG,
    app,
    bind,
    config_map,
    deployment,
    present,
    running,
    status,
)

AGENT = ("probe_interval: 0.5\nprobe_timeout: 1\nrequest_timeout: 3\nretry_base_delay: 0.2\n"
         "retry_max_delay: 1\nresync_interval: 600\nuntracked_after: 3\ncapacity_interval: 0.2\n")


def register_pull(store: Store, name: str, labels: dict[str, str] | None = None) -> None:
    """A Cluster in Pull mode: no credential of it in etcd."""
    put(store, keys.resource_key("Cluster", name, "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"mode": "Pull"}}))


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(KubeCluster, ("east", "west"))


@pytest.fixture
def kube(clusters: dict[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    yield from kube_clients(clusters)


@pytest.fixture
def fleet(etcd_server: EtcdServer, store: Store, tmp_path: Path,
          clusters: dict[str, KubeCluster]) -> Iterator[dict[str, Any]]:
    """east in push mode (the propagator dials it), west in pull mode (its agent)."""
    register(store, "east", clusters["east"].kubeconfig())
    register_pull(store, "west")
    prop = PropagatorProcess(etcd_server.url, tmp_path, config=CONFIG).start()
    agent = AgentProcess(etcd_server.url, tmp_path, cluster="default/west",
                         kubeconfig=clusters["west"].kubeconfig(), config=AGENT).start()
    yield {"propagator": prop, "agent": agent}
    agent.stop()
    prop.stop()
    for p in (prop, agent):
        out = p.output()
        print(out[-4000:])
        for server in clusters.values():
            assert server.token not in out  # credentials are never logged
        assert "Traceback" not in out


def cluster_state(store: Store, name: str) -> str:
    kv = store.get(keys.status_key("Cluster", "default", name))
    return decode(kv.value, ClusterStatus, kv.key).status.state if kv else ""


def test_a_pull_cluster_runs_its_work_and_moves_go_both_ways(
    store: Store, fleet: dict[str, Any], kube: dict[str, Client]
) -> None:
    # The agent's heartbeat makes the cluster ONLINE, with what it counted of the cluster.
    wait_for(lambda: cluster_state(store, "west"), lambda s: s == "ONLINE", timeout=30)
    beat = wait_for(lambda: store.get(keys.heartbeat_key("default/west")), lambda kv: decode(
        kv.value, Heartbeat, kv.key).status.capacity is not None, timeout=30)
    assert beat.lease != 0  # on the leader's lease
    wait_for(lambda: store.get(keys.status_key("Cluster", "default", "west")),
             lambda kv: decode(kv.value, ClusterStatus, kv.key).status.capacity is not None,
             timeout=30)

    app(store, "web", [deployment("web", replicas=2), config_map("web-conf", a="1")])
    bind(store, "web", 1, "west")
    wait_for(lambda: status(store, "web"), running("RUNNING", "west"), timeout=60)
    assert present(kube["west"], Deployment, "web")
    assert not present(kube["east"], Deployment, "web")
    dep = kube["west"].get(Deployment, "web", namespace="default")
    assert dep.status is not None and dep.status.availableReplicas == 2
    work = store.get(keys.work_key("default/west", "default", "web"))
    assert work is not None
    report = store.get(keys.report_key("default/west", "default", "web"))
    assert report is not None
    got = decode(report.value, Report, report.key).status
    assert got.work == work.mod_revision and got.applied is not None
    assert got.applied.health == "Healthy" and got.applied.available == 2

    # pull → push, make before break: recorded on both before west is emptied
    seen, watch = record_puts(store, keys.status_key("Application", "default", "web"),
                              ApplicationStatus)
    try:
        bind(store, "web", 1, "east")
        wait_for(lambda: status(store, "web"), running("RUNNING", "east"), timeout=60)
    finally:
        watch.close()
    assert present(kube["east"], Deployment, "web")
    wait_for(lambda: not present(kube["west"], Deployment, "web") or None, timeout=30)
    assert not present(kube["west"], ConfigMap, "web-conf")
    assert any({r.name for r in s.status.running_on} == {"east", "west"} for s in seen)
    wait_for(lambda: store.get(keys.work_key("default/west", "default", "web")) is None
             or None, timeout=30)  # carried out, the work goes, and then its report
    wait_for(lambda: store.get(keys.report_key("default/west", "default", "web")) is None
             or None, timeout=30)

    # push → pull, changed on the way: generation 2 on west, nothing left on east
    app(store, "web", [deployment("web", replicas=1), config_map("web-conf", a="2")],
        generation=2)
    seen, watch = record_puts(store, keys.status_key("Application", "default", "web"),
                              ApplicationStatus)
    try:
        bind(store, "web", 2, "west")
        wait_for(lambda: status(store, "web"), running("RUNNING", "west", generation=2),
                 timeout=60)
    finally:
        watch.close()
    assert kube["west"].get(ConfigMap, "web-conf", namespace="default").data == {"a": "2"}
    assert not present(kube["east"], Deployment, "web")
    assert any({r.name for r in s.status.running_on} == {"east", "west"} for s in seen)

    # deleted: removed from the pull cluster, then its key, work and report go
    app(store, "web", [deployment("web", replicas=1), config_map("web-conf", a="2")],
        generation=2, deleted=True)
    wait_for(lambda: store.get(keys.resource_key("Application", "web", "default")) is None
             or None, timeout=60)
    assert not present(kube["west"], Deployment, "web")
    assert not present(kube["west"], ConfigMap, "web-conf")
    assert store.list_prefix(keys.work_prefix("default/west"))[0] == []
    wait_for(lambda: store.list_prefix(keys.agent_prefix("default/west") + "reports/")[0]
             == [] or None, timeout=30)


def test_the_work_holds_the_manifest_as_the_cluster_runs_it(
    store: Store, fleet: dict[str, Any], kube: dict[str, Client]
) -> None:
    app(store, "split", [deployment("split", replicas=4)])
    put(store, keys.binding_key("Application", "default", "split"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Binding",
        "metadata": {"name": "split", "namespace": "default"},
        "spec": {"resource": {"kind": "Application", "name": "split", "namespace": "default"},
                 "generation": 1, "decision": "d-1",
                 "targets": [{"kind": "Cluster", "name": "east", "namespace": "default",
                              "replicas": 3},
                             {"kind": "Cluster", "name": "west", "namespace": "default",
                              "replicas": 1}]},
        "status": {"state": "Scheduled"}}))
    wait_for(lambda: status(store, "split"), running("RUNNING", "east", "west"), timeout=60)
    kv = store.get(keys.work_key("default/west", "default", "split"))
    assert kv is not None
    work = decode(kv.value, Work, kv.key)
    assert work.spec.generation == 1 and work.spec.replicas == 1
    assert work.spec.objects[0]["spec"]["replicas"] == 1  # the share, set in the object
    assert kube["west"].get(Deployment, "split", namespace="default").spec.replicas == 1
    assert kube["east"].get(Deployment, "split", namespace="default").spec.replicas == 3
