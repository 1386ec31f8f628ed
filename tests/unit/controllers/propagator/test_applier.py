"""The Applier over etcd in memory, in-memory clusters and a clock the test moves: one
reconcile at a time, called by the test, no server and no sleep.

(The same promises against a real etcd and real Kubernetes control planes are in
tests/integration/test_propagator*.py and test_available.py.)"""

from __future__ import annotations

from typing import Any

import msgspec

from berth.controllers.propagator.applier import Applier
from berth.controllers.propagator.config import PropagatorConfig
from berth.controllers.propagator.credentials import Kubeconfigs
from berth.controllers.propagator.kube import OWNER, Connection, Connections, KubeObject, ObjectMeta
from berth.controllers.propagator.views import ClusterView
from berth.controllers.runtime import Informer
from berth.store import decode, keys
from berth.store.documents import (
    ApplicationStatus,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingStatus,
    ClusterStatus,
    KubeObjectRef,
    ObjectRef,
    Target,
)
from berth_testkit.fakes.propagator import FakeCluster, Journal
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import application, cluster, put, set_state


class MemoryConnections(Connections):
    """Every cluster key reaches its in-memory cluster (made when first asked for)."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(timeout=5.0)
        self.journal = journal
        self.clusters: dict[str, FakeCluster] = {}

    def get(self, key: str, kubeconfig: dict[str, Any]) -> Connection:
        name = key.rsplit("/", 1)[-1]
        found = self.clusters.setdefault(name, FakeCluster(name, self.journal))
        return found  # type: ignore[return-value]  # a ClusterClient, as a Connection is


def bind(store: MemoryStore, app: str, *clusters: str, generation: int = 1) -> None:
    """The Binding the scheduler would write."""
    put(store, keys.binding_key("Application", "default", app), Binding(
        BindingMeta(name=app, namespace="default"),
        BindingSpec(ObjectRef("Application", app, "default"), generation,
                    [Target("Cluster", c, "default") for c in clusters]),
        BindingStatus(state="Scheduled")))


def status(store: MemoryStore, app: str) -> ApplicationStatus:
    kv = store.get(keys.status_key("Application", "default", app))
    assert kv is not None
    return decode(kv.value, ApplicationStatus, kv.key)


class World:
    def __init__(self) -> None:
        self.store, self.clock, self.journal = MemoryStore(), FakeClock(), []
        self.connections = MemoryConnections(self.journal)
        self.clusters: Informer[ClusterView] = Informer(
            self.store, keys.resource_prefix("Cluster"), ClusterView)
        self.statuses: Informer[ClusterStatus] = Informer(
            self.store, keys.status_prefix("Cluster"), ClusterStatus)
        self.kubeconfigs = Kubeconfigs(self.store, idle_timeout=30.0)
        self.applier = Applier(self.store, PropagatorConfig(), clusters=self.clusters,
                               cluster_statuses=self.statuses, connections=self.connections,
                               kubeconfigs=self.kubeconfigs, clock=self.clock)

    def restarted(self) -> Applier:
        """An applier as a new process makes it, on the same etcd and clusters: nothing
        in memory but what it reads."""
        applier = Applier(self.store, PropagatorConfig(), clusters=self.clusters,
                          cluster_statuses=self.statuses, connections=self.connections,
                          kubeconfigs=self.kubeconfigs, clock=self.clock)
        for inf in applier.informers:
            inf.sync()
        return applier

    def reconcile(self, app: str) -> None:
        """Read etcd as the informers would now, then reconcile ``app`` once."""
        for inf in (self.clusters, self.statuses, self.kubeconfigs.informer,
                    *self.applier.informers):
            inf.sync()
        self.applier.reconcile(keys.resource_key("Application", app, "default"))


def web_on_de() -> World:
    """Clusters de and fr; application web applied on de."""
    w = World()
    cluster(w.store, "de")
    cluster(w.store, "fr")
    application(w.store, "web")
    bind(w.store, "web", "de")
    w.reconcile("web")
    return w


def test_an_application_is_applied_where_its_binding_says_and_moved_without_downtime() -> None:
    w = web_on_de()
    de = w.connections.clusters["de"]
    assert [r.name for r in de.objects] == ["web"]
    st = status(w.store, "web")
    assert set(st.status.applied) == {"default/de"}

    bind(w.store, "web", "fr")  # moved: applied on fr first, removed from de after
    w.reconcile("web")
    fr = w.connections.clusters["fr"]
    assert [r.name for r in fr.objects] == ["web"]
    w.reconcile("web")
    assert ("apply", "fr", "web") in w.journal
    assert w.journal.index(("apply", "fr", "web")) < w.journal.index(("delete", "de", "web"))
    assert not de.objects
    assert set(status(w.store, "web").status.applied) == {"default/fr"}


def test_a_copy_not_available_in_time_is_degraded_once_the_clock_passes_its_timeout() -> None:
    """The in-memory cluster reports a Deployment with no status: never available."""
    w = World()
    cluster(w.store, "de")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 1}}
    application(w.store, "web", manifest=[deployment])
    bind(w.store, "web", "de")
    w.reconcile("web")
    w.reconcile("web")
    st = status(w.store, "web").status
    assert st.state == "PROGRESSING" and st.applied["default/de"].since == w.clock.now()
    w.clock.advance(PropagatorConfig().move_timeout - 1)
    w.reconcile("web")
    assert status(w.store, "web").status.state == "PROGRESSING"
    w.clock.advance(2)
    w.reconcile("web")
    st = status(w.store, "web").status
    assert st.state == "DEGRADED"
    assert "(not available 600 s after it was applied)" in st.reason


def test_what_is_applied_names_the_decision_and_health_changes_are_in_the_ledger() -> None:
    from berth.store import ledger

    w = World()
    cluster(w.store, "de")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 1}}
    application(w.store, "web", manifest=[deployment])
    put(w.store, keys.binding_key("Application", "default", "web"), Binding(
        BindingMeta(name="web", namespace="default"),
        BindingSpec(ObjectRef("Application", "web", "default"), 1,
                    [Target("Cluster", "de", "default")], decision="20261128T010000.000000Z"),
        BindingStatus(state="Scheduled")))
    w.reconcile("web")
    w.reconcile("web")
    [body] = w.connections.clusters["de"].objects.values()
    assert body["metadata"]["annotations"]["berth.dev/decision"] == "20261128T010000.000000Z"
    assert body["metadata"]["annotations"]["berth.dev/application"] == "default/web"
    w.clock.advance(PropagatorConfig().move_timeout + 1)
    w.reconcile("web")
    found, problems = ledger.history(w.store, "Application", "default", "web")
    assert problems == []
    changes = [(c.what, c.cluster, c.was, c.now) for _, r in found for c in r.changes]
    assert changes == [("state", "", "", "PENDING"), ("state", "", "PENDING", "PROGRESSING"),
                       ("health", "default/de", "", "Progressing"),
                       ("state", "", "PROGRESSING", "DEGRADED")], changes
    assert all(e.by == "propagator" for e, _ in found)
    assert found[-1][1].time == w.clock.now() and found[-1][1].state == "DEGRADED"
    # ... and said as events: the degradation a Warning (the recorder writes them)
    from berth.store.events import listed

    assert w.applier.events is not None
    w.applier.events.flush(force=True)
    said = {(e.type, e.reason) for _, e in listed(w.store)[0]}
    assert ("Warning", "Degraded") in said and ("Normal", "Progressing") in said, said


def test_a_copy_the_cluster_shows_available_is_judged_ahead_of_waiting_applies() -> None:
    """The drift watch shows the Deployment available: its application goes to the queue's
    urgent line (what the judge worker takes); news that turns nothing, and Pods, wait
    in the ordinary line."""
    w = World()
    cluster(w.store, "de")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 2}}
    application(w.store, "web", manifest=[deployment])
    bind(w.store, "web", "de")
    w.reconcile("web")
    w.reconcile("web")
    assert status(w.store, "web").status.state == "PROGRESSING"
    for inf in w.applier.informers:
        inf.sync()
    key = keys.resource_key("Application", "web", "default")
    queue = w.applier.queue
    while (queued := queue.get(0)) is not None:  # what the reconciles queued
        queue.done(queued)
    stored = w.connections.clusters["de"].get(next(iter(w.connections.clusters["de"].objects)))
    assert stored is not None

    def shown(available: int) -> KubeObject:
        """The Deployment's status as its controller writes it (the in-memory cluster
        keeps no generation nor versions: the same, so that it is no one's change)."""
        return KubeObject(stored.apiVersion, stored.kind, stored.metadata,
                          msgspec.Raw(b'{"replicas": 2}'), msgspec.Raw(msgspec.json.encode({
                              "replicas": 2, "updatedReplicas": 2, "readyReplicas": available,
                              "availableReplicas": available})))

    w.applier.on_drift(("default/de",), "MODIFIED", shown(1))  # one of two: still progressing
    assert queue.get(0, urgent_only=True) is None
    assert queue.get(0) == key
    queue.done(key)
    w.applier.on_pods("default/web")  # a Pod Ready: in turn
    assert queue.get(0, urgent_only=True) is None
    assert queue.get(0) == key
    queue.done(key)
    w.applier.on_drift(("default/de",), "MODIFIED", shown(2))  # available now: it turned
    assert queue.get(0, urgent_only=True) == key
    queue.done(key)
    w.reconcile("web")
    st = status(w.store, "web").status
    assert st.state == "RUNNING", st.reason


