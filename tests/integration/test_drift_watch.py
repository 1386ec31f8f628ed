"""A drift watch against a real kube-apiserver begins with the cluster as it is: objects
applied before it began are handed on as they are now (in pages), one the book holds
that is gone as deleted, and then every change."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import ConfigMap, Secret
from lightkube.types import PatchType

from berth.controllers.propagator import drift as drift_module
from berth.controllers.propagator.drift import DriftWatches
from berth.controllers.propagator.kube import (
    FIELD_MANAGER,
    MANAGED_BY,
    OWNER,
    Connections,
    KubeObject,
)
from berth.controllers.propagator.watches import Hub
from berth.store.documents import KubeObjectRef
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving_all

CID = "default/east"


@pytest.fixture(scope="module")
def cluster() -> Iterator[KubeCluster]:
    for servers in serving_all(KubeCluster, ("drift",)):
        yield servers["drift"]


def config_map(name: str, owner: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {MANAGED_BY: FIELD_MANAGER},
                         "annotations": {OWNER: owner}},
            "data": {"v": value}}


def test_a_watch_begins_with_the_cluster_as_it_is(cluster: KubeCluster,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drift_module, "LIST_PAGE", 2)  # five objects: three pages
    client = Client(KubeConfig.from_dict(cluster.kubeconfig()), trust_env=False)
    for i in range(5):
        client.patch(ConfigMap, f"before-{i}", config_map(f"before-{i}", "default/a", "1"),
                     namespace="default", patch_type=PatchType.APPLY, field_manager="test")
    seen: list[tuple[str, str, str, str]] = []  # (type, name, owner, value or "")
    cond = threading.Condition()

    def on_event(cids: Collection[str], type_: str, obj: KubeObject) -> None:
        assert set(cids) == {CID}
        with cond:
            seen.append((type_, obj.metadata.name, obj.metadata.annotations.get(OWNER, ""),
                         f"{obj.apiVersion} {obj.kind}"))
            cond.notify_all()

    def until(what: tuple[str, str, str, str]) -> None:
        with cond:
            assert cond.wait_for(lambda: what in seen, 20), (what, seen)

    gone = KubeObjectRef("v1", "ConfigMap", "gone", "default")
    connections, hub = Connections(5.0), Hub()
    watches = DriftWatches(connections, hub, on_event, lambda _cid: None,
                           known=lambda cid, av, kind: [(gone, "default/b")]
                           if (cid, av, kind) == (CID, "v1", "ConfigMap") else [],
                           server_timeout=30, probe_timeout=2.0)
    try:
        conn = connections.get("k", cluster.kubeconfig())
        watches.ensure(CID, "k", conn.kind("v1", "ConfigMap"))
        for i in range(5):  # applied before the watch began: handed on as they are now
            until(("ADDED", f"before-{i}", "default/a", "v1 ConfigMap"))
        until(("DELETED", "gone", "default/b", "v1 ConfigMap"))  # the book's, not there
        client.patch(ConfigMap, "before-0", {"data": {"v": "2"}}, namespace="default",
                     patch_type=PatchType.MERGE, field_manager="someone")
        until(("MODIFIED", "before-0", "default/a", "v1 ConfigMap"))
        client.delete(ConfigMap, "before-1", namespace="default")
        until(("DELETED", "before-1", "default/a", "v1 ConfigMap"))
        with cond:
            listed = [s for s in seen if s[0] == "ADDED"]
        assert len(listed) == 5, seen  # each once: the watch began where the list ended
    finally:
        hub.stop()
        connections.close()
        client.close()


def test_clusters_that_are_namespaces_of_one_server_share_its_watch(
        cluster: KubeCluster) -> None:
    """Two Clusters reaching one API server as one user (two contexts, two namespaces)
    read one watch of a kind: every event is read once, handed on with both. The watch
    lives while either does."""
    seen: list[tuple[frozenset[str], str, str]] = []  # (clusters, type, name)
    cond = threading.Condition()

    def on_event(cids: Collection[str], type_: str, obj: KubeObject) -> None:
        with cond:
            seen.append((frozenset(cids), type_, obj.metadata.name))
            cond.notify_all()

    def until(what: tuple[frozenset[str], str, str]) -> None:
        with cond:
            assert cond.wait_for(lambda: what in seen, 20), (what, seen)

    def watching(n: int) -> None:
        deadline = time.monotonic() + 20
        while cluster.watches("secrets") != n:
            assert time.monotonic() < deadline, (cluster.watches("secrets"), n)
            time.sleep(0.1)

    client = Client(KubeConfig.from_dict(cluster.kubeconfig()), trust_env=False)
    before = cluster.watches("secrets")
    connections, hub = Connections(5.0), Hub()
    backs: list[str] = []
    watches = DriftWatches(connections, hub, on_event, backs.append,
                           known=lambda cid, av, kind: [], server_timeout=30,
                           probe_timeout=2.0)
    a, b = "default/team-a", "default/team-b"
    try:
        for cid, namespace in ((a, "team-a"), (b, "team-b")):
            config = cluster.kubeconfig()
            config["contexts"][0]["context"]["namespace"] = namespace
            conn = connections.get(f"k/{namespace}", config)
            watches.ensure(cid, f"k/{namespace}", conn.kind("v1", "Secret"))
        watching(before + 1)
        assert watches.clusters(conn.server) == {a, b}
        secret = {"apiVersion": "v1", "kind": "Secret",
                  "metadata": {"name": "shared", "namespace": "default",
                               "labels": {MANAGED_BY: FIELD_MANAGER},
                               "annotations": {OWNER: "default/a"}}}
        client.patch(Secret, "shared", secret, namespace="default",
                     patch_type=PatchType.APPLY, field_manager="test")
        until((frozenset({a, b}), "ADDED", "shared"))
        for _ in range(10):  # still one watch, not one per cluster
            assert cluster.watches("secrets") == before + 1
            time.sleep(0.1)
        watches.leave(a)  # the other still reads it
        client.delete(Secret, "shared", namespace="default")
        until((frozenset({b}), "DELETED", "shared"))
        assert cluster.watches("secrets") == before + 1
        watches.leave(b)  # the last: the server's watch ends
        watching(before)
        with cond:
            assert [s for s in seen if s[2] == "shared"] == [
                (frozenset({a, b}), "ADDED", "shared"), (frozenset({b}), "DELETED", "shared")]
    finally:
        hub.stop()
        connections.close()
        client.close()
