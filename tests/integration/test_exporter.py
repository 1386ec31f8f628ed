"""The exporter on a real API server: what it writes validates against the upstream
CRDs (installed from berth's vendored copies, every write strictly validated), Argo
CD's generator (as ``berth_testkit.argocd`` reads it) turns it into exactly berth's
placements, a move lists both clusters and never neither, nothing unchanged is
written again, and an API server killed meanwhile or etcd compacted loses nothing.

berth's side is written into etcd as its processes would (Clusters and their status,
metric values, Applications, Bindings, application statuses), so each test says
exactly what berth decided.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from berth.controllers.exporter.config import ExporterConfig
from berth.controllers.exporter.exporter import Exporter
from berth.controllers.exporter.target import WRITES
from berth.store import Store, keys
from berth.store.codec import encode
from berth.store.documents import (
    Application,
    ApplicationSpec,
    ApplicationState,
    ApplicationStatus,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    BindingStatus,
    ClusterApplied,
    ClusterSpec,
    ClusterState,
    ClusterStatus,
    Endpoint,
    Export,
    Exported,
    Metadata,
    MetricRef,
    MetricValue,
    MetricValueStatus,
    ObjectRef,
    StatusMeta,
    Target,
)
from berth.store.documents.infrastructure import Cluster
from berth.store.ops import Delete, Put
from berth_testkit.argocd import generate_params
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving

NS = "argocd"
SIG = f"/apis/multicluster.x-k8s.io/v1alpha1/namespaces/{NS}"
OCM = f"/apis/cluster.open-cluster-management.io/v1beta1/namespaces/{NS}"


@pytest.fixture(scope="module")
def api() -> Iterator[KubeCluster]:
    yield from serving(lambda: KubeCluster("export", nodes=0))


def _put(store: Store, key: str, doc: Any) -> None:
    store.commit([Put(key, encode(doc), None)])


def cluster(store: Store, name: str, *, labels: dict[str, str] | None = None,
            state: str = "ONLINE", ns: str = "default", push: bool = False) -> None:
    """A Cluster and its status (``push``: with the endpoint a propagator says)."""
    _put(store, keys.resource_key("Cluster", name, ns), Cluster(
        Metadata(name=name, namespace=ns, labels=labels or {}),
        ClusterSpec(metrics=[MetricRef("energy", 1.0)])))
    _put(store, keys.status_key("Cluster", ns, name), ClusterStatus(
        StatusMeta(name, ns), ClusterState(state, version="v1.36.3", endpoint=Endpoint(
            f"https://{name}.example:6443", "Q0E=") if push else None)))


def app(store: Store, name: str, targets: list[str], copies: dict[str, bool] | None = None,
        *, labels: dict[str, str] | None = None, ns: str = "default") -> None:
    """An application placed on ``targets`` (cluster names in ``default``, or
    ``<namespace>/<name>``); ``copies``: cluster → available there (default: every
    target, available)."""
    _put(store, keys.resource_key("Application", name, ns), Application(
        Metadata(name=name, namespace=ns, labels=labels or {}), ApplicationSpec()))
    place(store, name, targets, copies, ns=ns)


def _cid(target: str) -> str:
    return target if "/" in target else f"default/{target}"


def place(store: Store, name: str, targets: list[str],
          copies: dict[str, bool] | None = None, *, ns: str = "default") -> None:
    now = datetime.now(UTC)
    cids = [_cid(t) for t in targets]
    _put(store, keys.binding_key("Application", ns, name), Binding(
        BindingMeta(name, ns),
        BindingSpec(ObjectRef("Application", name, ns), 1,
                    [Target("Cluster", c.split("/")[1], c.split("/")[0], 0.5) for c in cids],
                    now),
        BindingStatus(BindingState.SCHEDULED, f"placed on {len(targets)}", explanation=[
            {"candidate": f"Cluster/{c}", "score": 0.5, "scores": {"energy": 0.5}}
            for c in cids])))
    copies = {t: True for t in targets} if copies is None else copies
    _put(store, keys.status_key("Application", ns, name), ApplicationStatus(
        StatusMeta(name, ns), ApplicationState(applied={
            _cid(c): ClusterApplied(1, health="Healthy", new=not ok)
            for c, ok in copies.items()})))


def export(store: Store, api: KubeCluster, name: str = "argocd", **spec: Any) -> None:
    doc = {"api": "core", "kind": "Export", "metadata": {"name": name},
           "spec": {"kubeconfig": api.kubeconfig(), "namespace": NS,
                    "argocd": {"configMap": "berth-placements"}, **spec}}
    _put(store, keys.resource_key("Export", name), msgspec.convert(doc, Export))


def wait(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # the API restarting: ask again
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"not in {timeout:g} s: {what} (last: {last!r})")


def items(api: KubeCluster, path: str, selector: str = "") -> list[dict[str, Any]]:
    query = f"?labelSelector={selector}" if selector else ""
    return list(api.request("GET", path + query).get("items") or [])


def decided(api: KubeCluster, app_name: str, ns: str = "default") -> dict[str, str]:
    """An application's OCM decisions: cluster → reason."""
    out = {}
    for obj in items(api, f"{OCM}/placementdecisions",
                     f"cluster.open-cluster-management.io/placement={ns}.{app_name}"):
        for d in (obj.get("status") or {}).get("decisions") or []:
            out[d["clusterName"]] = d["reason"]
    return out


