"""Applications that depend on others, on working clusters (docs/order.md
"Dependencies"), in Push and Pull mode alike: a web tier that depends on its
database. A sampler reads both clusters every 0.2 s; through the web tier's
placement before the database exists, the database's placement, a move of the
database (the web tier follows it), a rollout of each and the deletion of both
(the database first), the web tier's Deployment is never on a cluster where the
database's is not available, and the database's old copy stays while the web tier
runs beside it. The logic in memory: tests/unit/controllers/propagator/test_plan.py
("depends", "needed"), tests/unit/controllers/scheduler/plugins/test_depends_on.py,
tests/unit/bootstrap/test_depends.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from berth.store import Store, decode, encode, keys
from berth.store.documents import ApplicationStatus
from berth_testkit.scheduler_env import (
    PropagatorProcess,
    SchedulerProcess,
    agents_for,
    binding,
    put,
    reached,
    started,
    wait_for,
)
from berth_testkit.servers.etcd import ROOT
from berth_testkit.servers.kube import KubeCluster

CLUSTERS = ("one", "two")
FAST = "probe_interval: 0.5\nretry_base_delay: 0.2\nretry_max_delay: 1\nuntracked_after: 1\n"


def deployment(name: str, image: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "c", "image": image}]}}}}


@pytest.fixture(scope="module")
def kubes() -> Iterator[dict[str, KubeCluster]]:
    made: dict[str, KubeCluster] = {}
    try:
        for name in CLUSTERS:  # Pods become Ready 2 s after they are made
            made[name] = KubeCluster(f"deps-{name}", ready_delay=2.0, pods="ready").start()
        yield made
    finally:
        for server in made.values():
            server.cleanup()


@contextlib.contextmanager
def running(mode: str, url: str, store: Store, tmp_path: Path,
            kubes: dict[str, KubeCluster]) -> Iterator[str]:
    for name, kube in kubes.items():
        put(store, keys.resource_key("Cluster", name, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"},
            "spec": reached(mode, kube.kubeconfig())}))
    procs = [SchedulerProcess(url, tmp_path), PropagatorProcess(url, tmp_path, config=FAST)]
    procs += agents_for(mode, url, tmp_path, {n: k.kubeconfig() for n, k in kubes.items()},
                        config=FAST)
    with started(procs, store, CLUSTERS):
        yield mode


@pytest.fixture(params=["Push", "Pull"])
def berth(request: pytest.FixtureRequest, etcd_server: Any, store: Store, tmp_path: Path,
          kubes: dict[str, KubeCluster]) -> Iterator[str]:
    with running(request.param, etcd_server.url, store, tmp_path, kubes) as mode:
        yield mode


@dataclass(frozen=True)
class Sample:
    at: float
    cluster: str
    db: int | None  # the database's available replicas (None: no Deployment)
    web: bool  # the web tier's Deployment is there
    web_pods: int


class Sampler:
    """Both clusters read every 0.2 s; the applications' states as the statuses said.
    ``web`` and ``db``: the applications' names, and their Deployments'."""

    def __init__(self, kubes: dict[str, KubeCluster], store: Store, web: str = "web",
                 db: str = "db") -> None:
        self.kubes, self.store, self.web, self.db = kubes, store, web, db
        self.samples: list[Sample] = []
        self.states: dict[str, list[str]] = {web: [], db: []}  # each change, in order
        self.reasons: dict[str, list[str]] = {web: [], db: []}
        self.failed: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="deps-sampler")

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.2):
                self._sample()
        except Exception as exc:  # raised in the test, not lost on the thread
            self.failed = exc

    def _sample(self) -> None:
        for name, kube in self.kubes.items():
            deployments = "/apis/apps/v1/namespaces/default/deployments/"
            db = kube.request("GET", deployments + self.db, ok=(200, 404))
            web = kube.request("GET", deployments + self.web, ok=(200, 404))
            pods = kube.request("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3D"
                                + self.web)
            self.samples.append(Sample(
                time.monotonic(), name,
                db.get("status", {}).get("availableReplicas", 0) if db.get("kind") else None,
                bool(web.get("kind")), len(pods.get("items", []))))
        for app in (self.web, self.db):
            st = status(self.store, app)
            if st is not None and (not self.states[app] or self.states[app][-1] != (
                    st.status.state or "")):
                self.states[app].append(st.status.state or "")
            if st is not None and st.status.reason:
                self.reasons[app].append(st.status.reason)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        if self.failed is not None:
            raise self.failed

    def broken(self) -> list[Sample]:
        """Samples where the web tier was on a cluster without its database available."""
        return [s for s in self.samples if (s.web or s.web_pods) and not s.db]

    def on(self, cluster: str) -> list[Sample]:
        return [s for s in self.samples if s.cluster == cluster]


def status(store: Store, name: str) -> ApplicationStatus | None:
    kv = store.get(keys.status_key("Application", "default", name))
    return decode(kv.value, ApplicationStatus, kv.key) if kv else None


def write(store: Store, name: str, generation: int, spec: dict[str, Any], *,
          deleted: bool = False) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "generation": generation}
    if deleted:
        meta["deleted"] = "2026-12-04T00:00:00Z"
    put(store, keys.resource_key("Application", name, "default"), msgspec.json.encode(
        {"api": "kubernetes", "kind": "Application", "metadata": meta, "spec": spec}))


def runs(store: Store, name: str, generation: int, where: list[str]) -> None:
    wait_for(lambda: status(store, name), lambda s: s.status.state == "RUNNING"
             and s.status.generation == generation
             and sorted(r.name for r in s.status.running_on) == where
             and sorted(s.status.applied) == [f"default/{c}" for c in where], timeout=90)


def test_a_web_tier_never_runs_where_its_database_is_not_available(
        berth: str, store: Store, kubes: dict[str, KubeCluster]) -> None:
    web = {"manifest": [deployment("web", "example/web:1")], "dependsOn": [{"name": "db"}]}
    db = {"manifest": [deployment("db", "example/db:1")],
          "placement": {"policy": "PickFixed", "clusterNames": ["one"]}}
    with Sampler(kubes, store) as sampler:
        # placed before its database exists: nowhere, saying why
        write(store, "web", 1, web)
        held = wait_for(lambda: binding(store, "web"), lambda b: "placed nowhere" in (
            b.status.reason), timeout=30)
        write(store, "db", 1, db)
        runs(store, "db", 1, ["one"])
        runs(store, "web", 1, ["one"])  # it follows its database, once that is available
        # the database moves: the web tier follows it; the old copy stays meanwhile
        write(store, "db", 2, {**db, "placement": {"policy": "PickFixed",
                                                  "clusterNames": ["two"]}})
        runs(store, "db", 2, ["two"])
        runs(store, "web", 1, ["two"])
        # a rollout of each
        moved = {**db, "placement": {"policy": "PickFixed", "clusterNames": ["two"]}}
        write(store, "db", 3, {**moved, "manifest": [deployment("db", "example/db:2")]})
        write(store, "web", 2, {**web, "manifest": [deployment("web", "example/web:2")]})
        runs(store, "db", 3, ["two"])
        runs(store, "web", 2, ["two"])
        # the database deleted first: kept while the web tier runs beside it
        write(store, "db", 3, {**moved, "manifest": [deployment("db", "example/db:2")]},
              deleted=True)
        kept = wait_for(lambda: status(store, "db"), lambda s: "kept on default/two while "
                        "default/web runs there" in s.status.reason, timeout=30)
        time.sleep(2)
        assert [s for s in sampler.on("two")[-5:] if not s.db] == []  # still there
        write(store, "web", 2, {**web, "manifest": [deployment("web", "example/web:2")]},
              deleted=True)
        for name in ("web", "db"):
            wait_for(lambda n=name: None if store.get(keys.resource_key(  # type: ignore[misc]
                "Application", n, "default")) else True, timeout=60)
        wait_for(lambda: sampler.samples[-2:] if len(sampler.samples) > 2 else None,
                 lambda last: all(s.db is None and not s.web for s in last), timeout=60)
    assert "its dependencies are placed nowhere yet: default/db" in held.status.reason
    assert "WAITING" in sampler.states["web"], sampler.states["web"]
    assert any("waits for default/db to be available on default/one" in r or
               "waits for default/db to run on default/one" in r
               for r in sampler.reasons["web"]), sampler.reasons["web"][:5]
    assert any("kept on default/one while default/web runs there" in r
               for r in sampler.reasons["db"]), "the move of the database held nothing"
    assert kept.status.state == "DELETING"
    assert sampler.broken() == [], sampler.broken()[:5]
    # the web tier ran on both clusters in turn, as did the database
    assert any(s.web for s in sampler.on("one")) and any(s.web for s in sampler.on("two"))


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "berth.cli.main", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, "BERTH_ETCD": url})


def test_the_shop_of_the_page_as_written(etcd_server: Any, store: Store, tmp_path: Path,
                                         kubes: dict[str, KubeCluster]) -> None:
    """docs/order.md "A worked example", followed (Push mode)."""
    with running("Push", etcd_server.url, store, tmp_path, kubes), Sampler(
            kubes, store, web="shop-web", db="shop-db") as sampler:
        applied = cli(etcd_server.url, "apply", "-f", "docs/examples/order/shop.yaml")
        assert applied.returncode == 0 and "warn" not in applied.stderr.lower(), applied.stderr
        for name in ("shop-db", "shop-config", "cache-operator", "shop-web"):
            wait_for(lambda n=name: status(store, n),  # type: ignore[misc]
                     lambda s: s.status.state == "RUNNING", timeout=90)
        db, web = status(store, "shop-db"), status(store, "shop-web")
        config = status(store, "shop-config")
        assert db is not None and web is not None and config is not None
        assert [r.name for r in web.status.running_on] == [r.name for r in db.status.running_on]
        # the configuration followed the web tier there, and nowhere else
        assert [r.name for r in config.status.running_on] == [
            r.name for r in web.status.running_on]
        described = cli(etcd_server.url, "describe", "application", "shop-web")
        assert described.returncode == 0, described.stderr
        listed = cli(etcd_server.url, "get", "applications")
        assert listed.returncode == 0, listed.stderr
        for name in ("shop-db", "shop-config", "cache-operator", "shop-web"):
            cli(etcd_server.url, "delete", "application", name)
        for name in ("shop-db", "shop-config", "cache-operator", "shop-web"):
            wait_for(lambda n=name: None if store.get(keys.resource_key(  # type: ignore[misc]
                "Application", n, "default")) else True, timeout=90)
    assert "Depends on:  shop-db, shop-config (when Applied), cache-operator" in (
        described.stdout), described.stdout
    assert "WAITING" in sampler.states["shop-web"], sampler.states["shop-web"]
    assert sampler.broken() == [], sampler.broken()[:5]
    assert any(s.web for s in sampler.samples)
