"""The real `berth propagator` applying, moving, deleting and re-applying
applications on two real kube-apiservers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Service
from lightkube.types import PatchType

from berth.store import Store, decode, encode, keys
from berth.store.documents import (
    ApplicationStatus,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingStatus,
    ObjectRef,
    Target,
)
from berth_testkit.cli import berth
from berth_testkit.scheduler_env import (
    AgentProcess,
    PropagatorProcess,
    put,
    record_puts,
    wait_for,
)
from berth_testkit.servers.etcd import ROOT, EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import kube_clients, serving_all
from tests.integration.test_propagator import CRD, register

CONFIG = ("probe_interval: 0.5\nprobe_timeout: 1\ngrace: 2\nrequest_timeout: 3\n"
          "retry_base_delay: 0.2\nretry_max_delay: 1\nresync_interval: 600\n"
          "untracked_after: 3\n")


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(KubeCluster, ("east", "west"))


@pytest.fixture
def kube(clusters: dict[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    yield from kube_clients(clusters)


AGENT = ("probe_interval: 0.5\nprobe_timeout: 1\nrequest_timeout: 3\nretry_base_delay: 0.2\n"
         "retry_max_delay: 1\nresync_interval: 600\nuntracked_after: 3\ncapacity_interval: 0.2\n")


def register_pull(store: Store, name: str, labels: dict[str, str] | None = None) -> None:
    """A Cluster in Pull mode: its agent has its credentials, etcd none."""
    put(store, keys.resource_key("Cluster", name, "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"mode": "Pull"}}))


class Plane:
    """What puts applications on the clusters: the propagator, and in pull mode an agent
    per cluster (#61: every promise holds in both modes, so these tests run in both).
    Its log is theirs together; killing or restarting it is the propagator's."""

    def __init__(self, mode: str, propagator: Plane,
                 agents: dict[str, AgentProcess]) -> None:
        self.mode = mode
        self.propagator = propagator
        self.agents = agents

    def output(self, *, since_start: bool = False) -> str:
        return "".join(p.output(since_start=since_start)
                       for p in (self.propagator, *self.agents.values()))

    def start(self) -> Plane:
        self.propagator.start()
        return self

    def kill(self) -> None:
        self.propagator.kill()

    def stop(self) -> int:
        return self.propagator.stop()

    def metrics(self) -> str:
        return self.propagator.metrics()


def wipe(server: KubeCluster) -> None:
    """Remove what berth left on a cluster the module's tests share (the push and pull
    runs of one test place the same names)."""
    from lightkube.resources.batch_v1 import Job
    from lightkube.resources.core_v1 import Secret

    client = Client(KubeConfig.from_dict(server.kubeconfig()), trust_env=False)
    try:
        for kind in (Deployment, ConfigMap, Service, Job, Secret):
            for obj in client.list(kind, namespace="*",
                                   labels={"app.kubernetes.io/managed-by": "berth"}):
                assert obj.metadata is not None and obj.metadata.name is not None
                client.delete(kind, obj.metadata.name, namespace=obj.metadata.namespace,
                              grace_period=0)
    finally:
        client.close()


@pytest.fixture(params=["push", "pull"])
def propagator(request: pytest.FixtureRequest, etcd_server: EtcdServer, store: Store,
               tmp_path: Path, clusters: dict[str, KubeCluster]) -> Iterator[Plane]:
    mode = request.param
    agents: dict[str, AgentProcess] = {}
    for server in clusters.values():
        wipe(server)
    for name, server in clusters.items():
        if mode == "pull":
            register_pull(store, name)
            agents[name] = AgentProcess(etcd_server.url, tmp_path, cluster=f"default/{name}",
                                        kubeconfig=server.kubeconfig(), config=AGENT,
                                        name=name).start()
        else:
            register(store, name, server.kubeconfig())
    proc = PropagatorProcess(etcd_server.url, tmp_path, config=CONFIG).start()
    yield Plane(mode, proc, agents)
    proc.stop()
    for agent in agents.values():
        agent.stop()
    out = "".join(p.output() for p in (proc, *agents.values()))
    print(out[-6000:])
    for server in clusters.values():
        assert server.token not in out  # credentials are never logged
    assert "Traceback" not in out


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


def service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": data}


def app(store: Store, name: str, manifest: list[Any], generation: int = 1,
        deleted: bool = False) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "generation": generation}
    if deleted:
        meta["deleted"] = datetime.now(UTC).isoformat()
    put(store, keys.resource_key("Application", name, "default"), msgspec.json.encode(
        {"api": "kubernetes", "kind": "Application", "metadata": meta,
         "spec": {"manifest": manifest}}))


