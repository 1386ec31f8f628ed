"""A hub's ClusterProfiles as berth's clusters (docs/inventory.md), on real servers: the
upstream ClusterProfile CRD on a kube-apiserver, two member clusters whose Pods become
Ready, and an exec plugin written for the test that reads a token from the file its
cluster's exec extension names (as the reference ``secretreader`` plugin reads a
Secret). Profiles added become Clusters berth reaches through the plugin and places
an application on; one relabelled changes its Cluster; one made unhealthy has its
application moved away, its replicas never below desired; one deleted has its Cluster
deleted once nothing runs there; a Cluster of someone else's with a profile's name is
left alone; a hub that cannot be read changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.store import Store, decode, encode, keys
from berth.store.documents import ApplicationStatus, ClusterStatus
from berth.store.documents.inventory import INVENTORY_LABEL, InventoryRead
from berth_testkit.availability import Sampler
from berth_testkit.plugins import token_reader
from berth_testkit.scheduler_env import (
    InventoryProcess,
    PropagatorProcess,
    SchedulerProcess,
    put,
    stop_all,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer, ServerUnavailable
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving_all

CRDS = Path(__file__).resolve().parents[2] / "berth" / "controllers" / "exporter" / "crds"
PROFILES = "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/fleet/clusterprofiles"
NS = "inventory"  # the berth namespace the clusters land in
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "inventory" / (
    "inventory.yaml")


@pytest.fixture(scope="module")
def kubes() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(lambda n: KubeCluster(f"inv-{n}", nodes=1, ready_delay=2.0),
                           ("east", "west"))


def berth(etcd: EtcdServer, *args: str, stdin: str) -> None:
    done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args], input=stdin,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "BERTH_ETCD": etcd.url})
    assert done.returncode == 0, done.stderr


def install(hub: KubeCluster) -> None:
    crd = yaml.safe_load((CRDS / "multicluster.x-k8s.io_clusterprofiles.yaml").read_text())
    hub.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd,
                ok=(201, 409))
    hub.request("POST", "/api/v1/namespaces", {"metadata": {"name": "fleet"}}, ok=(201, 409))
    deadline = time.monotonic() + 30
    while True:
        try:
            hub.request("GET", PROFILES)
            return
        except (OSError, ServerUnavailable):
            assert time.monotonic() < deadline, "the ClusterProfile CRD was never served"
            time.sleep(0.3)


def profile(hub: KubeCluster, name: str, member: KubeCluster, token: Path, *,
            healthy: str = "True", region: str = "eu") -> None:
    """Made, or its status replaced: where its cluster is, its health, its properties."""
    body = {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": name, "labels": {"x-k8s.io/cluster-manager": "hub"}},
            "spec": {"displayName": name, "clusterManager": {"name": "hub"}}}
    hub.request("POST", PROFILES, body, ok=(201, 409))
    stored = hub.request("GET", f"{PROFILES}/{name}")
    at = member.kubeconfig()["clusters"][0]["cluster"]
    stored["status"] = {
        "conditions": [{"type": "ControlPlaneHealthy", "status": healthy,
                        "reason": "Probed", "message": f"healthy: {healthy}",
                        "lastTransitionTime": "2026-12-04T00:00:00Z"}],
        "properties": [{"name": "region", "value": region}],
        "accessProviders": [{"name": "token-reader", "cluster": {
            "server": at["server"],
            "certificate-authority-data": at["certificate-authority-data"],
            "extensions": [{"name": "client.authentication.k8s.io/exec",
                            "extension": {"tokenFile": str(token)}}]}}]}
    hub.request("PUT", f"{PROFILES}/{name}/status", stored)


def cluster_status(store: Store, name: str) -> ClusterStatus | None:
    kv = store.get(keys.status_key("Cluster", NS, name))
    return decode(kv.value, ClusterStatus) if kv else None


def cluster_doc(store: Store, name: str) -> dict[str, Any] | None:
    kv = store.get(keys.resource_key("Cluster", name, NS))
    return yaml.safe_load(kv.value) if kv else None


def app_status(store: Store) -> ApplicationStatus | None:
    kv = store.get(keys.status_key("Application", NS, "web"))
    return decode(kv.value, ApplicationStatus) if kv else None


def inventory(store: Store) -> InventoryRead | None:
    kv = store.get(keys.status_key("Inventory", "", "hub"))
    return decode(kv.value, InventoryRead) if kv else None


def running_on(name: str) -> Any:
    return lambda s: s.status.state == "RUNNING" and [r.name for r in s.status.running_on] == [
        name]


def test_a_hubs_profiles_become_clusters_applications_run_and_move_on(
        etcd_server: EtcdServer, store: Store, kubes: dict[str, KubeCluster],
        tmp_path: Path) -> None:
    east, west = kubes["east"], kubes["west"]
    hub = east  # the hub's API (a cluster manager's), on one of the members
    install(hub)
    tokens = {}
    for name, kube in kubes.items():
        tokens[name] = tmp_path / f"{name}.token"
        tokens[name].write_text(kube.token)
    plugin = token_reader(tmp_path / "reader.py")
    for name, kube in kubes.items():
        profile(hub, name, kube, tokens[name])
    # a Cluster of someone else's, named as a profile will be
    put(store, keys.resource_key("Cluster", "north", NS), encode({
        "api": "kubernetes", "kind": "Cluster", "metadata": {"name": "north", "namespace": NS},
        "spec": {"mode": "Pull"}}))
    profile(hub, "north", east, tokens["east"])
    # docs/inventory.md's example, with this hub and this plugin in place of its own
    inv: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    inv["spec"]["kubeconfig"] = hub.kubeconfig()
    inv["spec"]["providers"]["providers"][0]["execConfig"].update(
        command=sys.executable, args=[str(plugin)])
    assert (inv["spec"]["namespace"], inv["spec"]["clusterNamespace"]) == ("fleet", NS)
    app = {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": "web", "namespace": NS},
           "spec": {"placement": {"policy": "PickN", "numberOfClusters": 1},
                    "clusterSelector": {"region": "eu"},
                    "affinity": {"clusterAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 50, "preference": {"matchLabels": {"tier": "one"}}}]}},
                    "manifest": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                  "metadata": {"name": "web", "namespace": "default"},
                                  "spec": {"replicas": 2,
                                           "selector": {"matchLabels": {"app": "web"}},
                                           "template": {"metadata": {"labels": {"app": "web"}},
                                                        "spec": {"containers": [{
                                                            "name": "c", "image": "x:1"}]}}}}]}}
    berth(etcd_server, "apply", "-f", "-", stdin=yaml.safe_dump(inv))
    procs = [InventoryProcess(etcd_server.url, tmp_path, config="interval: 0.5\n"),
             SchedulerProcess(etcd_server.url, tmp_path, config="reschedule_after: 1\n"),
             PropagatorProcess(etcd_server.url, tmp_path, config=(
                 "probe_interval: 0.5\nretry_base_delay: 0.2\nretry_max_delay: 1\n"))]
    try:
        for p in procs:
            p.start()
        # each profile a Cluster, reached through the plugin: ONLINE by berth's probe
        for name in ("east", "west"):
            wait_for(partial(cluster_status, store, name),
                     lambda s: s.status.state == "ONLINE", timeout=60)
            doc = cluster_doc(store, name)
            assert doc is not None
            labels = doc["metadata"]["labels"]
            assert (labels["region"], labels["source"], labels[INVENTORY_LABEL]) == (
                "eu", "hub", "hub")
            assert kubes[name].token not in str(doc)  # the credential is nowhere in etcd
        said = wait_for(lambda: inventory(store), lambda s: "north" in s.status.profiles,
                        timeout=30)
        assert said.status.profiles["north"].state == "Refused", said
        assert "written by a user" in said.status.profiles["north"].reason
        north = cluster_doc(store, "north")
        assert north is not None and north["spec"] == {"mode": "Pull"}  # left alone
        shown = subprocess.run([sys.executable, "-m", "berth.cli.main", "describe",
                                "inventory", "hub"], capture_output=True, text=True,
                               timeout=60, env={**os.environ, "BERTH_ETCD": etcd_server.url})
        assert "Inventory:   Synced" in shown.stdout, shown.stdout + shown.stderr
        assert "Profile:     east → inventory/east: Push" in shown.stdout, shown.stdout
        assert hub.token not in shown.stdout
        # relabelled on the hub: berth's Cluster follows; the application goes there
        profile(hub, "west", west, tokens["west"])
        stored = hub.request("GET", f"{PROFILES}/west")
        stored["metadata"]["labels"]["tier"] = "one"
        hub.request("PUT", f"{PROFILES}/west", stored)
        wait_for(lambda: cluster_doc(store, "west"),
                 lambda d: d["metadata"]["labels"].get("tier") == "one", timeout=30)
        # the inventory process killed and started again: it takes up what it made, and
        # rewrites none of it (each Cluster's digest says nothing changed)
        made = {n: store.get(keys.resource_key("Cluster", n, NS)) for n in ("east", "west")}
        procs[0].kill()
        procs[0].start()
        wait_for(lambda: procs[0].output().count("inventory: leading") or None, timeout=30)
        time.sleep(2)  # several passes
        assert {n: store.get(keys.resource_key("Cluster", n, NS)) for n in made} == made
        berth(etcd_server, "apply", "-f", "-", stdin=yaml.safe_dump(app))
        wait_for(lambda: app_status(store), running_on("west"), timeout=90)
        # the hub cannot be read: nothing changes, the status says why
        unreachable = {**inv, "spec": {**inv["spec"], "kubeconfig": {
            **hub.kubeconfig(), "clusters": [{"name": hub.kubeconfig()["clusters"][0]["name"],
                                              "cluster": {"server": "https://127.0.0.1:9",
                                                          "insecure-skip-tls-verify": True}}]}}}
        berth(etcd_server, "apply", "-f", "-", stdin=yaml.safe_dump(unreachable))
        failing = wait_for(lambda: inventory(store), lambda s: s.status.state == "Failing",
                           timeout=30)
        assert "the hub cannot be read" in failing.status.reason
        time.sleep(2)
        assert cluster_doc(store, "west") is not None and cluster_doc(store, "east") is not None
        assert running_on("west")(app_status(store))
        berth(etcd_server, "apply", "-f", "-", stdin=yaml.safe_dump(inv))
        # west's control plane unhealthy by its manager: tainted, the application moves
        # to east make-before-break (both still answer)
        with Sampler(kubes) as sampler:
            profile(hub, "west", west, tokens["west"], healthy="False")
            wait_for(lambda: app_status(store), running_on("east"), timeout=90)
            time.sleep(0.3)
        assert sampler.samples > 5 and sampler.fewest["web"] == 2, sampler.low.get("web")
        sick = cluster_doc(store, "west")
        assert sick is not None and sick["spec"]["taints"][0]["key"] == (
            "inventory.berth.io/unhealthy")
        # west deleted on the hub: nothing runs there, so its Cluster goes
        hub.request("DELETE", f"{PROFILES}/west")
        wait_for(lambda: cluster_doc(store, "west") is None or None, timeout=30)
        assert store.get(keys.secrets_key("Cluster", "west", NS)) is None
        assert running_on("east")(app_status(store))
        # east deleted while the application runs there (and has nowhere else to go): its
        # Cluster stays, tainted, and says why; the profile back, the taint goes
        hub.request("DELETE", f"{PROFILES}/east")
        gone = wait_for(lambda: cluster_doc(store, "east"),
                        lambda d: any(t["key"] == "inventory.berth.io/gone"
                                      for t in d["spec"].get("taints", [])), timeout=30)
        said = wait_for(lambda: inventory(store), lambda s: "waiting for application "
                        "inventory/web to leave" in s.status.profiles["east"].reason
                        if "east" in s.status.profiles else False, timeout=30)
        assert said.status.profiles["east"].state == "Gone" and gone is not None
        profile(hub, "east", east, tokens["east"])
        wait_for(lambda: cluster_doc(store, "east"),
                 lambda d: not d["spec"].get("taints"), timeout=30)
        assert running_on("east")(app_status(store))
        for p in procs:
            assert "Traceback" not in p.output(), p.log.name
    finally:
        stop_all(procs)
        for name in ("east", "west", "north"):
            hub.request("DELETE", f"{PROFILES}/{name}", ok=(200, 404))
        for kube in kubes.values():
            kube.request("DELETE", "/apis/apps/v1/namespaces/default/deployments/web",
                         ok=(200, 404))