@pytest.fixture
def exporter(store: Store, api: KubeCluster) -> Iterator[Callable[..., Exporter]]:
    """Start an exporter (after the test wrote berth's side); the namespace is emptied of
    what earlier tests exported first."""
    for plural, base in (("placementdecisions", SIG), ("placementdecisions", OCM),
                         ("clusterprofiles", SIG)):
        for obj in _listed(api, f"{base}/{plural}"):
            api.request("DELETE", f"{base}/{plural}/{obj['metadata']['name']}", ok=(200, 404))
    started: list[Exporter] = []

    def start(**config: Any) -> Exporter:
        if store.get(keys.resource_key("Export", "argocd")) is None:
            export(store, api)
        e = Exporter(store, ExporterConfig(events=False, settle=0.05, **config))
        e.start()
        started.append(e)
        return e

    yield start
    for e in started:
        e.stop()


def _listed(api: KubeCluster, path: str) -> list[dict[str, Any]]:
    try:
        return items(api, path)
    except Exception:
        return []  # its CRD is not installed yet


def _synced(store: Store, name: str = "argocd") -> bool:
    kv = store.get(keys.exported_key(name))
    return kv is not None and b'"state":"Synced"' in kv.value


def test_250_clusters_validate_and_slice_in_three(store: Store, api: KubeCluster,
                                                  exporter: Callable[..., Exporter]) -> None:
    """Every shape as the upstream CRDs define it, on a real API server: 250 clusters
    as ClusterProfiles (half with an access provider), and one application placed on all of them as three SIG slices
    sharing one decision key, indexed 0..2 (and three OCM objects)."""
    names = [f"c{i:03d}" for i in range(250)]
    for i, name in enumerate(names):
        cluster(store, name, labels={"zone": f"z{i % 3}"},
                state="ONLINE" if i % 50 else "OFFLINE", push=i % 2 == 0)
    _put(store, keys.metric_value_key("energy"), MetricValue(
        Metadata(name="energy"), MetricValueStatus(value=0.42, observed=datetime.now(UTC))))
    app(store, "everywhere", names)
    export(store, api, accessProvider="token-reader")
    exporter(workers=8)
    wait(lambda: _synced(store), 180, "the export synced")
    slices = items(api, f"{SIG}/placementdecisions",
                   "multicluster.x-k8s.io/placement-key=default.everywhere")
    assert sorted(s["metadata"]["labels"]["multicluster.x-k8s.io/decision-index"]
                  for s in slices) == ["0", "1", "2"]
    assert {s["metadata"]["labels"]["multicluster.x-k8s.io/decision-key"] for s in slices} == {
        "default.everywhere"}
    ordered = sorted(slices, key=lambda s: int(
        s["metadata"]["labels"]["multicluster.x-k8s.io/decision-index"]))
    listed = [d["clusterProfileRef"]["name"] for s in ordered for d in s["decisions"]]
    assert listed == names  # in order, each once, 100 + 100 + 50
    assert [len(s["decisions"]) for s in ordered] == [100, 100, 50]
    assert all(s["schedulerName"] == "berth" for s in slices)
    assert len(items(api, f"{OCM}/placementdecisions",
                     "cluster.open-cluster-management.io/placement=default.everywhere")) == 3
    profiles = {p["metadata"]["name"]: p for p in items(api, f"{SIG}/clusterprofiles")}
    assert sorted(profiles) == names
    c001, c050 = profiles["c001"], profiles["c050"]
    assert c001["spec"] == {"displayName": "default/c001", "clusterManager": {"name": "berth"}}
    assert c001["metadata"]["labels"]["x-k8s.io/cluster-manager"] == "berth"
    assert c001["status"]["version"] == {"kubernetes": "v1.36.3"}
    assert [(c["type"], c["status"]) for c in c001["status"]["conditions"]] == [
        ("ControlPlaneHealthy", "True")]
    assert c050["status"]["conditions"][0]["status"] == "False"
    props = {p["name"]: p for p in c001["status"]["properties"]}
    assert props["label.berth.io/zone"]["value"] == "z1"
    assert props["metric.berth.io/energy"]["value"] == "0.42"
    assert "lastObservedTime" in props["metric.berth.io/energy"]
    # the Export's access provider, with where a push cluster is (never a credential);
    # a cluster whose status says no endpoint (a pull cluster's) lists none
    assert profiles["c002"]["status"]["accessProviders"] == [
        {"name": "token-reader", "cluster": {"server": "https://c002.example:6443",
                                             "certificate-authority-data": "Q0E="}}]
    assert "accessProviders" not in c001["status"]
    crds = {c["metadata"]["name"] for c in api.request(
        "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]}
    assert {"clusterprofiles.multicluster.x-k8s.io", "placementdecisions.multicluster.x-k8s.io",
            "placementdecisions.cluster.open-cluster-management.io"} <= crds


def _argo_secret(api: KubeCluster, name: str) -> None:
    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    api.request("POST", f"/api/v1/namespaces/{NS}/secrets", {
        "metadata": {"name": f"cluster-{name}",
                     "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "data": {"name": b64(name), "server": b64(f"https://{name}.example.com")}},
        ok=(200, 201, 409))


def test_argo_cd_reads_exactly_berths_placements(store: Store, api: KubeCluster,
                                                exporter: Callable[..., Exporter]) -> None:
    """An ApplicationSet's clusterDecisionResource generator, by Argo CD's rules, on
    berth's exports: one parameter set per cluster berth chose, nothing else; by label
    selector (one application) or for several applications at once."""
    for name in ("paris", "dresden", "oslo"):
        cluster(store, name)
    app(store, "web", ["paris", "dresden"])
    app(store, "db", ["oslo"])
    app(store, "batch", [])
    exporter()
    wait(lambda: _synced(store), 60, "synced")
    for name in ("paris", "dresden", "oslo"):
        _argo_secret(api, name)

    def request(method: str, path: str) -> dict[str, Any]:
        return api.request(method, path)

    def clusters(app_name: str) -> list[str] | None:
        got = generate_params(request, NS, {
            "configMapRef": "berth-placements", "labelSelector": {"matchLabels": {
                "cluster.open-cluster-management.io/placement": f"default.{app_name}"}}})
        return None if got is None else sorted(p["name"] for p in got)

    assert clusters("web") == ["dresden", "paris"]
    assert clusters("db") == ["oslo"]
    assert clusters("batch") is None  # chosen nowhere: no parameters (Argo CD: nil)
    by_name = generate_params(request, NS, {"configMapRef": "berth-placements",
                                            "name": "default.web-decision-1"})
    assert by_name is not None
    web = {p["name"]: p for p in by_name}
    assert sorted(web) == ["dresden", "paris"]
    assert web["paris"]["server"] == "https://paris.example.com"
    assert web["paris"]["clusterName"] == "paris"
    assert web["paris"]["reason"].startswith("current: score 0.5000")
    every = generate_params(request, NS, {"configMapRef": "berth-placements",
                                          "labelSelector": {"matchLabels": {
                                              "berth.io/export": "argocd"}}})
    assert every is not None
    assert sorted(p["name"] for p in every) == ["dresden", "oslo", "paris"]


def test_a_move_flips_within_a_cycle_and_never_lists_neither(
        store: Store, api: KubeCluster, exporter: Callable[..., Exporter]) -> None:
    for name in ("a", "b"):
        cluster(store, name)
    app(store, "mover", ["a"])
    exporter()
    wait(lambda: decided(api, "mover").keys() == {"a"}, 60, "placed on a")
    seen: list[dict[str, str]] = []

    def watch() -> bool:
        now = decided(api, "mover")
        seen.append(now)
        return bool(now)

    place(store, "mover", ["b"], {"a": True, "b": False})  # the scheduler moves it
    began = time.monotonic()
    both = wait(lambda: watch() and decided(api, "mover").keys() == {"a", "b"} and
                decided(api, "mover"), 30, "both listed during the move")
    flipped = time.monotonic() - began
    assert both["a"].startswith("leaving:") and both["b"].startswith("arriving:")
    place(store, "mover", ["b"], {"b": True})  # available on b; the copy on a is gone
    wait(lambda: watch() and decided(api, "mover").keys() == {"b"}, 30, "only b")
    assert decided(api, "mover")["b"].startswith("current:")
    assert all(seen), f"a moment listed neither cluster: {seen}"
    assert flipped < 5.0, f"the move reached the export after {flipped:.1f} s"


def test_unchanged_decisions_cause_no_write(store: Store, api: KubeCluster,
                                            exporter: Callable[..., Exporter]) -> None:
    for name in ("a", "b"):
        cluster(store, name)
    for i in range(10):
        app(store, f"still{i}", ["a"])
    e = exporter(resync=1.0)  # compare everything every second
    wait(lambda: _synced(store), 60, "synced")
    time.sleep(1.5)

    def writes() -> float:
        return sum(s.value for m in WRITES.collect() for s in m.samples
                   if s.name.endswith("_total") and s.labels["export"] == "argocd")

    before = writes()
    for i in range(10):
        place(store, f"still{i}", ["a"])  # rewritten as it was: the same decision
    time.sleep(3.0)  # three full comparisons
    assert writes() == before
    place(store, "still3", ["b"])  # moved (and its copy on a already gone)
    wait(lambda: decided(api, "still3").keys() == {"b"}, 30, "still3 on b")
    time.sleep(2.0)
    assert writes() - before == 2  # its SIG slice, its OCM object's status: nothing else
    assert e.alive()


def test_exports_go_with_their_application_and_the_export(
        store: Store, api: KubeCluster, exporter: Callable[..., Exporter]) -> None:
    cluster(store, "a")
    app(store, "short", ["a"])
    app(store, "kept", ["a"], labels={"export": "yes"})
    export(store, api, applications={"matchLabels": {"export": "yes"}})
    exporter()
    wait(lambda: decided(api, "kept"), 60, "kept exported")
    assert not decided(api, "short")  # not selected
    store.commit([Delete(keys.resource_key("Application", "kept", "default")),
                  Delete(keys.binding_key("Application", "default", "kept"))])
    wait(lambda: not items(api, f"{SIG}/placementdecisions",
                           "multicluster.x-k8s.io/placement-key=default.kept"), 30,
         "kept's slices gone")
    assert not decided(api, "kept")
    store.commit([Delete(keys.resource_key("Export", "argocd"))])
    wait(lambda: not items(api, f"{SIG}/clusterprofiles", "berth.io/export=argocd")
         and not items(api, f"/api/v1/namespaces/{NS}/configmaps", "berth.io/export=argocd"),
         30, "everything the export wrote gone")
    wait(lambda: store.get(keys.exported_key("argocd")) is None, 30, "its status gone")


def _refused(store: Store) -> dict[str, str]:
    kv = store.get(keys.exported_key("argocd"))
    return msgspec.json.decode(kv.value, type=Exported).status.refused if kv else {}


def test_clusters_sharing_a_name_are_never_taken_for_each_other(
        store: Store, api: KubeCluster, exporter: Callable[..., Exporter]) -> None:
    """#72 items 4 and 5: default/paris and eu/paris were both exported as ``paris``, so
    eu/shop's decision named default/paris's profile, and Argo CD's cluster ``paris``.
    Every shape names each cluster by its own exported name, and Argo CD's reader
    deploys eu/shop to eu/paris. Two names whose digests meet (found by search: both
    are ``clashingclusternamexyz-97ed3fbc``) cannot both be exported: the second is
    left out of every shape, never named as the first, and the Export's status says
    so, sync after sync, until the clash is gone."""
    cluster(store, "paris")
    cluster(store, "paris", ns="eu")
    cluster(store, "eu.paris")
    app(store, "shop", ["eu/paris"], ns="eu")
    app(store, "web", ["paris", "eu.paris"])
    first, second = "ClAshiNgclUsternamexyz", "ClaSHingcLuStErnamexyz"
    for name in (first, second):
        cluster(store, name)
    app(store, "both", [first, second])
    exporter()
    wait(lambda: _synced(store), 60, "synced")
    profiles = {p["metadata"]["name"]: p["spec"]["displayName"]
                for p in items(api, f"{SIG}/clusterprofiles")}
    assert profiles == {"paris": "default/paris", "eu.paris": "eu/paris",
                        "default.eu.paris": "default/eu.paris",
                        "clashingclusternamexyz-97ed3fbc": f"default/{first}"}
    assert decided(api, "shop", "eu").keys() == {"eu.paris"}
    assert decided(api, "web").keys() == {"paris", "default.eu.paris"}
    sig = {d["clusterProfileRef"]["name"] for s in items(
        api, f"{SIG}/placementdecisions", "multicluster.x-k8s.io/placement-key=eu.shop")
        for d in s["decisions"]}
    assert sig == {"eu.paris"}
    for name in ("paris", "eu.paris", "default.eu.paris"):  # Argo CD knows them so
        _argo_secret(api, name)
    got = generate_params(lambda m, p: api.request(m, p), NS, {
        "configMapRef": "berth-placements", "labelSelector": {"matchLabels": {
            "cluster.open-cluster-management.io/placement": "eu.shop"}}})
    assert got is not None and [(p["name"], p["server"]) for p in got] == [
        ("eu.paris", "https://eu.paris.example.com")]
    # the clash: the second is in no shape, and said
    assert decided(api, "both").keys() == {"clashingclusternamexyz-97ed3fbc"}
    said = wait(lambda: _refused(store).keys() == {f"cluster:default/{second}",
                                                   "app:default/both"} and _refused(store),
                30, "the clash said")
    assert f"is cluster default/{first}'s too" in said[f"cluster:default/{second}"]
    assert said["app:default/both"].startswith(f"its decisions leave out default/{second}")
    # ... and still said after syncs of other things: a change of profiles, of an app
    cluster(store, "paris", labels={"zone": "x"})
    place(store, "web", ["paris"])
    wait(lambda: decided(api, "web").keys() == {"paris"}, 30, "web moved")
    time.sleep(0.5)
    assert _refused(store).keys() == said.keys()
    kv = store.get(keys.exported_key("argocd"))
    assert kv is not None and b"2 item(s) not exported" in kv.value
    # resolved: the first is gone (and berth places both on the second alone), the
    # second takes the name, nothing is said
    store.commit([Delete(keys.resource_key("Cluster", first, "default"))])
    place(store, "both", [second])
    seen: list[dict[str, str]] = []
    try:
        wait(lambda: not seen.append(_refused(store)) and not seen[-1], 30,
             "the clash no longer said")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still said: {seen[-1]}") from None
    profiles = {p["metadata"]["name"]: p["spec"]["displayName"]
                for p in items(api, f"{SIG}/clusterprofiles")}
    assert profiles["clashingclusternamexyz-97ed3fbc"] == f"default/{second}"
    assert decided(api, "both").keys() == {"clashingclusternamexyz-97ed3fbc"}


def test_installing_no_crd_is_said(store: Store, api: KubeCluster,
                                   exporter: Callable[..., Exporter]) -> None:
    """installCRDs false on an API without the shapes' CRDs: Failing, naming the CRD."""
    api.request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                "placementdecisions.cluster.open-cluster-management.io", ok=(200, 404))
    wait(lambda: not _served(api), 30, "the OCM CRD gone")
    export(store, api, installCRDs=False)
    exporter()
    status = wait(lambda: (kv := store.get(keys.exported_key("argocd"))) is not None
                  and b"Failing" in kv.value and kv.value, 30, "said")
    assert b"lacks the CRDs" in status and b"installCRDs is false" in status
    assert b"placementdecisions.cluster.open-cluster-management.io" in status
    export(store, api)  # installCRDs back on: the runner starts anew and installs it
    wait(lambda: _synced(store), 60, "synced once installed")
    assert _served(api)


def _served(api: KubeCluster) -> bool:
    try:
        found = api.request("GET", "/apis/cluster.open-cluster-management.io/v1beta1")
    except Exception:
        return False
    return any(r["name"] == "placementdecisions" for r in found.get("resources") or [])


def test_api_server_killed_and_etcd_compacted_lose_no_decision(
        store: Store, etcd_server: EtcdServer, api: KubeCluster, tmp_path: Path,
        exporter: Callable[..., Exporter]) -> None:
    """The real process: its export's API server is killed, and so is the exporter,
    while berth moves applications, adds one and deletes one, and etcd is compacted
    past all of it; the exporter starts again while the API server is still down, then
    the API server does: every decision is there as berth made it. Stopped and started
    once more, the exporter lists what is there and writes nothing."""
    for name in ("a", "b"):
        cluster(store, name)
    for i in range(20):
        app(store, f"app{i}", ["a"])
    export(store, api)
    proc = _process(etcd_server, tmp_path)
    try:
        wait(lambda: _synced(store), 60, "synced")
        api.stop()
        proc.kill()
        proc.wait(30)
        for i in range(0, 20, 2):
            place(store, f"app{i}", ["b"])
        app(store, "new", ["b"])
        store.commit([Delete(keys.resource_key("Application", "app19", "default"))])
        store.compact(store.revision())
        proc = _process(etcd_server, tmp_path)
        wait(lambda: (kv := store.get(keys.exported_key("argocd"))) is not None
             and b"Failing" in kv.value, 60, "its status says the API is down")
        api.start()
        for i in range(20):
            want = set() if i == 19 else {"b"} if i % 2 == 0 else {"a"}
            wait(lambda i=i, want=want: decided(api, f"app{i}").keys() == want, 120,
                 f"app{i} on {want}")
        wait(lambda: decided(api, "new").keys() == {"b"}, 30, "new exported")
        wait(lambda: _synced(store), 60, "synced again")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    rv = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
          for o in items(api, f"{OCM}/placementdecisions")}
    proc = _process(etcd_server, tmp_path)
    try:
        time.sleep(1.0)
        wait(lambda: _synced(store), 60, "synced after the restart")
        time.sleep(1.0)
        again = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                 for o in items(api, f"{OCM}/placementdecisions")}
        assert again == rv  # a restart rewrites nothing
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def _process(etcd: EtcdServer, tmp_path: Path, name: str = "r") -> subprocess.Popen[bytes]:
    config = tmp_path / "exporter.yaml"
    config.write_text("settle: 0.05\nmax_backoff: 2\n")
    with open(tmp_path / f"exporter-{name}.log", "ab") as log:  # the process has a copy
        return subprocess.Popen([sys.executable, "-m", "berth.cli.main", "exporter", "--etcd",
                                 etcd.url, "--http", "127.0.0.1:0", "--config", str(config),
                                 "--lease-ttl", "3"], stdout=log, stderr=subprocess.STDOUT)


def test_a_leader_change_loses_no_decision(store: Store, etcd_server: EtcdServer,
                                           api: KubeCluster, tmp_path: Path,
                                           exporter: Callable[..., Exporter]) -> None:
    """Two exporters: the leader is killed while berth moves applications; the other
    takes over within the lease, writes every move, and rewrites nothing else."""
    for name in ("a", "b"):
        cluster(store, name)
    for i in range(10):
        app(store, f"led{i}", ["a"])
    export(store, api)
    procs = [_process(etcd_server, tmp_path, f"r{i}") for i in range(2)]
    try:
        wait(lambda: _synced(store), 60, "synced")
        before = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                  for o in items(api, f"{OCM}/placementdecisions")}
        holder = json.loads(store.get(keys.lease_key("exporter")).value)["holder"]  # type: ignore[union-attr]
        leader = next(p for p in procs if holder.endswith(f"-{p.pid}"))
        leader.kill()
        leader.wait(30)
        for i in range(0, 10, 2):
            place(store, f"led{i}", ["b"])
        for i in range(10):
            want = {"b"} if i % 2 == 0 else {"a"}
            wait(lambda i=i, want=want: decided(api, f"led{i}").keys() == want, 60,
                 f"led{i} on {want}")
        after = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                 for o in items(api, f"{OCM}/placementdecisions")}
        changed = sorted(n for n in after if after[n] != before.get(n))
        assert changed == [f"default.led{i}-decision-1" for i in range(0, 10, 2)]
        new = json.loads(store.get(keys.lease_key("exporter")).value)["holder"]  # type: ignore[union-attr]
        assert new != holder
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(30)


def test_an_export_written_elsewhere_takes_its_objects_along(
        store: Store, api: KubeCluster, exporter: Callable[..., Exporter]) -> None:
    """The Export's namespace changed: what it wrote in the old one goes, and appears in
    the new one; written back, the old namespace has it all again and the new none."""
    cluster(store, "a")
    app(store, "roamer", ["a"])
    exporter()
    wait(lambda: decided(api, "roamer"), 60, "exported")
    other = "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/elsewhere"
    export(store, api, namespace="elsewhere")
    wait(lambda: items(api, f"{other}/placementdecisions", "berth.io/export=argocd")
         and not decided(api, "roamer"), 60, "moved to the namespace elsewhere")
    export(store, api)
    wait(lambda: decided(api, "roamer") and not items(
        api, f"{other}/placementdecisions", "berth.io/export=argocd"), 60, "moved back")
