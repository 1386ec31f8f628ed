"""The facts builder, table-driven: what the read view holds → the Facts a reconcile
decides on (which clusters are this replica's, which copies are stale, which
targets are unseen or unrendered, what a rollout reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from berth.controllers.propagator.facts import FactsBuilder, Since
from berth.controllers.propagator.health import HEALTHY, UNKNOWN, Copy, Health
from berth.controllers.propagator.plan import Facts
from berth.controllers.propagator.views import AppView, ClusterView
from berth.store import keys
from berth.store.dependencies import Dependencies
from berth.store.documents import (
    ApplicationState,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingStatus,
    ClusterApplied,
    HealthRule,
    KubeObjectRef,
    ObjectRef,
    Target,
)
from berth.store.documents.export import ToolVerdict
from berth.store.documents.overrides import Override
from berth.store.documents.pace import PaceSpec
from berth.store.documents.rollouts import RolloutControl
from berth.store.documents.tenancy import Identity, NamespacePolicySpec
from berth_testkit.memory import FakeClock

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
REF = KubeObjectRef("v1", "ConfigMap", "x", "default")
KEY = keys.resource_key("Application", "web", "default")
FINE = Copy(Health(HEALTHY, "", 1, 1))
DEPLOYER = Identity(service_account="default/deployer")


@dataclass
class Table:
    """A read view as plain tables; what the builder asked is noted."""

    targets: tuple[str, ...] | None = ("a", "b")  # None: no Binding
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # informer's
    labels_now: dict[str, dict[str, str]] = field(default_factory=dict)  # etcd's now
    offline: dict[str, str] = field(default_factory=dict)
    back: dict[str, datetime] = field(default_factory=dict)  # when it came back ONLINE
    rules: list[dict[str, Any]] = field(default_factory=list)  # one override's rules
    kept_manifests: dict[int, list[Any]] = field(default_factory=dict)
    garbage: bool = False
    pulls: set[str] = field(default_factory=set)
    resends: set[str] = field(default_factory=set)
    unbooked: set[str] = field(default_factory=set)
    serving: set[str] | None = None  # None: not sharded
    barred: set[str] = field(default_factory=set)  # where the namespace may not run
    limits_: NamespacePolicySpec | None = None  # what the namespace's objects may be
    is_home: bool = False
    asked: list[str] = field(default_factory=list)
    others: dict[str, AppView] = field(default_factory=dict)  # other applications by name
    statuses: dict[str, ApplicationState] = field(default_factory=dict)  # theirs by name
    graph: Dependencies = field(default_factory=Dependencies)

    def binding(self, namespace: str, name: str) -> Binding | None:
        if self.targets is None:
            return None
        return Binding(BindingMeta(name=name, namespace=namespace), BindingSpec(
            ObjectRef("Application", name, namespace), 1,
            [Target("Cluster", c, "default") for c in self.targets]), BindingStatus("Scheduled"))

    def _view(self, labels: dict[str, dict[str, str]], cid: str) -> ClusterView:
        name = cid.partition("/")[2]
        return msgspec.convert({"metadata": {"name": name, "namespace": "default",
                                             "labels": labels.get(name, {})}}, ClusterView)

    def cluster(self, cid: str) -> ClusterView | None:
        return self._view(self.labels, cid)

    def cluster_now(self, cid: str) -> ClusterView | None:
        self.asked.append(f"now {cid}")
        return self._view(self.labels_now, cid)

    def unseen(self, cid: str) -> str:
        return self.offline.get(cid.partition("/")[2], "")

    def returned(self, cid: str) -> datetime | None:
        return self.back.get(cid.partition("/")[2])

    def overrides(self) -> list[Override]:
        if not self.rules:
            return []
        return [msgspec.convert({"kind": "Override", "metadata": {
            "name": "o", "namespace": "default"}, "spec": {"rules": self.rules}}, Override)]

    def control(self, namespace: str, name: str) -> RolloutControl | None:
        return None

    def pace(self) -> PaceSpec | None:
        return PaceSpec(per_minute=3)

    def in_transit(self) -> int:
        return 2

    def manifest(self, namespace: str, name: str, generation: int, manifest: list[Any]
                 ) -> list[Any]:
        return manifest

    def kept(self, namespace: str, name: str, generation: int) -> list[Any] | None:
        return self.kept_manifests.get(generation)

    def app_unreadable(self, key: str) -> bool:
        self.asked.append(f"unreadable {key}")
        return self.garbage

    def copy(self, cid: str, owner: str, have: ClusterApplied, rules: tuple[HealthRule, ...],
             now: datetime) -> Copy:
        return FINE if cid not in self.pulls else Copy(Health(UNKNOWN, "agent"))

    def is_pull(self, cid: str) -> bool:
        return cid.partition("/")[2] in self.pulls

    def resend(self, cid: str, namespace: str, name: str) -> bool:
        return cid.partition("/")[2] in self.resends

    def unobserved(self, cid: str, have: ClusterApplied | None) -> bool:
        return have is not None and cid.partition("/")[2] in self.unbooked

    def owned(self, key: str, cids: set[str]) -> frozenset[str] | None:
        if self.serving is None:
            return None
        return frozenset(c for c in cids if c.partition("/")[2] in self.serving)

    def home(self, key: str) -> bool:
        return self.serving is None or self.is_home

    def admits(self, namespace: str, cid: str) -> bool:
        return cid.partition("/")[2] not in self.barred

    def limits(self, namespace: str) -> NamespacePolicySpec | None:
        return self.limits_

    def identity(self, namespace: str) -> Identity | None:
        return self.limits_.identity if self.limits_ is not None else None

    def application(self, namespace: str, name: str) -> AppView | None:
        return self.others.get(name)

    def recorded(self, namespace: str, name: str) -> ApplicationState | None:
        return self.statuses.get(name)

    def dependents(self, key: keys.Key) -> set[keys.Key]:
        return self.graph.of(key)

    def cycle(self, key: keys.Key) -> list[str] | None:
        return self.graph.cycle(key)

    consents: set[tuple[str, str]] = field(default_factory=set)  # (dependent's, its ns)

    def may_depend(self, namespace: str, on: str) -> bool:
        return namespace == on or (namespace, on) in self.consents

    said: dict[str, ToolVerdict] | None = None  # Argo CD's word, by cluster (None: none)

    def verdicts(self, namespace: str, name: str, export: str
                 ) -> dict[str, ToolVerdict] | None:
        assert export == "argocd"  # the one the application names
        return self.said


def app(generation: int = 1, manifest: list[Any] | None = None,
        rollout: dict[str, Any] | None = None, *, name: str = "web",
        depends_on: list[dict[str, str]] | None = None, deleted: bool = False) -> AppView:
    spec: dict[str, Any] = {"manifest": [CM] if manifest is None else manifest}
    if rollout:
        spec["rollout"] = rollout
    if depends_on:
        spec["dependsOn"] = depends_on
    meta: dict[str, Any] = {"name": name, "namespace": "default", "generation": generation}
    if deleted:
        meta["deleted"] = "2026-11-30T00:00:00Z"
    return msgspec.convert({"metadata": meta, "spec": spec}, AppView)


def on(*clusters: str, gen: int = 1) -> ApplicationState:
    return ApplicationState(applied={f"default/{c}": ClusterApplied(gen, [REF])
                                     for c in clusters})


def build(table: Table, recorded: ApplicationState, view: AppView | None = None,
          since: Since | None = None, *, no_app: bool = False) -> Facts | None:
    builder = FactsBuilder(table, FakeClock(datetime(2026, 11, 30, tzinfo=UTC)),
                           move_timeout=60.0)
    return builder.facts(KEY, "default", "web", recorded,
                         None if no_app else (view or app()), since or Since())


def ids(*names: str) -> frozenset[str]:
    return frozenset(f"default/{n}" for n in names)


# (name, table, recorded, since, the stale copies)
STALE = [
    ("applied in this epoch, no drift: fresh; never applied: stale",
     Table(), on("a"), Since(0, {}, {"default/a": 0}), ids("b")),
    ("drift seen since", Table(), on("a", "b"),
     Since(0, {"default/a": 3}, {"default/a": 0, "default/b": 0}), ids("a")),
    ("a resync since the last apply", Table(), on("a", "b"),
     Since(1, {}, {"default/a": 0, "default/b": 1}), ids("a")),
    ("recorded, but not in the book (handed over and back)", Table(unbooked={"b"}),
     on("a", "b"), Since(0, {}, {"default/a": 0, "default/b": 0}), ids("b")),
    ("a pull cluster: as its work says, not by epoch", Table(pulls={"a", "b"}, resends={"b"}),
     on("a", "b"), Since(5, {"default/a": 1}, {}), ids("b")),
    ("sharded: only the served clusters' copies", Table(serving={"a"}), on("a", "b"),
     Since(1, {}, {}), ids("a")),
    ("applied as berth, its policy naming an identity now: push and pull",
     Table(pulls={"b"}, limits_=NamespacePolicySpec(identity=DEPLOYER)), on("a", "b"),
     Since(0, {}, {"default/a": 0}), ids("a", "b")),
    ("applied as the identity its policy names", Table(
        limits_=NamespacePolicySpec(identity=DEPLOYER)), ApplicationState(applied={
            "default/a": ClusterApplied(1, [REF], identity=DEPLOYER.username)}),
     Since(0, {}, {"default/a": 0}), ids("b")),
    ("applied as an identity its policy no longer names", Table(), ApplicationState(
        applied={"default/a": ClusterApplied(1, [REF], identity=DEPLOYER.username)}),
     Since(0, {}, {"default/a": 0}), ids("a", "b")),
]


@pytest.mark.parametrize(("table", "recorded", "since", "stale"),
                         [row[1:] for row in STALE], ids=[row[0] for row in STALE])
def test_which_copies_are_applied_again(table: Table, recorded: ApplicationState,
                                        since: Since, stale: frozenset[str]) -> None:
    facts = build(table, recorded, since=since)
    assert facts is not None and facts.stale == stale


# (name, table, recorded, owned (False: no facts at all))
OWNED = [
    ("not sharded: every cluster", Table(), on("a"), None),
    ("sharded: the served ones", Table(serving={"b"}), on("a"), ids("b")),
    ("none served here", Table(serving=set()), on("a"), False),
    ("on no cluster at all: its home replica's", Table(targets=(), serving=set(),
                                                       is_home=True), on(), ids()),
    ("on no cluster at all, not home", Table(targets=(), serving=set()), on(), False),
]


@pytest.mark.parametrize(("table", "recorded", "owned"), [row[1:] for row in OWNED],
                         ids=[row[0] for row in OWNED])
def test_which_clusters_are_this_replicas(table: Table, recorded: ApplicationState,
                                          owned: frozenset[str] | bool | None) -> None:
    facts = build(table, recorded)
    if owned is False:
        assert facts is None
    else:
        assert facts is not None and facts.owned == owned
        assert set(facts.health) == {c for c in recorded.applied
                                     if owned is None or c in owned}  # type: ignore[operator]


def test_a_vanished_key_reads_etcd_only_when_something_is_recorded_applied() -> None:
    table = Table(garbage=True)
    facts = build(table, on(), no_app=True)
    assert facts is not None and facts.app is None and not facts.app_unreadable
    assert table.asked == []
    facts = build(table, on("a"), no_app=True)
    assert facts is not None and facts.app_unreadable and table.asked == [f"unreadable {KEY}"]


def test_targets_not_seen_online_say_why_and_a_binding_alone_gives_the_targets() -> None:
    at = datetime(2026, 12, 3, 12, tzinfo=UTC)
    facts = build(Table(offline={"b": "OFFLINE (no answer)"}, back={"a": at}), on("a"))
    assert facts is not None
    assert facts.targets == ("default/a", "default/b") and facts.binding_generation == 1
    assert facts.unseen == {"default/b": "OFFLINE (no answer)"}
    assert facts.returned == {"default/a": at}  # a copy's time to become available counts from then
    assert facts.rollout.policy is None  # not rolled: every target at once
    facts = build(Table(targets=None), on("a"))
    assert facts is not None and facts.targets == () and facts.binding_generation is None


def test_a_cluster_its_namespace_may_not_use_is_no_target_and_its_copy_there_is_barred(
        ) -> None:
    """The namespace's policy (docs/teams.md) as the propagator reads it itself: a target
    or a copy on a cluster it no longer admits is barred, whatever the Binding says."""
    facts = build(Table(targets=("a", "b"), barred={"b", "c"}), on("a", "c"))
    assert facts is not None
    assert facts.targets == ("default/a",) and facts.barred == ids("b", "c")
    facts = build(Table(), on("a"))
    assert facts is not None and facts.barred == frozenset()


def test_an_unusable_manifest_is_an_error_and_reads_no_override_or_rollout() -> None:
    facts = build(Table(rules=[{"labels": {"set": {"x": "y"}}}]), on(),
                  app(manifest=[{"kind": "ConfigMap"}], rollout={"strategy": "Rolling"}))
    assert facts is not None and facts.app is not None
    assert facts.app.manifest_error and facts.app.bodies == ()
    assert facts.rendered == {} and facts.rollout.policy is None


def test_each_target_rendered_by_its_overrides_or_said_why_not() -> None:
    facts = build(Table(rules=[{"labels": {"set": {"tier": "${cluster.labels.tier}"}}}],
                        labels={"a": {"tier": "gold"}}), on())
    assert facts is not None
    assert facts.rendered["default/a"].bodies[0]["metadata"]["labels"]["tier"] == "gold"
    assert facts.unrendered == {"default/b": "not rendered: Override default/o rule 1: "
                                              "cluster default/b has no label 'tier' "
                                              "(${cluster.labels.tier})"}


def test_an_object_the_namespaces_policy_forbids_holds_every_copy_that_has_it() -> None:
    """docs/teams.md: a kind or a Kubernetes namespace the policy does not allow — as
    written, or as an override makes one cluster's copy — is not applied there, and says
    why; a copy without it is applied."""
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "admin"}}
    kinds = NamespacePolicySpec(kinds=["ConfigMap", "apps/Deployment"])
    facts = build(Table(limits_=kinds), on(), app(manifest=[CM, binding]))
    assert facts is not None and facts.rendered == {}
    why = ("not allowed by the policy of namespace default: ClusterRoleBinding admin: kind "
           "rbac.authorization.k8s.io/ClusterRoleBinding is not among ConfigMap, "
           "apps/Deployment")
    assert facts.unrendered == {"default/a": why, "default/b": why}
    allowed = build(Table(limits_=kinds), on(), app(manifest=[CM]))
    assert allowed is not None and allowed.unrendered == {}
    # one cluster's override puts the ConfigMap where the policy does not let it be
    inside = NamespacePolicySpec(target_namespaces=["team-a"])
    placed = {**CM, "metadata": {"name": "x", "namespace": "team-a"}}
    facts = build(Table(limits_=inside, labels={"a": {"ns": "team-a"}, "b": {"ns": "kube-system"}},
                        rules=[{"patch": {"object": {"kind": "ConfigMap", "name": "x"},
                                          "operations": [{"op": "replace",
                                                          "path": "/metadata/namespace",
                                                          "value": "${cluster.labels.ns}"}]}}]),
                  on(),
                  app(manifest=[placed]))
    assert facts is not None and list(facts.rendered) == ["default/a"]
    assert facts.unrendered == {"default/b": "not allowed by the policy of namespace default: "
                                             "ConfigMap x: namespace kube-system, not one of "
                                             "team-a"}
    facts = build(Table(limits_=inside), on(), app(manifest=[CM]))  # names no namespace
    assert facts is not None and facts.unrendered["default/a"].endswith(
        "ConfigMap x: no namespace, not one of team-a")


def test_a_target_joining_a_staged_rollout_takes_its_stage_by_its_labels_in_etcd_now() -> None:
    staged = {"strategy": "Staged", "stages": [
        {"name": "canary", "clusters": {"matchLabels": {"ring": "0"}}}]}
    table = Table(labels={"a": {"ring": "1"}, "b": {}}, labels_now={"b": {"ring": "0"}},
                  kept_manifests={1: [CM]})
    facts = build(table, on("a"), app(2, rollout=staged))
    assert facts is not None
    inputs = facts.rollout
    assert inputs.labels == {"default/a": {"ring": "1"}, "default/b": {"ring": "0"}}
    assert table.asked == ["now default/b"]  # a was applied before: its stage stands
    assert inputs.prior is not None and inputs.prior.generation == 1
    assert inputs.pace == PaceSpec(per_minute=3) and inputs.transit == 2
    # a generation the history no longer holds: nothing to roll back to
    facts = build(Table(), on("a"), app(2, rollout=staged))
    assert facts is not None and facts.rollout.prior is None


def _key(name: str) -> keys.Key:
    return keys.resource_key("Application", name, "default")


def _healthy(*clusters: str, gen: int = 1) -> ApplicationState:
    return ApplicationState(applied={f"default/{c}": ClusterApplied(
        gen, [REF], health=HEALTHY) for c in clusters})


# (name, the dependency's application and status, dependsOn's when, per target: waits for).
# Flux's cases (kustomize-controller's kustomization_dependson_test.go): "fails due to
# dependency not found" is a wait (its DependencyNotReady), the first row; not ready
# (Flux: not Ready) and ready follow, per cluster here.
WAITS: list[tuple[str, AppView | None, ApplicationState | None, str, dict[str, str]]] = [
    ("none of it exists", None, None, "Available",
     dict.fromkeys(("a", "b"), "waits for application default/db, which does not exist")),
    ("available on a only", app(name="db"), _healthy("a"), "Available",
     {"b": "waits for default/db to run on default/b"}),
    ("applied on both, available on neither", app(name="db"), on("a", "b"), "Available",
     {c: f"waits for default/db to be available on default/{c} (Unknown)" for c in "ab"}),
    ("applied on both: enough for when: Applied", app(name="db"), on("a", "b"), "Applied", {}),
    ("an older generation applied: not enough for Applied", app(2, name="db"), on("a", "b"),
     "Applied", {c: f"waits for default/db generation 2 on default/{c} (it has 1)"
                 for c in "ab"}),
    ("available, but an older generation: enough for Available", app(2, name="db"),
     _healthy("a", "b"), "Available", {}),
    ("its own steps still wait there", app(name="db"), ApplicationState(applied={
        "default/a": ClusterApplied(1, [REF], health=HEALTHY, waiting="workloads wait"),
        "default/b": ClusterApplied(1, [REF], health=HEALTHY)}), "Available",
     {"a": "waits for default/db on default/a: workloads wait"}),
    ("being deleted", app(name="db", deleted=True), _healthy("a", "b"), "Available",
     dict.fromkeys(("a", "b"), "waits for application default/db, which is being deleted")),
]


@pytest.mark.parametrize(("dep", "status", "when", "expected"), [w[1:] for w in WAITS],
                         ids=[w[0] for w in WAITS])
def test_each_target_waits_for_what_its_dependency_lacks_there(
        dep: AppView | None, status: ApplicationState | None, when: str,
        expected: dict[str, str]) -> None:
    table = Table(others={"db": dep} if dep else {}, statuses={"db": status} if status else {})
    facts = build(table, ApplicationState(),
                  app(depends_on=[{"name": "db", "when": when}]))
    assert facts is not None
    assert facts.waits_for == {f"default/{c}": why for c, why in expected.items()}


def test_a_loop_of_dependencies_holds_every_target_and_is_named() -> None:
    table = Table(others={"db": app(name="db")}, statuses={"db": _healthy("a", "b")})
    table.graph.put(KEY, (_key("db"),))
    table.graph.put(_key("db"), (KEY,))
    facts = build(table, ApplicationState(), app(depends_on=[{"name": "db"}]))
    assert facts is not None
    assert facts.waits_for == dict.fromkeys(
        ids("a", "b"), "on a loop of dependencies: web → db → web")


def test_a_copy_is_needed_where_a_dependent_is_recorded() -> None:
    table = Table(statuses={"api": on("a"), "ui": on("a", "b"), "cli": on("c")})
    for dependent in ("api", "ui", "cli"):
        table.graph.put(_key(dependent), (KEY,))
    facts = build(table, on("a", "b", "c", "d"))
    assert facts is not None
    assert facts.needed == {"default/a": "default/api, default/ui", "default/b": "default/ui",
                            "default/c": "default/cli"}


def test_another_namespaces_dependency_is_waited_for_only_with_its_consent() -> None:
    platform_db = msgspec.convert({"metadata": {"name": "db", "namespace": "platform",
                                                "generation": 1}, "spec": {}}, AppView)
    table = Table(others={"db": platform_db}, statuses={"db": _healthy("a", "b")})
    view = app(depends_on=[{"name": "db", "namespace": "platform"}])
    facts = build(table, ApplicationState(), view)
    assert facts is not None and facts.waits_for == dict.fromkeys(ids("a", "b"), (
        "may not depend on platform/db: the policy of namespace platform does not name "
        "default among its dependents"))
    table.consents = {("default", "platform")}
    facts = build(table, ApplicationState(), view)
    assert facts is not None and facts.waits_for == {}


def test_a_dependent_without_consent_holds_nothing_of_another_namespaces() -> None:
    table = Table(statuses={"api": on("a")})
    table.graph.put(keys.resource_key("Application", "api", "team-x"), (KEY,))
    facts = build(table, on("a"))
    assert facts is not None and facts.needed == {}
    table.consents = {("team-x", "default")}
    facts = build(table, on("a"))
    assert facts is not None and facts.needed == {"default/a": "team-x/api"}


def deployed(objects: list[dict[str, str]] | None = None) -> AppView:
    """``web`` placed by berth and deployed by Argo CD (no manifest)."""
    return msgspec.convert({"metadata": {"name": "web", "namespace": "default",
                                         "generation": 1},
                            "spec": {"deployedBy": {
                                "tool": "argocd", "export": "argocd", "applicationSet": "web",
                                "objects": objects or [{"apiVersion": "apps/v1",
                                                        "kind": "Deployment", "name": "web",
                                                        "namespace": "shop"}]}}}, AppView)


def test_a_copy_another_tool_deploys_is_read_each_time_and_waits_for_its_word() -> None:
    """spec.deployedBy: the copy is the objects named, read again at every reconcile on a
    push cluster (no watch sees them), and a target Argo CD does not call available yet
    says why; its policy's kinds and namespaces bound what may be read, as what may be
    applied."""
    web = KubeObjectRef("apps/v1", "Deployment", "web", "shop")
    observed = ApplicationState(applied={"default/a": ClusterApplied(1, [web], observed=True)})
    said = {"default/a": ToolVerdict("web-a", "Healthy", "Synced", "r1"),
            "default/b": ToolVerdict("web-b", "Progressing", "Synced", "r1", "1 of 2")}
    facts = build(Table(said=said), observed, deployed(),
                  Since(0, {}, {"default/a": 0}))
    assert facts is not None and facts.app is not None
    assert facts.app.observe == (web,) and facts.app.bodies == ()
    assert facts.stale == ids("a", "b")  # a: read again though applied in this epoch
    assert facts.unready == {"default/b": "Argo CD's Application web-b is Progressing: 1 of 2"}
    assert "default/a" not in facts.health  # judged by the reading, not by the book
    # the team's policy: only its own namespace's objects
    ours = NamespacePolicySpec(target_namespaces=["team-a"])
    refused = build(Table(limits_=ours, said=said), ApplicationState(), deployed())
    assert refused is not None and refused.app is not None
    assert refused.app.manifest_error == (
        "spec.deployedBy.objects: not allowed by the policy of namespace default: "
        "Deployment web: namespace shop, not one of team-a")
    allowed = build(Table(limits_=ours, said=said), ApplicationState(), deployed(
        [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
          "namespace": "team-a"}]))
    assert allowed is not None and allowed.app is not None and not allowed.app.manifest_error
