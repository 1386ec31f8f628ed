"""DependsOn: a dependent goes where its dependencies are placed, waits while one is
placed nowhere, and an application on a loop of dependencies is placed nowhere."""

from __future__ import annotations

from berth.controllers.scheduler.framework import CycleState
from berth.controllers.scheduler.plugins.depends_on import DependsOn
from berth.store import keys
from berth.store.documents import Placement
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate, rejected_both_ways


def key(name: str) -> keys.Key:
    return keys.resource_key("Application", name, "default")


def fleet(**targets: list[str]) -> FakeSnapshot:
    return FakeSnapshot([cluster(c) for c in ("a", "b", "c", "d")], targets=dict(targets))


def test_a_dependent_goes_only_where_every_dependency_is_placed() -> None:
    snap = fleet(db=["a", "b", "c"], cache=["b", "c", "d"])
    web = app("web", depends_on=(key("db"), key("cache")),
              placement=Placement(policy="PickAll"))
    _, chosen = evaluate(snap, web)
    assert sorted(chosen) == ["b", "c"]
    plugin, state = DependsOn(), CycleState()
    assert plugin.pre_filter(state, web, snap).ok
    assert rejected_both_ways(plugin, web, snap, state) == (["a", "d"], ["a", "d"])
    # the explanation names the dependency a cluster lacks
    assert "its dependency default/cache is not placed here" in str(
        plugin.filter(state, web, snap.clusters[0], snap).reason)


def test_a_dependency_placed_nowhere_yet_makes_it_unschedulable_saying_which() -> None:
    snap = fleet(db=["a"])
    ev, chosen = evaluate(snap, app("web", depends_on=(key("db"), key("cache"))))
    assert chosen == [] and ev.error is not None
    assert "its dependencies are placed nowhere yet: default/cache" in ev.error.reason


def test_an_application_on_a_loop_is_placed_nowhere_and_the_loop_named() -> None:
    snap = fleet(db=["a"], web=["a"])
    snap.deps = {"web": ("api",), "api": ("web",)}
    ev, chosen = evaluate(snap, app("web", depends_on=(key("api"),)))
    assert chosen == [] and ev.error is not None
    assert "on a loop of dependencies: web → api → web" in ev.error.reason


def test_without_dependencies_it_is_skipped() -> None:
    snap = fleet()
    assert DependsOn().pre_filter(CycleState(), app("web"), snap).code.name == "SKIP"
    _, chosen = evaluate(snap, app("web", placement=Placement(policy="PickAll")))
    assert sorted(chosen) == ["a", "b", "c", "d"]


def test_a_dependency_that_follows_goes_where_its_dependents_are_and_holds_none_back() -> None:
    snap = fleet(api=["a", "b"], ui=["b", "c"])
    snap.deps = {"api": ("cfg",), "ui": ("cfg",)}
    snap.followers = {"cfg"}
    cfg = app("cfg", placement=Placement(policy="PickAll", follow_dependents=True))
    _, chosen = evaluate(snap, cfg)
    assert sorted(chosen) == ["a", "b", "c"]  # the union of its dependents' clusters
    plugin, state = DependsOn(), CycleState()
    assert plugin.pre_filter(state, cfg, snap).ok
    assert rejected_both_ways(plugin, cfg, snap, state) == (["d"], ["d"])
    # a dependent of it is placed by its own rules, not held where cfg is (nowhere yet)
    del snap.targets["ui"]
    _, chosen = evaluate(snap, app("ui", depends_on=(key("cfg"),),
                                   placement=Placement(policy="PickAll")))
    assert sorted(chosen) == ["a", "b", "c", "d"]


def test_a_dependency_that_follows_with_no_dependent_placed_waits_saying_so() -> None:
    snap = fleet()
    snap.followers = {"cfg"}
    ev, chosen = evaluate(snap, app("cfg", placement=Placement(policy="PickAll",
                                                               follow_dependents=True)))
    assert chosen == [] and ev.error is not None
    assert "it follows its dependents, and none is placed yet" in ev.error.reason


def test_another_namespaces_dependency_only_where_its_policy_lets_this_one_depend() -> None:
    snap = fleet()
    snap.clusters.append(cluster("p1"))
    db = keys.resource_key("Application", "db", "platform")
    snap.targets["db"] = ["a"]  # (the fake finds targets by name)
    web = app("web", depends_on=(db,), placement=Placement(policy="PickAll"))
    ev, chosen = evaluate(snap, web)
    assert chosen == [] and ev.error is not None
    assert ("may not depend on platform/db: the policy of namespace platform does not name "
            "default among its dependents") in ev.error.reason
    snap.consents = {("default", "platform")}
    _, chosen = evaluate(snap, web)
    assert chosen == ["a"]
