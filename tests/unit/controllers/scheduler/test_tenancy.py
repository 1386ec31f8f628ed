"""Teams on one fleet, in the scheduler: where a namespace's applications may be placed
(its own clusters and those of the ClusterSets its policy binds) and what priority
they may take; over etcd in memory, no server.

(docs/teams.md; a policy's documents as `berth apply` checks them are in
tests/unit/store/test_tenancy_documents.py.)"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.controllers.runtime import Informer
from berth.controllers.scheduler.framework import Ref, Subject
from berth.controllers.scheduler.priorities import Priorities, resolve
from berth.controllers.tenancy import NARROWEST, Tenancy
from berth.store import keys
from berth.store.documents import Binding, PriorityClass
from berth.store.documents.tenancy import ClusterSet, NamespacePolicy
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import application, binding, cluster, in_memory, put


def cluster_set(store: MemoryStore, name: str, namespaces: list[str],
                **clusters: Any) -> None:
    put(store, keys.resource_key("ClusterSet", name), msgspec.json.encode({
        "api": "core", "kind": "ClusterSet", "metadata": {"name": name},
        "spec": {"namespaces": namespaces, "clusters": clusters}}))


def policy(store: MemoryStore, namespace: str, **spec: Any) -> None:
    put(store, keys.resource_key("NamespacePolicy", namespace), msgspec.json.encode({
        "api": "core", "kind": "NamespacePolicy", "metadata": {"name": namespace},
        "spec": spec}))


def where(store: MemoryStore, name: str, namespace: str, state: str = "Scheduled"
          ) -> Binding:
    """The application's Binding once it is in ``state`` (waiting on writes, not time)."""
    store.memory.wait_until(lambda: (b := binding(store, name, namespace)) is not None
                            and b.status.state == state)
    b = binding(store, name, namespace)
    assert b is not None
    return b


def on(b: Binding) -> list[str]:
    return sorted(f"{t.namespace}/{t.name}" for t in b.spec.targets)


def shared_fleet(store: MemoryStore) -> None:
    """Team a's own cluster (scoring worst), two shared ones of which the set takes the
    labelled one, and team b's cluster."""
    cluster(store, "a-own", namespace="team-a", labels={"score": "low"})
    cluster(store, "pool-1", namespace="shared", labels={"pool": "yes"})
    cluster(store, "pool-2", namespace="shared", labels={"pool": "no"})
    cluster(store, "b-own", namespace="team-b")
    cluster_set(store, "pool", ["shared"], matchLabels={"pool": "yes"})


def test_a_namespace_places_on_its_own_clusters_and_its_bound_sets_alone(
        store: MemoryStore, clock: FakeClock) -> None:
    shared_fleet(store)
    policy(store, "team-a", clusterSets=["pool", "no-such-set"])
    application(store, "everywhere", namespace="team-a",
                placement={"policy": "PickAll"})
    application(store, "alone", namespace="team-b", placement={"policy": "PickAll"})
    with in_memory(store, clock):
        assert on(where(store, "everywhere", "team-a")) == ["shared/pool-1", "team-a/a-own"]
        assert on(where(store, "alone", "team-b")) == ["team-b/b-own"]  # no policy: as ever


def test_a_set_unbound_takes_its_clusters_away(store: MemoryStore, clock: FakeClock) -> None:
    shared_fleet(store)
    policy(store, "team-a", clusterSets=["pool"])
    application(store, "web", namespace="team-a",
                constraints={"cluster": {"labels": ["pool is yes"]}})
    with in_memory(store, clock):
        assert on(where(store, "web", "team-a")) == ["shared/pool-1"]
        policy(store, "team-a", clusterSets=[])
        b = where(store, "web", "team-a", "Unschedulable")
        assert b.spec.targets == []  # left, though nothing else fits: its policy says so
        assert b.status.reason.startswith("0/1 clusters are available"), b.status.reason


def test_a_placed_binding_says_the_class_its_application_may_not_name(
        store: MemoryStore, clock: FakeClock) -> None:
    """docs/teams.md "Priority": placed at its own priority, the Binding says why — not
    only when it fits nowhere (then it also makes no room)."""
    shared_fleet(store)
    put(store, keys.resource_key("PriorityClass", "urgent"), msgspec.json.encode({
        "api": "core", "kind": "PriorityClass", "metadata": {"name": "urgent"},
        "spec": {"value": 1000}}))
    policy(store, "team-a", clusterSets=["pool"], priorityClasses=[])
    application(store, "web", namespace="team-a", priorityClassName="urgent")
    application(store, "calm", namespace="team-a")
    application(store, "theirs", namespace="team-b", priorityClassName="urgent")
    with in_memory(store, clock):
        b = where(store, "web", "team-a")
        assert b.status.reason.startswith(
            "priority class 'urgent' is not allowed in namespace team-a: placed at its own "
            "priority; 2/2 clusters are available"), b.status.reason
        assert where(store, "calm", "team-a").status.reason.startswith("2/2 clusters")
        assert where(store, "theirs", "team-b").status.reason.startswith("1/1 clusters")


def test_a_policy_key_that_holds_garbage_stands_for_the_narrowest(
        store: MemoryStore, clock: FakeClock) -> None:
    shared_fleet(store)
    put(store, keys.resource_key("NamespacePolicy", "team-a"), b"{not json")
    application(store, "web", namespace="team-a", placement={"policy": "PickAll"})
    with in_memory(store, clock) as s:
        assert on(where(store, "web", "team-a")) == ["team-a/a-own"]
        found = s.cache.tenancy.policy("team-a")
        assert found is not None and found.spec == NARROWEST and "not a NamespacePolicy" in (
            found.problem)
        policy(store, "team-a", clusterSets=["pool"])  # fixed: the set counts
        store.memory.wait_until(lambda: s.cache.tenancy.policy("team-a") is not None
                                and not s.cache.tenancy.policy("team-a").problem)  # type: ignore[union-attr]
        application(store, "api", namespace="team-a", placement={"policy": "PickAll"})
        assert on(where(store, "api", "team-a")) == ["shared/pool-1", "team-a/a-own"]


