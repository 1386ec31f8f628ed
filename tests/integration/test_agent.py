"""`berth agent` carrying out a pull cluster's work beside a push cluster (#61): the
propagator writes the work, the agent applies it with the cluster's own credentials
and reports, and moves between the two modes are made before they are broken. On
real kube-apiservers with kwok nodes (Pods become Ready)."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from berth.store import Store, Watch, decode, keys
from berth.store.documents import ApplicationStatus, ClusterState, ClusterStatus
from berth.store.documents.work import Heartbeat, Report, Work
from berth_testkit.rbac import RBAC, cluster_admin, deployer, in_kube_system
from berth_testkit.scheduler_env import AgentProcess, PropagatorProcess, put, record_puts, wait_for
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import kube_clients, serving_all
from tests.integration.test_propagator import register
from tests.integration.test_propagator_apply import (
    AGENT,
    CONFIG,
    app,
    bind,
    config_map,
    deployment,
    present,
    register_pull,
    running,
    status,
    wipe,
)


@pytest.fixture(scope="module")
def clusters() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(KubeCluster, ("east", "west"))


@pytest.fixture
def kube(clusters: dict[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    yield from kube_clients(clusters)


@pytest.fixture
def fleet(request: pytest.FixtureRequest, etcd_server: EtcdServer, store: Store,
          tmp_path: Path, clusters: dict[str, KubeCluster]) -> Iterator[dict[str, Any]]:
    """east in push mode (the propagator dials it), west in pull mode (its agent); more
    of the agent's configuration from the test's ``agent_config`` mark."""
    for server in clusters.values():
        wipe(server)
    mark = request.node.get_closest_marker("agent_config")
    register(store, "east", clusters["east"].kubeconfig())
    register_pull(store, "west")
    prop = PropagatorProcess(etcd_server.url, tmp_path, config=CONFIG).start()
    agent = AgentProcess(etcd_server.url, tmp_path, cluster="default/west",
                         kubeconfig=clusters["west"].kubeconfig(),
                         config=AGENT + (mark.args[0] if mark else "")).start()
    yield {"propagator": prop, "agent": agent}
    if agent.proc is not None and agent.proc.poll() is None:
        agent.proc.send_signal(signal.SIGCONT)  # a test that paused it and failed
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


def first_online(store: Store, name: str) -> ClusterState:
    """The first ONLINE the cluster's status key said, from its history."""
    key = keys.status_key("Cluster", "default", name)
    kv = store.get(key)
    assert kv is not None
    watch = Watch(store, key, kv.create_revision)
    try:
        for batch in watch:
            for ev in batch.events:
                if ev.type == "PUT" and (said := decode(
                        ev.value, ClusterStatus, ev.key).status).state == "ONLINE":
                    return said
    finally:
        watch.close()
    raise AssertionError(f"{name}: never ONLINE")


def test_a_pull_cluster_runs_its_work_and_moves_go_both_ways(
    store: Store, fleet: dict[str, Any], kube: dict[str, Client]
) -> None:
    # The agent's heartbeat makes the cluster ONLINE, with what it counted of the cluster:
    # from its first ONLINE on, as the observer's probe says a push cluster is
    for name in ("west", "east"):
        wait_for(lambda n=name: cluster_state(store, n), lambda s: s == "ONLINE", timeout=30)
        assert first_online(store, name).capacity is not None, name
    beat = wait_for(lambda: store.get(keys.heartbeat_key("default/west")), lambda kv: decode(
        kv.value, Heartbeat, kv.key).status.capacity is not None, timeout=30)
    assert beat.lease != 0  # on the leader's lease
    said = decode(beat.value, Heartbeat, beat.key).status
    assert said.kubernetes.startswith("v1.") and said.version  # the cluster's; berth's
    wait_for(lambda: store.get(keys.status_key("Cluster", "default", "west")),
             lambda kv: decode(kv.value, ClusterStatus, kv.key).status.capacity is not None
             and decode(kv.value, ClusterStatus, kv.key).status.version == said.kubernetes,
             timeout=30)  # (its ClusterProfile says it: the exporter reads it from there)

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


def uids(client: Client, prefix: str) -> dict[str, str]:
    """name → uid of the ConfigMaps named ``prefix...`` in default."""
    return {cm.metadata.name: str(cm.metadata.uid) for cm in client.list(
        ConfigMap, namespace="default") if cm.metadata is not None and cm.metadata.name
        and cm.metadata.name.startswith(prefix)}


