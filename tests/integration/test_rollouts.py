"""Rollouts on working clusters (docs/rollouts.md): a new generation reaches the
clusters as ``spec.rollout`` says, gated by its own health.

Five kwok clusters run Pods that become Ready two seconds after they are
scheduled; a Pod annotated ``kwok.berth.dev/crash-on-<cluster>`` never does on
that cluster, so a generation can fail on one cluster alone. Applications are
written as ``berth apply`` writes them (their history with them); the real
scheduler, metrics-cache and propagator roll them out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berth.bootstrap import plan, write
from berth.bootstrap.history import stored
from berth.bootstrap.load import to_document
from berth.cli.main import main
from berth.store import Store, decode, encode, keys
from berth.store.documents import ApplicationStatus
from berth.store.documents.rollouts import HALTED, ROLLED_BACK
from berth_testkit.scheduler_env import (
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    agents_for,
    put,
    reached,
    started,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import CRASH_ON, KubeCluster
from berth_testkit.servers.serving import serving_all

NAMES = ("r1", "r2", "r3", "r4", "r5")
DEADLINE = 8.0  # progressDeadline of the failing rollouts
PROBE = 0.5  # the propagator's probe interval


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(lambda name: KubeCluster(f"roll-{name}", ready_delay=2.0,
                                                    nodes=1), NAMES)


@pytest.fixture(params=["Push", "Pull"])  # every promise holds in both modes (#61)
def berth(request: pytest.FixtureRequest, etcd_server: EtcdServer, store: Store,
          tmp_path: Path, clusters: dict[str, KubeCluster]) -> Iterator[list[Any]]:
    for name, kube in clusters.items():
        kube.request("DELETE", "/apis/apps/v1/namespaces/default/deployments?"
                     "propagationPolicy=Background", ok=(200, 404))
        put(store, keys.resource_key("Cluster", name, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default", "labels": {"zone": "roll"}},
            "spec": {**reached(request.param, kube.kubeconfig()), "metrics": []}}))
    procs = [
        MetricsCacheProcess(etcd_server.url, tmp_path, config="poll_interval: 0.5\n"),
        SchedulerProcess(etcd_server.url, tmp_path, config="reschedule_after: 2\n"),
        PropagatorProcess(etcd_server.url, tmp_path, config=(
            f"probe_interval: {PROBE}\nretry_base_delay: 0.2\nretry_max_delay: 1\n"
            "move_timeout: 60\n")),
    ]
    procs += agents_for(request.param, etcd_server.url, tmp_path,
                        {name: kube.kubeconfig() for name, kube in clusters.items()})
    with started(procs, store, NAMES):
        yield procs


def deployment(name: str, tag: int, *, crash_on: str = "") -> dict[str, Any]:
    template: dict[str, Any] = {"labels": {"app": name}}
    if crash_on:
        template["annotations"] = {f"{CRASH_ON}roll-{crash_on}": "yes"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": template, "spec": {"containers": [
                         {"name": "c", "image": f"example/app:{tag}",
                          "resources": {"requests": {"cpu": "10m"}}}]}}}}


def apply(store: Store, name: str, manifest: list[dict[str, Any]], on: list[str],
          rollout: dict[str, Any]) -> None:
    """Write the application as ``berth apply`` does (its history with it)."""
    doc = {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"manifest": manifest, "rollout": rollout,
                    "placement": {"policy": "PickFixed", "clusterNames": on}}}
    write(store, plan(store, [to_document(f"application {name}", doc)], force=True))


def status(store: Store, name: str) -> ApplicationStatus | None:
    kv = store.get(keys.status_key("Application", "default", name))
    return decode(kv.value, ApplicationStatus, kv.key) if kv else None


def running(gen: int, *on: str) -> Any:
    def check(s: ApplicationStatus) -> bool:
        return (s.status.state == "RUNNING" and s.status.generation == gen
                and sorted(r.name for r in s.status.running_on) == sorted(on))
    return check


def on_cluster(kube: KubeCluster, name: str) -> dict[str, Any] | None:
    """The Deployment as the cluster has it (None: absent)."""
    got = kube.request("GET", f"/apis/apps/v1/namespaces/default/deployments/{name}",
                       ok=(200, 404))
    return got if isinstance(got, dict) and got.get("kind") == "Deployment" else None


def generation(d: dict[str, Any] | None) -> int:
    """The application's generation the Deployment was applied for (0: absent)."""
    if d is None:
        return 0
    return int(d["metadata"].get("annotations", {}).get("berth.dev/generation", 0))


def ready(d: dict[str, Any] | None) -> bool:
    """Healthy as ``kubectl rollout status`` judges a Deployment: its controller saw this
    spec, every replica is updated, no old one is left, and the updated ones are
    available."""
    if d is None:
        return False
    st, want = d.get("status", {}), d["spec"]["replicas"]
    updated = st.get("updatedReplicas", 0)
    return (st.get("observedGeneration") == d["metadata"]["generation"]
            and updated >= want and st.get("replicas", 0) <= updated
            and st.get("availableReplicas", 0) >= updated)


