"""The real `berth propagator` (its cluster observer) against real kube-apiservers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from berth.store import Store, WatchEvent, decode, keys
from berth.store.documents import ClusterStatus
from berth_testkit.scheduler_env import (
    PropagatorProcess,
    SchedulerProcess,
    application,
    binding,
    put,
    record_puts,
    targets,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving

CONFIG = "probe_interval: 0.5\nprobe_timeout: 1\ngrace: 2\n"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {"group": "stable.example.com", "scope": "Namespaced",
             "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": True}}}]},
}


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    yield from serving(lambda: KubeCluster("one"))


@pytest.fixture
def propagator(etcd_server: EtcdServer, store: Store,
               tmp_path: Path) -> Iterator[PropagatorProcess]:
    proc = PropagatorProcess(etcd_server.url, tmp_path, config=CONFIG).start()
    yield proc
    proc.stop()
    print(proc.output()[-3000:])


def register(store: Store, name: str, kubeconfig: dict[str, object],
             labels: dict[str, str] | None = None) -> None:
    put(store, keys.resource_key("Cluster", name, "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"kubeconfig": kubeconfig}}))


def status(store: Store, name: str) -> ClusterStatus | None:
    kv = store.get(keys.status_key("Cluster", "default", name))
    return decode(kv.value, ClusterStatus, kv.key) if kv else None


def test_a_cluster_is_online_and_its_crds_are_discovered(
    store: Store, propagator: PropagatorProcess, kube: KubeCluster
) -> None:
    register(store, "one", kube.kubeconfig())
    s = wait_for(lambda: status(store, "one"), lambda s: s.status.state == "ONLINE", timeout=20)
    assert "crontabs.stable.example.com" not in s.status.custom_resources
    # where it is, as its kubeconfig says, and no credential (the exporter says it)
    said = kube.kubeconfig()["clusters"][0]["cluster"]
    assert s.status.endpoint is not None and (s.status.endpoint.server, s.status.endpoint.ca) \
        == (said["server"], said["certificate-authority-data"])
    from lightkube import Client, KubeConfig
    from lightkube.codecs import from_dict

    client = Client(KubeConfig.from_dict(kube.kubeconfig()), trust_env=False)
    client.apply(from_dict(CRD), field_manager="test")
    try:
        wait_for(lambda: status(store, "one"),
                 lambda s: "crontabs.stable.example.com" in s.status.custom_resources,
                 timeout=20)
    finally:
        from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

        client.delete(CustomResourceDefinition, "crontabs.stable.example.com")
        client.close()
    assert kube.token not in propagator.output()  # credentials are never logged


def test_a_cluster_going_away_is_offline_after_the_grace_and_comes_back(
    store: Store, propagator: PropagatorProcess, kube: KubeCluster
) -> None:
    register(store, "one", kube.kubeconfig())
    wait_for(lambda: status(store, "one"), lambda s: s.status.state == "ONLINE", timeout=20)
    seen, watch = record_puts(store, keys.status_key("Cluster", "default", "one"), ClusterStatus)
    kube.stop()
    try:
        down = wait_for(lambda: status(store, "one"), lambda s: s.status.state == "OFFLINE",
                        timeout=20)
        assert down.status.reason.startswith("unreachable: ")
        # Before that, one failed probe was recorded without changing the state.
        first = seen[0].status
        assert first.state == "ONLINE" and "(1/2 failed probes)" in first.reason
    finally:
        watch.close()
        kube.start()
    wait_for(lambda: status(store, "one"), lambda s: s.status.state == "ONLINE", timeout=30)


def test_bad_kubeconfigs_are_reasons_and_a_deleted_cluster_loses_its_status(
    store: Store, propagator: PropagatorProcess, kube: KubeCluster
) -> None:
    wrong_token = kube.kubeconfig()
    wrong_token["users"] = [{"name": "admin", "user": {"token": "not-the-token"}}]
    register(store, "refused", wrong_token)
    register(store, "nonsense", {"apiVersion": "v1", "kind": "Config", "clusters": []})
    refused = wait_for(lambda: status(store, "refused"),
                       lambda s: s.status.state == "UNHEALTHY", timeout=20)
    assert refused.status.reason == "credentials refused (HTTP 401)"
    nonsense = wait_for(lambda: status(store, "nonsense"),
                        lambda s: s.status.state == "OFFLINE", timeout=20)
    assert nonsense.status.reason.startswith("unusable kubeconfig")
    store.delete(keys.resource_key("Cluster", "refused", "default"))
    wait_for(lambda: status(store, "refused") is None or None, timeout=20)


def test_the_scheduler_places_on_a_cluster_the_observer_found_online(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, propagator: PropagatorProcess,
    kube: KubeCluster
) -> None:
    register(store, "real", kube.kubeconfig())
    register(store, "missing", {**kube.kubeconfig(), "clusters": [{"name": "one", "cluster": {
        "server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}]})
    wait_for(lambda: status(store, "real"), lambda s: s.status.state == "ONLINE", timeout=20)
    wait_for(lambda: status(store, "missing"), lambda s: s.status.state == "OFFLINE", timeout=20)
    scheduler = SchedulerProcess(etcd_server.url, tmp_path, name="with-observer").start()
    try:
        application(store, "app")
        b = wait_for(lambda: binding(store, "app"), lambda b: b.status.state == "Scheduled")
        assert targets(b) == ["real"]
        assert "not ONLINE (OFFLINE)" in b.status.reason
    finally:
        scheduler.stop()


def test_a_dead_loop_is_reported_by_alive_and_resync_survives_a_changing_cache(
    store: Store,
) -> None:
    """In-process: the resync copes with informers changing their dicts meanwhile, and a
    loop that ends makes the propagator not alive (what /healthz reports)."""
    import threading

    from berth.controllers.propagator.config import PropagatorConfig
    from berth.controllers.propagator.propagator import Propagator

    p = Propagator(store, PropagatorConfig(resync_interval=0.05, probe_interval=0.2))
    statuses = p.applier.statuses
    done = threading.Event()
    doc = b'{"kind":"Application","metadata":{"name":"x","namespace":"default"},"status":{}}'

    def churn() -> None:  # what the status informer's thread does, as fast as it can
        i = 0
        while not done.is_set():
            statuses._store_value(keys.status_key("Application", "default", f"x{i % 500}"),
                                  doc, i + 1)
            statuses._apply(WatchEvent("DELETE", keys.status_key(
                "Application", "default", f"x{(i + 250) % 500}"), b"", i + 1, 0, 0))
            i += 1

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        for _ in range(300):  # before start: no worker competes for the GIL
            p.applier.resync()  # raised "dictionary changed size during iteration" before
    finally:
        done.set()
        t.join()
    for key in statuses.list_keys():
        statuses._apply(WatchEvent("DELETE", key, b"", 0, 0, 0))
    p.start()
    try:
        assert p.alive()
        p._resync.halt()
        deadline = time.monotonic() + 5
        while p.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not p.alive()
    finally:
        p.stop()


def test_an_exec_plugin_that_hangs_costs_its_cluster_alone_for_a_bounded_time(
    store: Store, propagator: PropagatorProcess, kube: KubeCluster, tmp_path: Path
) -> None:
    """A cluster whose kubeconfig's exec plugin never answers is UNHEALTHY within the
    plugin's bound (10 s), saying so, the plugin killed; the other clusters go on as
    before; a plugin berth cannot use is said when the kubeconfig is read."""
    script = tmp_path / "hangs.py"
    script.write_text("import time\ntime.sleep(120)\n")
    hangs = kube.kubeconfig()
    hangs["users"] = [{"name": "admin", "user": {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(script)]}}}]
    old = kube.kubeconfig()
    old["users"] = [{"name": "admin", "user": {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "aws"}}}]
    began = time.monotonic()
    register(store, "hangs", hangs)
    register(store, "old", old)
    register(store, "one", kube.kubeconfig())
    wait_for(lambda: status(store, "one"), lambda s: s.status.state == "ONLINE", timeout=20)
    stuck = wait_for(lambda: status(store, "hangs"),
                     lambda s: s.status.state == "UNHEALTHY", timeout=40)
    assert "gave no credential within 10 s: stopped" in stuck.status.reason, stuck.status
    assert time.monotonic() - began < 30
    unusable = wait_for(lambda: status(store, "old"),
                        lambda s: s.status.state == "OFFLINE", timeout=20)
    assert "v1alpha1 was removed in Kubernetes 1.24" in unusable.status.reason
    left = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
    assert left.stdout.strip() == "" or _only_starting(left.stdout), left.stdout
    for name in ("hangs", "old", "one"):
        store.delete(keys.resource_key("Cluster", name, "default"))


def _only_starting(pids: str) -> bool:
    """The plugin runs again every few seconds while the cluster is probed: a process
    seen now is one younger than the bound, never one the bound should have ended."""
    for pid in pids.split():
        try:
            start = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        except (OSError, IndexError, ValueError):
            continue
        ticks = os.sysconf("SC_CLK_TCK")
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        if uptime - start / ticks > 12:
            return False
    return True