def test_an_agent_killed_and_restarted_keeps_what_runs(
    store: Store, fleet: dict[str, Any], kube: dict[str, Client]
) -> None:
    """kill -9: the cluster goes OFFLINE when its lease ends, its applications say so
    and keep running (nothing is deleted or made anew); a new agent takes up the work
    as it stands."""
    app(store, "kept", [config_map("kept-a", v="1"), deployment("kept-web", replicas=2)])
    bind(store, "kept", 1, "west")
    wait_for(lambda: status(store, "kept"), running("RUNNING", "west"), timeout=60)
    before = uids(kube["west"], "kept-")
    web = kube["west"].get(Deployment, "kept-web", namespace="default").metadata
    fleet["agent"].kill()
    wait_for(lambda: cluster_state(store, "west"), lambda s: s == "OFFLINE", timeout=30)
    gone = wait_for(lambda: status(store, "kept"), lambda s: s.status.state == "DEGRADED",
                    timeout=30)
    assert gone.status.reason.startswith("not observed: cluster default/west is OFFLINE "
                                         "(no heartbeat from its agent")
    app(store, "kept", [config_map("kept-a", v="2"), deployment("kept-web", replicas=2)],
        generation=2)  # changed while no agent ran
    bind(store, "kept", 2, "west")
    assert uids(kube["west"], "kept-") == before  # the cluster keeps what it has
    fleet["agent"].start()
    wait_for(lambda: status(store, "kept"), running("RUNNING", "west", generation=2),
             timeout=60)
    assert uids(kube["west"], "kept-") == before
    assert kube["west"].get(ConfigMap, "kept-a", namespace="default").data == {"v": "2"}
    now = kube["west"].get(Deployment, "kept-web", namespace="default").metadata
    assert web is not None and now is not None and now.uid == web.uid


def test_an_application_back_before_its_removal_was_done_runs_there_again(
    store: Store, fleet: dict[str, Any], kube: dict[str, Client]
) -> None:
    """Moved off the pull cluster and back before its agent carried out the removal (the
    robustness run, seed 14: the agent's removals held by its share while a metric sent
    the application away and back): the work saying Delete is written over with the
    copy to apply, and the application runs there again — not recorded as there while
    the agent removes it."""
    app(store, "back", [config_map("back-a", v="1")])
    bind(store, "back", 1, "west")
    wait_for(lambda: status(store, "back"), running("RUNNING", "west"), timeout=60)
    agent = fleet["agent"].proc
    assert agent is not None
    agent.send_signal(signal.SIGSTOP)  # the removal waits
    try:
        bind(store, "back", 1, "east")
        wait_for(lambda: store.get(keys.work_key("default/west", "default", "back")),
                 lambda kv: decode(kv.value, Work, kv.key).spec.intent == "Delete",
                 timeout=30)
        bind(store, "back", 1, "west")
        time.sleep(1)
    finally:
        agent.send_signal(signal.SIGCONT)
    wait_for(lambda: status(store, "back"), running("RUNNING", "west"), timeout=30)
    wait_for(lambda: present(kube["west"], ConfigMap, "back-a") or None, timeout=30)
    wait_for(lambda: not present(kube["east"], ConfigMap, "back-a") or None, timeout=30)
    time.sleep(2)
    assert present(kube["west"], ConfigMap, "back-a")
    st = status(store, "back")
    assert st is not None and running("RUNNING", "west")(st)