def test_a_job_that_completes_is_recorded_done_ahead_of_waiting_applies() -> None:
    """A running Job is available (its Pod Ready) and stays so when it completes: what
    turns is that its work is done, and that is what keeps it from running again when
    its cluster is cut off next — urgent (the robustness run, seed 41: a completion
    waited its turn behind a restarted replica's resync, its cluster went away, and a
    forced move ran the Job again)."""
    w = World()
    cluster(w.store, "de")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
           "spec": {"template": {"spec": {"restartPolicy": "Never"}}}}
    application(w.store, "batch", manifest=[job])
    bind(w.store, "batch", "de")
    w.reconcile("batch")
    for inf in w.applier.informers:
        inf.sync()
    key = keys.resource_key("Application", "batch", "default")
    queue = w.applier.queue
    stored = w.connections.clusters["de"].get(next(iter(w.connections.clusters["de"].objects)))
    assert stored is not None

    def shown(st: dict[str, object]) -> KubeObject:
        return KubeObject(stored.apiVersion, stored.kind, stored.metadata, stored.spec,
                          msgspec.Raw(msgspec.json.encode(st)))

    w.applier.on_drift(("default/de",), "MODIFIED", shown({"active": 1, "ready": 1}))
    w.reconcile("batch")
    st = status(w.store, "batch").status
    assert st.state == "RUNNING" and st.working == 1 and not st.applied["default/de"].done
    for inf in w.applier.informers:
        inf.sync()  # the applier reads that status
    while (queued := queue.get(0)) is not None:
        queue.done(queued)
    w.applier.on_drift(("default/de",), "MODIFIED", shown({"succeeded": 1, "conditions": [
        {"type": "Complete", "status": "True"}]}))
    assert queue.get(0, urgent_only=True) == key
    queue.done(key)
    w.reconcile("batch")
    st = status(w.store, "batch").status
    assert [r.name for r in st.applied["default/de"].done] == ["once"]
    assert st.finished == 1 and st.working == 0