def bind(store: Store, name: str, generation: int, *on: str) -> None:
    doc = Binding(BindingMeta(name, "default"), BindingSpec(
        ObjectRef("Application", name, "default"), generation,
        [Target("Cluster", c, "default") for c in on]), BindingStatus("Scheduled"))
    put(store, keys.binding_key("Application", "default", name), encode(doc))




def status(store: Store, name: str) -> ApplicationStatus | None:
    kv = store.get(keys.status_key("Application", "default", name))
    return decode(kv.value, ApplicationStatus, kv.key) if kv else None


def running(state: str, *on: str, generation: int = 1) -> Any:
    def check(s: ApplicationStatus) -> bool:
        return (s.status.state == state and s.status.generation == generation
                and sorted(r.name for r in s.status.running_on) == sorted(on))
    return check


def present(client: Client, kind: Any, name: str, namespace: str | None = "default") -> bool:
    try:
        client.get(kind, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise
    return True


def test_apply_move_make_before_break_and_delete(
    etcd_server: EtcdServer, store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    app(store, "web", [deployment("web"), service("web")])
    bind(store, "web", 1, "east")
    wait_for(lambda: status(store, "web"), running("RUNNING", "east"), timeout=30)
    dep = kube["east"].get(Deployment, "web", namespace="default")
    assert dep.metadata is not None and dep.metadata.labels is not None
    assert dep.metadata.labels["app.kubernetes.io/managed-by"] == "berth"
    assert (dep.metadata.annotations or {})["berth.dev/application"] == "default/web"
    # berth applies (server-side apply); the cluster's controllers write only the status
    assert {(f.manager, f.operation, f.subresource) for f in dep.metadata.managedFields or []
            if f.manager == "berth" or f.operation == "Apply"} == {("berth", "Apply", None)}
    assert dep.status is not None and dep.status.availableReplicas == 1
    assert present(kube["east"], Service, "web")
    assert not present(kube["west"], Deployment, "web")

    seen, watch = record_puts(store, keys.status_key("Application", "default", "web"),
                              ApplicationStatus)
    try:
        bind(store, "web", 1, "west")  # the scheduler moved it
        wait_for(lambda: status(store, "web"), running("RUNNING", "west"), timeout=30)
    finally:
        watch.close()
    assert present(kube["west"], Deployment, "web") and present(kube["west"], Service, "web")
    assert not present(kube["east"], Deployment, "web")
    assert not present(kube["east"], Service, "web")
    # Make before break: recorded as running on both before east was emptied.
    both = [s for s in seen if {r.name for r in s.status.running_on} == {"east", "west"}
            and s.status.state == "MIGRATING"]
    assert both, [s.status for s in seen]

    done = subprocess.run([sys.executable, "-m", "berth.cli.main", "delete", "application",
                           "default/web", "--etcd", etcd_server.url], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "marked /berth/v1/applications/default/web deleted" in (
        done.stdout), done.stderr
    wait_for(lambda: store.get(keys.resource_key("Application", "web", "default")) is None
             or None, timeout=30)
    assert not present(kube["west"], Deployment, "web")
    assert not present(kube["west"], Service, "web")
    assert status(store, "web") is None


def test_a_generation_waits_for_its_binding_and_prunes_dropped_objects(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    app(store, "gen", [config_map("gen-a", v="1"), config_map("gen-b", v="1")])
    bind(store, "gen", 1, "east", "west")
    wait_for(lambda: status(store, "gen"), running("RUNNING", "east", "west"), timeout=30)
    app(store, "gen", [config_map("gen-a", v="2")], generation=2)
    waiting = wait_for(lambda: status(store, "gen"),
                       lambda s: "waiting for the scheduler" in s.status.reason, timeout=30)
    assert waiting.status.state == "RUNNING" and waiting.status.generation == 1
    assert kube["east"].get(ConfigMap, "gen-a", namespace="default").data == {"v": "1"}
    bind(store, "gen", 2, "east", "west")
    wait_for(lambda: status(store, "gen"), running("RUNNING", "east", "west", generation=2),
             timeout=30)
    for client in kube.values():
        assert client.get(ConfigMap, "gen-a", namespace="default").data == {"v": "2"}
        assert not present(client, ConfigMap, "gen-b")


def test_an_application_whose_key_vanished_is_cleaned_up(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    app(store, "gone", [config_map("gone")])
    bind(store, "gone", 1, "west")
    wait_for(lambda: status(store, "gone"), running("RUNNING", "west"), timeout=30)
    store.delete(keys.resource_key("Application", "gone", "default"))  # as with etcdctl del
    wait_for(lambda: status(store, "gone") is None or None, timeout=30)
    assert not present(kube["west"], ConfigMap, "gone")


def test_a_namespace_the_cluster_lacks_is_created_and_kept(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    """As Karmada: an object in a Kubernetes namespace the cluster does not have gets
    the namespace (it used to be FAILED and retried for ever); deleting the application
    leaves the namespace (other things may live there)."""
    from lightkube.resources.core_v1 import Namespace

    cm = config_map("teamed")
    cm["metadata"]["namespace"] = "team-ux"
    app(store, "teamed", [cm])
    bind(store, "teamed", 1, "west")
    wait_for(lambda: status(store, "teamed"), running("RUNNING", "west"), timeout=30)
    assert present(kube["west"], ConfigMap, "teamed", namespace="team-ux")
    ns = kube["west"].get(Namespace, "team-ux")
    assert ns.metadata is not None and ns.metadata.labels == {
        "app.kubernetes.io/created-by": "berth", "kubernetes.io/metadata.name": "team-ux"}
    app(store, "teamed", [cm], generation=2, deleted=True)
    wait_for(lambda: status(store, "teamed") is None or None, timeout=30)
    assert not present(kube["west"], ConfigMap, "teamed", namespace="team-ux")
    assert present(kube["west"], Namespace, "team-ux", namespace=None)


def test_apply_has_a_cluster_judge_the_manifests_first(
    store: Store, clusters: dict[str, KubeCluster], kube: dict[str, Client], tmp_path: Path
) -> None:
    """#25: a typo inside a manifest was accepted by apply and failed on the cluster
    seconds later; now a cluster of the namespace dry-runs it first (strict fields)."""
    from berth_testkit.scheduler_env import set_state

    register(store, "east", clusters["east"].kubeconfig())
    set_state(store, "east", "ONLINE")
    good = {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": "typo", "namespace": "default"},
            "spec": {"manifest": [deployment("typo")]}}
    bad = json.loads(json.dumps(good))
    bad["spec"]["manifest"][0]["spec"]["replicsa"] = 3
    f = tmp_path / "typo.yaml"
    f.write_text(json.dumps(bad))
    url = store.config.url
    code, err = berth_err("apply", "-f", str(f), "--etcd", url)
    assert code == 1, err
    assert "spec.manifest[0] (Deployment typo): cluster east refuses it" in err
    assert "replicsa" in err and "nothing written" in err
    assert store.get(keys.resource_key("Application", "typo", "default")) is None
    code, err = berth_err("apply", "-f", str(f), "--validate", "warn", "--etcd", url)
    assert code == 0 and "warning: " in err and "replicsa" in err
    f.write_text(json.dumps(good))
    assert berth_err("apply", "-f", str(f), "--etcd", url)[0] == 0
    assert not present(kube["east"], Deployment, "typo")  # a dry run only


def berth_err(*argv: str) -> tuple[int, str]:
    """The ``berth`` command in-process: its exit code and standard error."""
    import contextlib
    import io

    from berth.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    return code, err.getvalue()


def test_drift_is_reapplied(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    app(store, "drift", [deployment("drift", replicas=2), config_map("drift", v="mine")])
    bind(store, "drift", 1, "east")
    wait_for(lambda: status(store, "drift"), running("RUNNING", "east"), timeout=30)
    east = kube["east"]
    east.delete(ConfigMap, "drift", namespace="default")
    back = wait_for(lambda: east.get(ConfigMap, "drift", namespace="default")
                    if present(east, ConfigMap, "drift") else None, timeout=15)
    assert back.data == {"v": "mine"}
    wait_for(lambda: "was deleted by someone else" in propagator.output() or None, timeout=5)
    # The re-apply applies the ConfigMap, then the Deployment (docs/order.md): a change
    # to the Deployment is someone else's after berth's apply of it, or while it is in
    # flight (then seen as a change right after it): reverted either way.
    east.patch(Deployment, "drift", {"spec": {"replicas": 5}}, namespace="default",
               patch_type=PatchType.MERGE, field_manager="someone")
    wait_for(lambda: east.get(Deployment, "drift", namespace="default"),
             lambda d: d.spec is not None and d.spec.replicas == 2, timeout=15)
    wait_for(lambda: "was changed by someone else" in propagator.output() or None, timeout=5)


@pytest.mark.parametrize("propagator", ["push"], indirect=True)  # the propagator's watches
def test_namespaces_of_one_server_share_its_watch_and_each_sees_only_its_own_drift(
    store: Store, propagator: Plane, kube: dict[str, Client],
    clusters: dict[str, KubeCluster]
) -> None:
    """east-b is a second context of east's server (namespace team-b), as the same user:
    one watch of ConfigMaps serves both, and a change by hand to one application's
    object re-applies that application on its own cluster only — also after a
    restart, when only the statuses say which cluster applied what."""
    server = clusters["east"]
    others = server.watches("configmaps")  # the control plane's own
    app(store, "one", [{**config_map("one", v="1"), "metadata": {"name": "one"}}])
    bind(store, "one", 1, "east")
    wait_for(lambda: status(store, "one"), running("RUNNING", "east"), timeout=30)
    wait_for(lambda: server.watches("configmaps"), lambda n: n == others + 1, timeout=15)
    config = clusters["east"].kubeconfig()
    config["contexts"][0]["context"]["namespace"] = "team-b"
    register(store, "east-b", config)
    app(store, "two", [{**config_map("two", v="2"), "metadata": {"name": "two"}}])
    bind(store, "two", 1, "east-b")
    wait_for(lambda: status(store, "two"), running("RUNNING", "east-b"), timeout=30)
    east = kube["east"]
    assert present(east, ConfigMap, "two", "team-b") and present(east, ConfigMap, "one")
    for _ in range(10):  # no second watch
        assert server.watches("configmaps") == others + 1
        time.sleep(0.2)

    def applied(proc: PropagatorProcess) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in proc.metrics().splitlines()
                   if line.startswith('berth_propagator_applies_total{result="applied"}'))

    def reapplied(name: str) -> list[str]:
        return [line for line in propagator.output(since_start=True).splitlines()
                if "by someone else" in line and f"re-applying default/{name}" in line]

    for round_ in ("running", "restarted"):
        east.delete(ConfigMap, "two", namespace="team-b")
        wait_for(lambda: present(east, ConfigMap, "two", "team-b") or None, timeout=15)
        lines = wait_for(lambda: reapplied("two") or None, timeout=5)
        assert all("on cluster default/east-b " in line for line in lines), (round_, lines)
        east.patch(ConfigMap, "one", {"data": {"v": "changed"}}, namespace="default",
                   patch_type=PatchType.MERGE, field_manager="someone")
        wait_for(lambda: east.get(ConfigMap, "one", namespace="default"),
                 lambda c: c.data == {"v": "1"}, timeout=15)
        lines = wait_for(lambda: reapplied("one") or None, timeout=5)
        assert all("on cluster default/east " in line for line in lines), (round_, lines)
        assert status(store, "two") is not None
        if round_ == "running":
            propagator.kill()
            propagator.start()  # serves once the killed one's claims expire; re-applies
            # what runs on its clusters within GAINED_SPREAD (30 s), which opens the watch
            # and records its writes: a change after that is told from berth's own
            wait_for(lambda: applied(propagator), lambda n: n >= 2, timeout=45)
            wait_for(lambda: server.watches("configmaps"), lambda n: n == others + 1,
                     timeout=15)
    store.delete(keys.resource_key("Cluster", "east-b", "default"))


def test_a_manifest_the_cluster_refuses_is_failed_until_the_spec_changes(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    broken = deployment("refused")
    del broken["spec"]["selector"]
    app(store, "refused", [broken])
    bind(store, "refused", 1, "east")
    failed = wait_for(lambda: status(store, "refused"),
                      lambda s: s.status.state == "FAILED", timeout=30)
    assert "HTTP 422" in failed.status.reason and "spec.selector" in failed.status.reason
    assert failed.status.rejected_generation == 1
    # recorded there (intent) but not running there: nothing exists on east
    assert failed.status.running_on == [] and failed.status.generation == 0
    assert "default/east" in failed.status.applied
    assert not present(kube["east"], Deployment, "refused")
    # The command an operator runs says so, and fails (it said Scheduled and exited 0).
    code, out = berth("explain", "application", "default/refused", "--etcd", store.config.url)
    assert code == 1
    assert "Application default/refused: Scheduled" in out
    assert "propagator: FAILED (refused by cluster default/east: " in out
    assert out.rstrip().endswith("running on nowhere")
    refusals = propagator.output().count("refused the manifest")
    assert refusals == 1  # not retried
    app(store, "refused", [deployment("refused")], generation=2)
    bind(store, "refused", 2, "east")
    wait_for(lambda: status(store, "refused"), running("RUNNING", "east", generation=2),
             timeout=30)
    assert propagator.output().count("refused the manifest") == 1


def test_a_malformed_manifest_names_the_field(
    store: Store, propagator: Plane
) -> None:
    app(store, "nameless", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}])
    bind(store, "nameless", 1, "east")
    failed = wait_for(lambda: status(store, "nameless"),
                      lambda s: s.status.state == "FAILED", timeout=30)
    assert failed.status.reason == "spec.manifest[0].metadata.name: missing"


def test_custom_resources_apply_with_their_crd_and_are_discovered(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    cron = {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "nightly"}, "spec": {"cronSpec": "0 3 * * *"}}
    app(store, "cr", [cron, CRD])  # the CRD is applied first, whatever the order
    bind(store, "cr", 1, "west")
    # A CronTab has no condition to judge it by: available untracked_after seconds after
    # it was applied (3 here), as KubeFleet treats kinds it cannot track.
    # (Until the CRD is established, the reason names the CRD: the first object not
    # available.)
    wait_for(lambda: status(store, "cr"),
             lambda s: running("PROGRESSING", "west")(s) and "untracked kind" in s.status.reason,
             timeout=30)
    done = wait_for(lambda: status(store, "cr"), running("RUNNING", "west"), timeout=30)
    assert [o.kind for o in done.status.applied["default/west"].objects] == [
        "CustomResourceDefinition", "CronTab"]
    cluster_status = wait_for(
        lambda: store.get(keys.status_key("Cluster", "default", "west")),
        lambda kv: b"crontabs.stable.example.com" in kv.value, timeout=20)
    assert cluster_status is not None
    app(store, "cr", [cron, CRD], deleted=True)
    wait_for(lambda: status(store, "cr") is None or None, timeout=30)
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

    # deleted by berth; the API server removes it once its custom resources are cleaned
    # up (its finalizer): a moment after berth's delete returned (seen once, pull mode)
    wait_for(lambda: not present(kube["west"], CustomResourceDefinition,
                                 "crontabs.stable.example.com", namespace=None) or None,
             timeout=30)


def test_a_cluster_going_away_is_retried_and_others_are_unaffected(
    store: Store, propagator: Plane, kube: dict[str, Client],
    clusters: dict[str, KubeCluster]
) -> None:
    app(store, "away", [config_map("away", v="1")])
    app(store, "stays", [config_map("stays", v="1")])
    bind(store, "away", 1, "east")
    bind(store, "stays", 1, "west")
    wait_for(lambda: status(store, "away"), running("RUNNING", "east"), timeout=30)
    clusters["east"].stop()
    try:
        app(store, "away", [config_map("away", v="2")], generation=2)
        bind(store, "away", 2, "east")
        app(store, "stays", [config_map("stays", v="2")], generation=2)
        bind(store, "stays", 2, "west")
        wait_for(lambda: status(store, "stays"), running("RUNNING", "west", generation=2),
                 timeout=30)
        failing = wait_for(lambda: status(store, "away"),
                           lambda s: "default/east" in s.status.errors, timeout=30)
        # Generation 1 still runs there: degraded, not failed.
        assert failing.status.state == "DEGRADED", failing.status
        assert "generation 2 not applied on default/east" in failing.status.reason
        assert failing.status.generation == 1
    finally:
        clusters["east"].start()
    wait_for(lambda: status(store, "away"), running("RUNNING", "east", generation=2),
             timeout=60)
    assert kube["east"].get(ConfigMap, "away", namespace="default").data == {"v": "2"}


def test_an_application_on_a_cluster_gone_offline_is_not_running(
    store: Store, propagator: Plane, clusters: dict[str, KubeCluster]
) -> None:
    """#10 item 4: nothing about the application changes, its cluster's API goes away: as
    soon as the observer says OFFLINE, the status says so (it said RUNNING for 45 s+)."""
    app(store, "quiet", [config_map("quiet", v="1")])
    bind(store, "quiet", 1, "east")
    wait_for(lambda: status(store, "quiet"), running("RUNNING", "east"), timeout=30)
    clusters["east"].stop()
    try:
        gone = wait_for(lambda: status(store, "quiet"),
                        lambda s: s.status.state != "RUNNING", timeout=20)
        assert gone.status.state == "DEGRADED", gone.status
        assert gone.status.reason.startswith("not observed: cluster default/east is OFFLINE")
        assert [r.name for r in gone.status.running_on] == ["east"]  # its objects stay there
        assert ("WARNING berth.controllers.propagator.observer: cluster default/east is OFFLINE"
                in propagator.output())
        if propagator.mode == "pull":  # the agent lives: it says why
            assert "its agent reports: unreachable" in gone.status.reason
    finally:
        clusters["east"].start()
    wait_for(lambda: status(store, "quiet"), running("RUNNING", "east"), timeout=60)


def test_garbage_in_etcd_loses_nothing(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    app(store, "kept", [config_map("kept")])
    bind(store, "kept", 1, "east")
    wait_for(lambda: status(store, "kept"), running("RUNNING", "east"), timeout=30)
    # Someone breaks the application's key by hand: the running process keeps
    # the last good value; a restarted one cannot read it. Its objects stay.
    put(store, keys.resource_key("Application", "kept", "default"), b"{not json")
    wait_for(lambda: "skipping undecodable value: /berth/v1/applications/default/kept" in
             propagator.output() or None, timeout=15)
    propagator.stop()
    propagator.start()
    wait_for(lambda: "holds a value that is not an Application document" in
             propagator.output() or None, timeout=15)
    assert present(kube["east"], ConfigMap, "kept")
    assert status(store, "kept") is not None
    # Garbage in a status key (the propagator's own) is replaced.
    put(store, keys.status_key("Application", "default", "other"), b"[]")
    app(store, "other", [config_map("other")])
    bind(store, "other", 1, "west")
    other = keys.status_key("Application", "default", "other")
    wait_for(lambda: status(store, "other") if (kv := store.get(other)) is not None
             and kv.value != b"[]" else None,  # replaced, or deleted then written
             running("RUNNING", "west"), timeout=30)
    # replaced, or deleted if the reconcile ran before the application existed
    assert "held a value that is not a status document" in propagator.output()
    # ... also over a status it wrote, with nothing else happening to the application.
    put(store, keys.status_key("Application", "default", "other"), b"{garbage")
    wait_for(lambda: status(store, "other") if store.get(keys.status_key(
        "Application", "default", "other")).value != b"{garbage" else None,  # type: ignore[union-attr]
        running("RUNNING", "west"), timeout=15)
    assert propagator.output().count("held a value that is not a status document") == 2
    # The application's key repaired: applied as before.
    app(store, "kept", [config_map("kept", v="again")], generation=2)
    bind(store, "kept", 2, "east")
    wait_for(lambda: status(store, "kept"), running("RUNNING", "east", generation=2), timeout=30)


def test_without_watches_the_resync_repairs_drift(
    etcd_server: EtcdServer, store: Store, tmp_path: Path,
    clusters: dict[str, KubeCluster], kube: dict[str, Client]
) -> None:
    register(store, "east", clusters["east"].kubeconfig())
    proc = PropagatorProcess(etcd_server.url, tmp_path, name="resync", config=CONFIG.replace(
        "resync_interval: 600", "resync_interval: 1") + "drift_watch: false\n").start()
    try:
        app(store, "resync", [config_map("resync", v="mine")])
        bind(store, "resync", 1, "east")
        wait_for(lambda: status(store, "resync"), running("RUNNING", "east"), timeout=30)
        kube["east"].delete(ConfigMap, "resync", namespace="default")
        back = wait_for(lambda: kube["east"].get(ConfigMap, "resync", namespace="default")
                        if present(kube["east"], ConfigMap, "resync") else None, timeout=15)
        assert back.data == {"v": "mine"}
        assert "by someone else" not in proc.output()  # no watch: the resync did it
    finally:
        proc.stop()


def test_a_killed_propagator_resumes_from_etcd_alone(
    store: Store, propagator: Plane, kube: dict[str, Client]
) -> None:
    app(store, "resume", [config_map("resume")])
    bind(store, "resume", 1, "east")
    wait_for(lambda: status(store, "resume"), running("RUNNING", "east"), timeout=30)
    propagator.kill()
    bind(store, "resume", 1, "west")  # moved while nobody propagated
    app(store, "fresh", [config_map("fresh")])
    bind(store, "fresh", 1, "east")
    propagator.start()
    wait_for(lambda: status(store, "resume"), running("RUNNING", "west"), timeout=30)
    wait_for(lambda: status(store, "fresh"), running("RUNNING", "east"), timeout=30)
    assert not present(kube["east"], ConfigMap, "resume")
    assert present(kube["west"], ConfigMap, "resume") and present(kube["east"], ConfigMap, "fresh")


def test_get_and_describe_show_both_sides_and_never_a_secret(
    store: Store, propagator: Plane, clusters: dict[str, KubeCluster]
) -> None:
    """#11 item 8, with the real command against the real propagator and clusters."""
    url = store.config.url
    app(store, "shop", [config_map("shop", v="1"), deployment("shop", replicas=2)])
    bind(store, "shop", 1, "east")
    wait_for(lambda: status(store, "shop"), running("RUNNING", "east"), timeout=30)

    code, out = berth("get", "APPS", "--etcd", url)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "PLACEMENT", "STATE", "READY", "CLUSTERS", "AGE"]
    assert [line.split()[:5] for line in lines if line.startswith("shop ")] == [
        ["shop", "Scheduled", "RUNNING", "2/2", "east"]]  # kubectl's READY
    code, out = berth("get", "application", "default/shop", "-o", "wide", "--etcd", url)
    assert "GENERATION   PRIORITY   READY PER CLUSTER   RUNNING ON   REASON" in (
        out.splitlines()[0])
    assert out.splitlines()[1].split()[6:10] == ["1", "-", "east=2/2", "east"]  # no priority
    code, out = berth("describe", "app", "shop", "--etcd", url)
    assert "  default/east: generation 1: Healthy, 2/2 available" in out
    assert "    Deployment default/shop: Healthy" in out
    code, out = berth("get", "app", "-A", "-o", "name", "--etcd", url)
    assert "application/default/shop" in out.splitlines()
    code, out = berth("get", "app", "shop", "-o", "json", "--etcd", url)
    assert json.loads(out)["spec"]["manifest"][0]["data"] == {"v": "1"}
    assert berth("get", "app", "default/none", "--etcd", url)[0] == 1
    assert berth("get", "app", "-l", "team=x", "--etcd", url) == (0, "")

    # Clusters: the observer's state; kubeconfig tokens masked unless asked for.
    from tests.integration.test_propagator import status as observed

    wait_for(lambda: all((c := observed(store, n)) is not None and c.status.state == "ONLINE"
                         for n in ("east", "west")) or None, timeout=30)
    code, out = berth("get", "clusters", "--etcd", url)
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["east", "ONLINE"], ["west", "ONLINE"]]
    code, out = berth("describe", "cluster", "default/east", "--etcd", url)
    assert "State:       ONLINE" in out and "Applications: 1 (default/shop)" in out
    # its version as its API server says (a pull cluster's, as its agent reports it), and
    # where a push cluster is (the propagator's word: its kubeconfig's server)
    server = clusters["east"].kubeconfig()["clusters"][0]["cluster"]["server"]
    assert re.search(r"Kubernetes:  v1\.\d+", out), out
    assert (f", at {server}" in out) == (propagator.mode != "pull"), out
    if propagator.mode == "pull":  # no credential of a pull cluster is in etcd at all
        code, out = berth("get", "cluster", "east", "-o", "yaml", "--show-secrets",
                          "--etcd", url)
        assert "mode: Pull" in out and "kubeconfig" not in out
        return
    token = clusters["east"].token
    code, out = berth("get", "cluster", "east", "-o", "yaml", "--etcd", url)
    assert token not in out and "token: <masked>" in out
    code, out = berth("get", "cluster", "east", "-o", "yaml", "--show-secrets", "--etcd", url)
    assert token in out
    code, out = berth("describe", "cluster", "default/east", "--etcd", url)
    assert "State:       ONLINE" in out and "Applications: 1 (default/shop)" in out
    assert token not in out

    # A move: describe shows the propagator's side and the placements, newest first.
    bind(store, "shop", 1, "west")
    wait_for(lambda: status(store, "shop"), running("RUNNING", "west"), timeout=30)
    code, out = berth("describe", "application", "shop", "--etcd", url)
    assert code == 0
    assert "Placement:   Scheduled (generation 1" in out
    assert "Propagator:  RUNNING" in out and "Running on: west (generation 1)" in out
    assert "  default/west: generation 1: Healthy, 2/2 available" in out
    assert "    ConfigMap default/shop: Healthy" in out
    history = out.split("History (newest first, from the ledger", 1)[1].split(
        "\nEvents:", 1)[0].splitlines()[2:]
    assert all(h.split()[1] == "propagator" for h in history)  # Bindings by hand: no scheduler
    assert any("default/east: Healthy → removed" in h for h in history), history
    assert any("default/west: Progressing → Healthy" in h for h in history), history
    events = out.split("\nEvents:\n", 1)[1]
    assert "Available     " in events and "default/west" in events
    app(store, "idle", [config_map("idle")])
    code, out = berth("describe", "app", "idle", "--etcd", url)
    assert "Placement:   not scheduled (yet): no Binding; is a scheduler running?" in out
    assert berth("describe", "app", "nothing", "--etcd", url)[0] == 1


def test_get_watch_prints_a_row_at_each_change(
    etcd_server: EtcdServer, store: Store, propagator: Plane
) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "berth.cli.main", "get", "apps", "--watch",
                             "--etcd", etcd_server.url], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    import threading

    guard = threading.Timer(60, proc.kill)  # a watch that never prints ends the test
    guard.start()
    try:
        app(store, "watched", [config_map("watched")])
        bind(store, "watched", 1, "west")
        seen: list[list[str]] = []
        while not seen or seen[-1][:3] != ["watched", "Scheduled", "RUNNING"]:
            line = proc.stdout.readline()
            assert line, f"the watch ended: {seen}"
            if line.startswith("watched "):
                seen.append(line.split())
        assert len(seen) >= 2, seen  # a row at each change, each as it stood when read
    finally:
        guard.cancel()
        proc.terminate()
        proc.wait(15)
        proc.stdout.close()