@pytest.mark.agent_config("delete_least: 2\ndelete_share: 0.25\ndelete_window: 5\n")
def test_an_agent_cut_off_comes_back_and_removes_a_bounded_share_at_once(
    etcd_server: EtcdServer, store: Store, fleet: dict[str, Any], kube: dict[str, Client]
) -> None:
    """The agent paused (SIGSTOP) past its lease: west goes OFFLINE, five of its six
    applications move to east (made there, their old copies marked Delete, not deleted:
    west keeps serving what it has), etcd compacts while it is away. Back (SIGCONT), it
    lists the works as they are and removes the five — at most two in any five seconds,
    holding the rest and saying so — and keeps the sixth, changed meanwhile."""
    names = [f"mv{i}" for i in range(5)]
    for name in [*names, "stay"]:
        app(store, name, [config_map(f"{name}-cm", v="1")])
        bind(store, name, 1, "west")
    for name in [*names, "stay"]:
        wait_for(lambda n=name: status(store, n), running("RUNNING", "west"), timeout=60)
    before = uids(kube["west"], "")
    agent = fleet["agent"]
    assert agent.proc is not None
    agent.proc.send_signal(signal.SIGSTOP)
    wait_for(lambda: cluster_state(store, "west"), lambda s: s == "OFFLINE", timeout=30)
    for name in names:
        bind(store, name, 1, "east")
    app(store, "stay", [config_map("stay-cm", v="2")], generation=2)
    bind(store, "stay", 2, "west")
    for name in names:  # running on east; west's copy is marked for deletion, kept
        wait_for(lambda n=name: status(store, n), lambda s: s.status.state == "MIGRATING"
                 and "waiting for the agent of cluster default/west to remove it"
                 in s.status.reason, timeout=60)
        assert present(kube["east"], ConfigMap, f"{name}-cm")
    assert uids(kube["west"], "") == before  # nothing deleted while it was away
    store.compact(store.revision())  # the agent's watches cannot resume from before

    gone: dict[str, float] = {}
    stop = threading.Event()

    def sample() -> None:
        while True:
            there = uids(kube["west"], "mv")
            for name in names:
                if f"{name}-cm" not in there and name not in gone:
                    gone[name] = time.monotonic()
            if stop.is_set():
                return  # one look after the last status: its copy was removed before
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        agent.proc.send_signal(signal.SIGCONT)
        held = wait_for(lambda: store.get(keys.status_key("Cluster", "default", "west")),
                        lambda kv: "held: 2 applications removed in the last 5 s" in decode(
                            kv.value, ClusterStatus, kv.key).status.held, timeout=30)
        assert held is not None
        for name in names:
            wait_for(lambda n=name: status(store, n), running("RUNNING", "east"), timeout=60)
    finally:
        stop.set()
        sampler.join()
    times = sorted(gone.values())
    assert len(times) == 5, gone
    for i, t in enumerate(times):  # at most two removals begin within any 5 s
        assert len([u for u in times[i:] if u - t < 4.5]) <= 2, times
    # the sixth stays where it was, at its new generation; nothing else was made anew
    wait_for(lambda: status(store, "stay"), running("RUNNING", "west", generation=2),
             timeout=30)
    assert uids(kube["west"], "stay") == {"stay-cm": before["stay-cm"]}
    assert kube["west"].get(ConfigMap, "stay-cm", namespace="default").data == {"v": "2"}
    out = agent.output()
    assert "removals held: 2 applications removed in the last 5 s" in out
    events = store.list_prefix(keys.ROOT + "events/clusters/default/west/")[0]
    assert any(b"RemovalsHeld" in kv.value for kv in events)