def test_a_servers_watch_event_reaches_only_the_clusters_where_the_object_is_berths() -> None:
    """de and fr stand for two namespaces of one API server: its one drift watch hands
    every event to both, and each keeps only what was applied through it — also after
    a restart, when only the status says where what is."""
    w = web_on_de()
    [ref] = w.connections.clusters["de"].objects
    stored = w.connections.clusters["de"].get(ref)
    assert stored is not None
    both = ("default/de", "default/fr")
    w.applier.book.forget_cluster("default/de")  # what the apply's answer put there

    w.applier.on_drift(both, "MODIFIED", stored)
    assert w.applier.book.holds("default/de", ref)
    assert not w.applier.book.holds("default/fr", ref)

    restarted = w.restarted()  # its book and its record of its writes are empty
    restarted.on_drift(both, "ADDED", stored)  # the watch's first list
    assert restarted.book.holds("default/de", ref)
    assert not restarted.book.holds("default/fr", ref)

    # an object no application of these clusters lists (another replica's, or left over)
    stray = KubeObject(stored.apiVersion, stored.kind, ObjectMeta(
        "stray", stored.metadata.namespace, annotations={OWNER: "default/elsewhere"}))
    restarted.on_drift(both, "ADDED", stray)
    stray_ref = KubeObjectRef(stored.apiVersion, stored.kind, "stray",
                              stored.metadata.namespace)
    assert not any(restarted.book.holds(c, stray_ref) for c in both)