def test_explain_all_names_the_rule_that_keeps_a_cluster_out(store: MemoryStore) -> None:
    """What `berth explain application NAME --all` prints is this what-if: every
    cluster of another namespace that the policy does not admit, with the rule."""
    from berth.controllers.scheduler.config import SchedulerConfig
    from berth.controllers.scheduler.whatif import what_if

    shared_fleet(store)
    policy(store, "team-a", clusterSets=["pool"])
    key = keys.resource_key("Application", "web", "team-a")
    doc = {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": "web", "namespace": "team-a"},
           "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "web"}}]}}
    [answer] = what_if(store, SchedulerConfig(), [(key, doc)], consequences=False).answers
    verdicts = {v.candidate: (v.verdict, v.rejected_by, v.reason) for v in answer.verdicts}
    out = ("rejected", "NamespacePolicy", "not in a cluster set bound to namespace team-a")
    assert verdicts["Cluster/shared/pool-2"] == out
    assert verdicts["Cluster/team-b/b-own"] == out
    assert verdicts["Cluster/shared/pool-1"][0] in ("chosen", "fits")
    assert verdicts["Cluster/team-a/a-own"][0] in ("chosen", "fits")


def subject(namespace: str, priority: int | None = None, cls: str | None = None) -> Subject:
    return Subject(Ref("Application", namespace, "app"), keys.NO_KEY, "", priority=priority,
                   priority_class=cls)


@pytest.mark.parametrize(("spec", "asked", "value", "problem", "source"), [
    ({}, (5000, None), 5000, "", "its own"),
    ({"maxPriority": 100}, (5000, None), 100, "",
     "its own, capped at 100 by the policy of namespace team-a"),
    ({"maxPriority": 100}, (50, None), 50, "", "its own"),
    ({"priorityClasses": ["low"]}, (None, "low"), 10, "", "class low"),
    ({"priorityClasses": ["low"]}, (None, "high"), 0,
     "priority class 'high' is not allowed in namespace team-a", "its own"),
    ({"priorityClasses": [], "maxPriority": 5}, (9, "high"), 5,
     "priority class 'high' is not allowed in namespace team-a",
     "its own, capped at 5 by the policy of namespace team-a"),
    ({"maxPriority": 0}, (None, None), 1, "", "default class base"),  # the admins' default
])
def test_a_policy_limits_the_priority_an_application_takes(
        spec: dict[str, Any], asked: tuple[int | None, str | None], value: int, problem: str,
        source: str) -> None:
    store = MemoryStore()
    for name, v, default in (("low", 10, False), ("high", 1000, False), ("base", 1, True)):
        put(store, keys.resource_key("PriorityClass", name), msgspec.json.encode({
            "api": "core", "kind": "PriorityClass", "metadata": {"name": name},
            "spec": {"value": v, "globalDefault": default}}))
    policy(store, "team-a", **spec)
    classes: Informer[PriorityClass] = Informer(store, keys.resource_prefix("PriorityClass"),
                                                PriorityClass)
    tenancy = Tenancy(Informer(store, keys.resource_prefix("NamespacePolicy"), NamespacePolicy),
                      Informer(store, keys.resource_prefix("ClusterSet"), ClusterSet))
    for inf in (classes, *tenancy.informers):
        inf.sync()
    got = Priorities(classes, tenancy).of(subject("team-a", *asked))
    assert (got.value, got.problem, got.source) == (value, problem, source)
    assert got.may_preempt is not bool(problem)
    other = Priorities(classes, tenancy).of(subject("team-b", *asked))  # no policy there
    assert other == resolve(subject("team-b", *asked), {c.obj.metadata.name: c.obj
                                                        for c in classes.items()},
                            next(c.obj for c in classes.items() if c.obj.spec.global_default))
    assert Priorities(classes, tenancy).lowest([("team-a", *asked)]) == value


def test_what_both_processes_ask_of_a_cluster_by_its_metadata(store: MemoryStore) -> None:
    """Tenancy.admits, as the scheduler (a Binding's target) and the propagator (a target
    or a copy) ask it: its own namespace always, a set's cluster by its labels, another
    namespace's never without a policy, a cluster gone not this rule's to judge."""
    from types import SimpleNamespace

    shared_fleet(store)
    policy(store, "team-a", clusterSets=["pool"])
    tenancy = Tenancy(Informer(store, keys.resource_prefix("NamespacePolicy"), NamespacePolicy),
                      Informer(store, keys.resource_prefix("ClusterSet"), ClusterSet))
    for inf in tenancy.informers:
        inf.sync()

    def meta(cid: str, **labels: str) -> Any:
        ns, _, name = cid.partition("/")
        return SimpleNamespace(namespace=ns, name=name, labels=labels)

    assert tenancy.admits("team-a", "team-a/a-own", meta("team-a/a-own"))
    assert tenancy.admits("team-a", "shared/pool-1", meta("shared/pool-1", pool="yes"))
    assert not tenancy.admits("team-a", "shared/pool-2", meta("shared/pool-2", pool="no"))
    assert not tenancy.admits("team-b", "shared/pool-1", meta("shared/pool-1", pool="yes"))
    assert tenancy.admits("team-b", "shared/gone", None)