def test_a_pull_clusters_copy_is_held_removed_and_barred_as_its_policy_says(
    store: Store, fleet: dict[str, Any], kube: dict[str, Client],
    clusters: dict[str, KubeCluster]
) -> None:
    """docs/teams.md in pull mode: team p's application on west (of namespace default,
    in a set its policy binds). A kind its policy does not allow: nothing is sent to the
    agent, the status says why; allowed, it runs there; forbidden again, the agent removes
    the copy that ran; applied as the identity the policy names, what west's RBAC
    forbids it (a ClusterRoleBinding, a ConfigMap in kube-system) is refused there and
    said, the rest applied; the set unbound, west is barred: the copy goes though the
    Binding (not the scheduler's here) still names west. (Push mode:
    test_placement_capacity.)"""
    team, web = "team-p", keys.resource_key("Application", "web", "team-p")
    wait_for(lambda: cluster_state(store, "west"), lambda s: s == "ONLINE", timeout=30)
    put(store, keys.resource_key("ClusterSet", "pull-set"), msgspec.json.encode({
        "api": "core", "kind": "ClusterSet", "metadata": {"name": "pull-set"},
        "spec": {"namespaces": ["default"], "clusters": {"names": ["west"]}}}))

    def policy(*sets: str, kinds: list[str] | None, **more: Any) -> None:
        put(store, keys.resource_key("NamespacePolicy", team), msgspec.json.encode({
            "api": "core", "kind": "NamespacePolicy", "metadata": {"name": team},
            "spec": {"clusterSets": list(sets), "kinds": kinds, **more}}))

    def said() -> ApplicationStatus | None:
        kv = store.get(keys.status_key("Application", team, "web"))
        return decode(kv.value, ApplicationStatus, kv.key) if kv else None

    def on_west() -> bool:
        return present(kube["west"], Deployment, "web")

    def placed(generation: int, manifest: list[dict[str, Any]]) -> None:
        """web at ``generation``, bound to west (as the scheduler would)."""
        put(store, web, msgspec.json.encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": "web", "namespace": team, "generation": generation},
            "spec": {"manifest": manifest}}))
        put(store, keys.binding_key("Application", team, "web"), msgspec.json.encode({
            "api": "scheduling", "kind": "Binding",
            "metadata": {"name": "web", "namespace": team},
            "spec": {"resource": {"kind": "Application", "name": "web", "namespace": team},
                     "generation": generation, "targets": [
                         {"kind": "Cluster", "name": "west", "namespace": "default"}]},
            "status": {"state": "Scheduled"}}))

    policy("pull-set", kinds=["apps/Deployment"])
    manifest = [deployment("web"), config_map("web-conf", a="1")]
    placed(1, manifest)
    st = wait_for(said, lambda s: s.status.state == "FAILED", timeout=30)
    assert "not allowed by the policy of namespace team-p: ConfigMap web-conf" in (
        st.status.reason), st.status.reason
    assert store.get(keys.work_key("default/west", team, "web")) is None and not on_west()

    policy("pull-set", kinds=["apps/Deployment", "ConfigMap"])
    wait_for(said, lambda s: s.status.state == "RUNNING", timeout=60)
    assert on_west() and present(kube["west"], ConfigMap, "web-conf")

    policy("pull-set", kinds=["apps/Deployment"])  # what runs is forbidden now: it goes
    wait_for(lambda: not on_west() or None, timeout=30)
    assert not present(kube["west"], ConfigMap, "web-conf")
    st = wait_for(said, lambda s: "not allowed" in s.status.reason, timeout=30)
    assert "default/west" not in st.status.applied

    policy("pull-set", kinds=["apps/Deployment", "ConfigMap"])
    wait_for(lambda: on_west() or None, timeout=60)

    # as west's deployer, which may manage Deployments and ConfigMaps of namespace
    # default alone (the agent's credential impersonates it)
    west = clusters["west"]
    policy("pull-set", kinds=None, identity=deployer(west))
    grab, system = cluster_admin("team-p-admin", "team-p"), in_kube_system("team-p-system")
    manifest = [deployment("web"), config_map("web-conf", a="2"), grab, system]
    placed(2, manifest)
    st = wait_for(said, lambda s: "forbidden to" in s.status.reason, timeout=60)
    assert ("forbidden to ServiceAccount default/deployer by cluster default/west's RBAC"
            in st.status.reason), st.status.reason
    assert "ClusterRoleBinding team-p-admin" in st.status.reason
    assert "ConfigMap kube-system/team-p-system" in st.status.reason
    wait_for(said, lambda s: s.status.applied["default/west"].identity == (
        "system:serviceaccount:default:deployer"), timeout=30)  # as the agent reported it
    conf = wait_for(lambda: west.request("GET", "/api/v1/namespaces/default/configmaps/web-conf"),
                    lambda c: c.get("data") == {"a": "2"}, timeout=30)
    assert conf["metadata"]["annotations"]["berth.dev/generation"] == "2" and on_west()
    assert west.request("GET", "/api/v1/namespaces/kube-system/configmaps/team-p-system",
                        ok=(404,)) == {}
    assert west.request("GET", f"{RBAC}/clusterrolebindings/team-p-admin", ok=(404,)) == {}

    policy(kinds=None, identity={"serviceAccount": "default/deployer"})  # west barred
    wait_for(lambda: not on_west() or None, timeout=30)
    assert not present(kube["west"], ConfigMap, "web-conf")

    put(store, web, msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": "web", "namespace": team, "generation": 2,
                     "deleted": "2026-12-03T00:00:00Z"}, "spec": {"manifest": manifest}}))
    wait_for(lambda: store.get(web) is None or None, timeout=60)
    for key in (keys.resource_key("NamespacePolicy", team),
                keys.resource_key("ClusterSet", "pull-set"),
                keys.binding_key("Application", team, "web")):
        store.delete(key)


def test_a_credential_is_kept_in_a_secret_of_the_agents_own_cluster(
    clusters: dict[str, KubeCluster]
) -> None:
    """In a Pod, the agent's files do not outlive it: its credential (and a renewed one)
    is kept in a Secret of its cluster, read and written with its own credentials."""
    from berth.controllers.propagator.agent.join import Credentials, SecretKeeper

    west = clusters["west"]
    keeper = SecretKeeper(west.kubeconfig(), "default", "berth-agent-test")
    with pytest.raises(ValueError, match="Secret default/berth-agent-test: not read"):
        keeper.load()
    made = Credentials("edge/site-1", "https://etcd:2379", "berth-agent.edge.site-1", "pw-1",
                       "uid-1", "/etc/berth/ca.crt")
    keeper.save(made)
    assert keeper.load() == made
    keeper.save(dataclasses.replace(made, password="pw-2"))  # a renewal overwrites it
    assert keeper.load().password == "pw-2"
    stored = west.request("GET", "/api/v1/namespaces/default/secrets/berth-agent-test")
    assert set(stored["data"]) == {"credentials.json"}
    west.request("DELETE", "/api/v1/namespaces/default/secrets/berth-agent-test")