def test_an_application_says_its_cluster_is_not_seen_and_stops_saying_so_when_it_is_back(
        ) -> None:
    """A change of its cluster's state, either way, queues every application on it: one
    that no watch event wakes (a finished Job, say) would otherwise say "not observed"
    for good (the robustness run, seed 29). Back, nothing is applied again for it."""
    w = web_on_de()
    key = keys.resource_key("Application", "web", "default")
    queue = w.applier.queue

    def drained() -> None:
        for inf in w.applier.informers:
            inf.sync()  # the applier reads the status it wrote
        while (queued := queue.get(0)) is not None:
            queue.done(queued)

    drained()
    for state, said in (("UNHEALTHY", "not observed: cluster default/de is UNHEALTHY"),
                        ("ONLINE", "")):
        set_state(w.store, "de", state)
        w.statuses.sync()
        assert queue.get(0) == key, state
        queue.done(key)
        applies = len(w.journal)
        w.reconcile("web")
        st = status(w.store, "web").status
        assert (st.state, st.reason) == ("DEGRADED" if said else "RUNNING", said)
        assert len(w.journal) == applies, w.journal[applies:]
        drained()


def test_an_object_the_namespaces_policy_forbids_is_applied_only_while_the_policy_allows_it(
        ) -> None:
    """docs/teams.md: the propagator reads the policy itself — a manifest holding a kind
    the policy does not list is applied nowhere, says why, and is applied once the policy
    lets it (the policy's change alone, no new generation); forbidden again, the copy
    that runs there is removed."""
    w = World()
    cluster(w.store, "de")

    def allow(*kinds: str) -> None:
        put(w.store, keys.resource_key("NamespacePolicy", "default"), msgspec.json.encode({
            "api": "core", "kind": "NamespacePolicy", "metadata": {"name": "default"},
            "spec": {"kinds": list(kinds)}}))

    allow("apps/Deployment")
    application(w.store, "web")
    bind(w.store, "web", "de")
    w.reconcile("web")
    de = w.connections.clusters.get("de")
    assert de is None or not de.objects  # not even asked
    st = status(w.store, "web").status
    assert st.reason.startswith("not running: not applied on default/de: default/de: not "
                                "allowed by the policy of namespace default")
    assert st.state == "FAILED" and st.errors == {"default/de": (
        "not allowed by the policy of namespace default: ConfigMap web: kind "
        "core/ConfigMap is not among apps/Deployment")}
    allow("apps/Deployment", "ConfigMap")
    w.reconcile("web")
    assert [r.name for r in w.connections.clusters["de"].objects] == ["web"]
    assert status(w.store, "web").status.state != "FAILED"
    # forbidden again: the copy that runs goes (confinement before availability), and
    # is not applied again while the policy stands
    allow("apps/Deployment")
    w.reconcile("web")
    assert not w.connections.clusters["de"].objects
    st = status(w.store, "web").status
    assert st.state == "FAILED" and "default/de" not in st.applied
    w.reconcile("web")
    assert not w.connections.clusters["de"].objects


def test_when_the_replicas_change_what_is_on_no_cluster_is_looked_at_again() -> None:
    """Work on no cluster a replica can serve is its home replica's; the others drop it.
    When the members change, every replica queues that work again (and only it), so the
    new home does it.
    (The Shard's side, telling of the change, is in test_shard.py.)"""
    w = web_on_de()
    application(w.store, "lonely")  # not placed yet: on no cluster
    application(w.store, "over")
    put(w.store, keys.binding_key("Application", "default", "over"), Binding(
        BindingMeta(name="over", namespace="default"),
        BindingSpec(ObjectRef("Application", "over", "default"), 1, []),
        BindingStatus(state="Unschedulable", reason="over the quota")))
    application(w.store, "nowhere")
    bind(w.store, "nowhere", "gone")  # a cluster nobody can serve: the home's too
    for name in ("lonely", "over", "nowhere"):
        w.reconcile(name)
    queue = w.applier.queue
    while (queued := queue.get(0)) is not None:
        queue.done(queued)
    w.applier.members_changed()
    got = set()
    while (queued := queue.get(0)) is not None:
        got.add(queued)
        queue.done(queued)
    assert got == {keys.resource_key("Application", n, "default")
                   for n in ("lonely", "over", "nowhere")}