class Watcher:
    """Reads the application's Deployment on each cluster every 100 ms: the generation
    it carries and whether it is ready, for the whole test. ``on`` is in the rollout's
    order."""

    def __init__(self, clusters: dict[str, KubeCluster], app: str, on: list[str]) -> None:
        self.clusters, self.app, self.on = clusters, app, on
        self.samples: list[dict[str, tuple[int, bool]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = {}
            # in the reverse of the rollout's order: a cluster seen started now was started
            # before the ones before it are read (else a cluster read unready just before
            # it became ready, and the next one started meanwhile, would look like two)
            for c in reversed(self.on):
                d = on_cluster(self.clusters[c], self.app)
                sample[c] = (generation(d), ready(d))
            self.samples.append(sample)
            self._stop.wait(0.1)

    def most_unready_on(self, gen: int) -> int:
        most = max((sum(1 for g, ok in s.values() if g == gen and not ok)
                    for s in self.samples), default=0)
        if most > 1:  # what it saw, to tell why
            print([s for s in self.samples if sum(1 for g, ok in s.values()
                                                  if g == gen and not ok) > 1][:3])
        return most

    def ever(self, cluster: str, gen: int) -> bool:
        return any(s[cluster][0] == gen for s in self.samples)


def test_a_staged_rollout_halts_by_its_deadline_then_rolls_back_on_its_own(
    store: Store, berth: list[Any], clusters: dict[str, KubeCluster], etcd_server: EtcdServer
) -> None:
    on = ["r1", "r2", "r3"]
    stages = [{"name": n, "clusters": {"names": [c]}} for n, c in
              (("first", "r1"), ("second", "r2"), ("third", "r3"))]
    policy = {"strategy": "Staged", "stages": stages, "progressDeadline": f"{DEADLINE:g}s"}
    apply(store, "staged", [deployment("staged", 1)], on, policy)
    wait_for(lambda: status(store, "staged"), running(1, *on), timeout=90)
    # generation 2 never becomes Ready on r2: r1 gets it, r2 fails, r3 is never reached
    with Watcher(clusters, "staged", on) as watcher:
        apply(store, "staged", [deployment("staged", 2, crash_on="r2")], on, policy)
        seen_halted = 0.0

        def halted(s: ApplicationStatus) -> bool:
            nonlocal seen_halted
            r = s.status.rollout
            if r is not None and r.generation == 2 and r.phase == HALTED and not seen_halted:
                seen_halted = time.time()
            return bool(seen_halted)
        st = wait_for(lambda: status(store, "staged"), halted, timeout=90)
        time.sleep(3)  # it stays halted: nothing more starts
    assert st.status.state == "DEGRADED", st.status
    assert "rollout of generation 2 halted" in st.status.reason
    assert "cluster default/r2" in st.status.reason and "CrashLoopBackOff" in st.status.reason
    since = st.status.applied["default/r2"].since
    assert since is not None
    late = seen_halted - (since.timestamp() + DEADLINE)
    print(f"halted {late:.2f} s after r2's deadline (probe interval {PROBE} s)")
    assert -0.5 < late < PROBE + 1.5  # by the deadline, within a probe and the polling
    assert generation(on_cluster(clusters["r1"], "staged")) == 2
    assert not watcher.ever("r3", 2), "the third stage got the generation that failed"
    assert generation(on_cluster(clusters["r3"], "staged")) == 1
    # generation 3 fails the same way, with onFailure: Rollback: r1 gets generation 1's
    # manifest back, with no one acting
    policy = {**policy, "onFailure": "Rollback"}
    with Watcher(clusters, "staged", on) as watcher:
        apply(store, "staged", [deployment("staged", 3, crash_on="r2")], on, policy)
        st = wait_for(lambda: status(store, "staged"),
                      lambda s: s.status.rollout is not None and s.status.rollout.generation
                      == 3 and s.status.rollout.phase == ROLLED_BACK
                      and all(a.generation == 1 and a.health == "Healthy"
                              for a in s.status.applied.values()), timeout=120)
    assert watcher.ever("r1", 3) and not watcher.ever("r3", 3)
    assert st.status.state == "DEGRADED"
    assert st.status.reason.startswith("generation 3 rolled back to 1")
    for c in on:
        d = on_cluster(clusters[c], "staged")
        assert generation(d) == 1 and ready(d), c
        assert d is not None and d["spec"]["template"]["spec"]["containers"][0]["image"] == (
            "example/app:1")
    code = main(["rollout", "status", "default/staged", "--etcd", etcd_server.url])
    assert code == 1  # rolled back: not complete


def test_a_rolling_update_keeps_one_cluster_at_most_unready_on_the_new_generation(
    store: Store, berth: list[Any], clusters: dict[str, KubeCluster], etcd_server: EtcdServer,
    capsys: pytest.CaptureFixture[str]
) -> None:
    on = list(NAMES)
    policy = {"strategy": "Rolling", "maxUnavailable": 1}
    apply(store, "rolled", [deployment("rolled", 1)], on, policy)
    wait_for(lambda: status(store, "rolled"), running(1, *on), timeout=90)
    with Watcher(clusters, "rolled", on) as watcher:
        apply(store, "rolled", [deployment("rolled", 2)], on, policy)
        wait_for(lambda: status(store, "rolled"), running(2, *on), timeout=120)
    print(f"{len(watcher.samples)} samples; at most {watcher.most_unready_on(2)} cluster "
          "unready on generation 2 at once")
    assert watcher.most_unready_on(2) == 1  # one at a time, and the sampler saw it
    # undo writes generation 1's manifest as generation 3; it rolls the same way
    assert main(["rollout", "undo", "default/rolled", "--to-generation", "9",
                 "--etcd", etcd_server.url]) == 1
    assert "generation 9 of application default/rolled is not kept (kept: 1, 2)" in (
        capsys.readouterr().err)
    with Watcher(clusters, "rolled", on) as watcher:
        assert main(["rollout", "undo", "default/rolled", "--etcd", etcd_server.url]) == 0
        wait_for(lambda: status(store, "rolled"), running(3, *on), timeout=120)
    assert watcher.most_unready_on(3) == 1
    assert all(on_cluster(clusters[c], "rolled")["spec"]["template"]["spec"]["containers"][0][
        "image"] == "example/app:1" for c in on)  # type: ignore[index]
    history = stored(store, "default", "rolled")
    assert history is not None and [r.generation for r in history.revisions] == [1, 2, 3]
    assert main(["rollout", "history", "default/rolled", "--etcd", etcd_server.url]) == 0
    assert "3 (current)" in capsys.readouterr().out


def test_an_approval_gate_holds_until_approved(
    store: Store, berth: list[Any], clusters: dict[str, KubeCluster], etcd_server: EtcdServer,
    capsys: pytest.CaptureFixture[str]
) -> None:
    on = ["r4", "r5"]
    policy = {"strategy": "Staged", "stages": [
        {"name": "canary", "clusters": {"names": ["r4"]}},
        {"name": "prod", "clusters": {"names": ["r5"]}, "approval": True}]}
    apply(store, "gated", [deployment("gated", 1)], on, policy)
    wait_for(lambda: status(store, "gated"), running(1, *on), timeout=90)
    apply(store, "gated", [deployment("gated", 2)], on, policy)
    st = wait_for(lambda: status(store, "gated"),
                  lambda s: s.status.rollout is not None and "waits for approval" in
                  s.status.rollout.reason, timeout=60)
    assert st.status.state == "PROGRESSING"
    time.sleep(3)  # it holds
    assert generation(on_cluster(clusters["r5"], "gated")) == 1
    assert generation(on_cluster(clusters["r4"], "gated")) == 2
    # a stage that is not waiting is refused, and says what the rollout waits for
    assert main(["rollout", "approve", "default/gated", "canary", "--etcd", etcd_server.url]) == 1
    assert "stage 'canary' is not waiting for approval" in capsys.readouterr().err
    assert main(["rollout", "approve", "default/gated", "prod", "--etcd", etcd_server.url]) == 0
    wait_for(lambda: status(store, "gated"), running(2, *on), timeout=60)
    assert generation(on_cluster(clusters["r5"], "gated")) == 2
    assert main(["rollout", "status", "default/gated", "--etcd", etcd_server.url]) == 0
    assert "rollout Complete" in capsys.readouterr().out


def test_clusters_that_join_or_leave_mid_rollout_take_their_stages_generation(
    store: Store, berth: list[Any], clusters: dict[str, KubeCluster], etcd_server: EtcdServer
) -> None:
    """The application runs on every cluster labelled ``group: f`` (PickAll). While its
    second stage waits for approval, the fleet changes under it: a cluster joins the
    started first stage (it gets the new generation), one joins the waiting second
    stage (it gets the generation rolled from, out of the history), one leaves (its copy
    goes, nothing waits for it). The rollout does not fail, and completes when
    approved. A cluster that joins after the next generation halted gets the last
    generation healthy everywhere (docs/rollouts.md, a fleet that changes)."""
    def label(name: str, **labels: str) -> None:
        put(store, keys.resource_key("Cluster", name, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"zone": "roll", **labels}},
            "spec": {"kubeconfig": clusters[name].kubeconfig(), "metrics": []}}))

    label("r1", group="f", canary="yes")
    label("r2", group="f")
    label("r3", group="f")
    label("r4", canary="yes")  # not chosen by the placement: a canary elsewhere
    policy = {"strategy": "Staged", "stages": [
        {"name": "canary", "clusters": {"matchLabels": {"canary": "yes"}}},
        {"name": "main", "clusters": {"matchExpressions": [
            {"key": "canary", "operator": "DoesNotExist"}]}, "approval": True}]}
    doc = {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": "grown", "namespace": "default"},
           "spec": {"manifest": [deployment("grown", 1)], "rollout": policy,
                    "clusterSelector": {"group": "f"}, "placement": {"policy": "PickAll"}}}
    write(store, plan(store, [to_document("application grown", doc)], force=True))
    wait_for(lambda: status(store, "grown"), running(1, "r1", "r2", "r3"), timeout=90)
    doc["spec"]["manifest"] = [deployment("grown", 2)]  # type: ignore[index]
    write(store, plan(store, [to_document("application grown", doc)], force=True))
    wait_for(lambda: status(store, "grown"),
             lambda s: s.status.rollout is not None and "waits for approval" in
             s.status.rollout.reason, timeout=60)
    assert generation(on_cluster(clusters["r1"], "grown")) == 2
    with Watcher(clusters, "grown", ["r4", "r5"]) as watcher:
        label("r5", group="f", canary="yes")  # joins the started stage
        label("r4", group="f")  # joins the waiting stage, a canary no more
        label("r3")  # leaves
        st = wait_for(lambda: status(store, "grown"), lambda s: {
            c: (a.generation, a.health) for c, a in s.status.applied.items()} == {
            "default/r1": (2, "Healthy"), "default/r2": (1, "Healthy"),
            "default/r4": (1, "Healthy"), "default/r5": (2, "Healthy")}, timeout=90)
    # each took its stage's generation first: by its labels as the scheduler saw them
    assert not watcher.ever("r5", 1) and not watcher.ever("r4", 2)
    assert st.status.state == "PROGRESSING", st.status
    assert st.status.rollout is not None and "waits for approval" in st.status.rollout.reason
    wait_for(lambda: on_cluster(clusters["r3"], "grown") is None or None, timeout=60)
    image = {c: on_cluster(clusters[c], "grown")["spec"]["template"]["spec"][  # type: ignore[index]
        "containers"][0]["image"] for c in ("r4", "r5")}
    assert image == {"r4": "example/app:1", "r5": "example/app:2"}, image
    assert main(["rollout", "approve", "default/grown", "main", "--etcd", etcd_server.url]) == 0
    wait_for(lambda: status(store, "grown"), running(2, "r1", "r2", "r4", "r5"), timeout=90)
    for c in ("r1", "r2", "r4", "r5"):
        assert ready(on_cluster(clusters[c], "grown")), c
    # generation 3 halts on r2; a cluster that joins then gets generation 2, the last
    # one healthy everywhere, and the rollout stays halted
    doc["spec"]["manifest"] = [deployment("grown", 3, crash_on="r2")]  # type: ignore[index]
    doc["spec"]["rollout"] = {**policy, "progressDeadline": f"{DEADLINE:g}s"}  # type: ignore[index]
    del doc["spec"]["rollout"]["stages"][1]["approval"]  # type: ignore[index]
    write(store, plan(store, [to_document("application grown", doc)], force=True))
    wait_for(lambda: status(store, "grown"), lambda s: s.status.rollout is not None
             and s.status.rollout.generation == 3 and s.status.rollout.phase == HALTED,
             timeout=90)
    with Watcher(clusters, "grown", ["r3"]) as watcher:
        label("r3", group="f")
        st = wait_for(lambda: status(store, "grown"), lambda s: (
            a := s.status.applied.get("default/r3")) is not None and a.generation == 2
            and a.health == "Healthy", timeout=60)
    assert not watcher.ever("r3", 3)
    assert st.status.rollout is not None and st.status.rollout.phase == HALTED
    assert generation(on_cluster(clusters["r1"], "grown")) == 3


def test_a_history_that_does_not_decode_is_said_once_per_value(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage written by hand at a history key: nothing is kept for it (no rollback to
    it), and it is said once, not at every reconcile that asks; a new value there is
    said again."""
    from berth.controllers.propagator.manifests import Manifests

    key = keys.history_key("default", "junk")
    put(store, key, b"\xff not a history")
    manifests = Manifests(store)
    with caplog.at_level("WARNING", logger="berth.controllers.propagator.rollout"):
        assert [manifests.of("default", "junk", 1) for _ in range(3)] == [None] * 3
        assert sum(key in r.getMessage() for r in caplog.records) == 1
        put(store, key, b"[]")
        assert manifests.of("default", "junk", 1) is None
        assert sum(key in r.getMessage() for r in caplog.records) == 2
