"""Replica division, capacity fit and cluster groups, through the one decision engine."""

from __future__ import annotations

import random
import re

import pytest

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, NoFit, decide
from berth.controllers.scheduler.framework import Candidate, Framework, Room, Subject
from berth.controllers.scheduler.framework.types import Ref
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store.documents import (
    ClusterGroup,
    Placement,
    ReplicaScheduling,
    StaticWeight,
    Target,
)
from berth.store.documents.application import WorkloadSelector
from berth.store.documents.resources import Demand, QuantityError, Resources, demand, quantity
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster

ONE = Resources(cpu=500, memory=1 << 30, pods=1)  # one replica: 500m, 1Gi


def framework() -> Framework:
    return Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})


def divided(n: int, *, division: str = "Weighted", weights: list[StaticWeight] | None = None,
            groups: list[ClusterGroup] | None = None, per: Resources = ONE, **kw: object):
    rs = ReplicaScheduling(type="Divided", division=division,  # type: ignore[arg-type]
                           static_weights=weights or [])
    return app(placement=Placement(policy="PickAll", replica_scheduling=rs,
                                   cluster_groups=groups or []),
               demand=Demand(n, per, whole=per.times(n)), **kw)


def shares(outcome: Decision | NoFit) -> dict[str, int | None]:
    assert isinstance(outcome, Decision), outcome
    return {t.name: t.replicas for t in outcome.targets}


def room(cpu_cores: int) -> Room:
    alloc = Resources(cpu=cpu_cores * 1000, memory=cpu_cores * 2 << 30, pods=110)
    return Room(alloc, alloc)


def test_quantities_parse_as_kubernetes_writes_them() -> None:
    assert quantity("500m") * 1000 == 500
    assert quantity("1Gi") == 1 << 30
    assert quantity("1.5G") == 1_500_000_000
    assert quantity("2e3") == 2000
    assert quantity(2) == 2
    with pytest.raises(ValueError, match="'1x' is not a quantity"):
        quantity("1x")


def test_a_resource_list_read_again_reads_the_same_and_a_bad_one_still_fails() -> None:
    listed = {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": 1}
    first = Resources.of(listed)
    assert first == Resources(250, 1 << 30, 0, (("nvidia.com/gpu", 1),))
    assert Resources.of(dict(listed)) is first  # kept: the same read
    assert Resources.of(listed, pods=1) == Resources(250, 1 << 30, 1, (("nvidia.com/gpu", 1),))
    # equal keys of another type are never taken for a kept read: True == 1, 1.0 == 1
    assert Resources.of({"cpu": 1}) == Resources(cpu=1000)
    with pytest.raises(ValueError, match="True is not a quantity"):
        Resources.of({"cpu": True})
    assert Resources.of({"cpu": 1.5}) == Resources(cpu=1500)
    for _ in range(2):  # a list that fails fails every time: nothing kept
        with pytest.raises(ValueError, match="'1x' is not a quantity"):
            Resources.of({"memory": "1x"})
    with pytest.raises(ValueError, match="is not a quantity"):  # unhashable: not kept
        Resources.of({"cpu": ["1"]})

def test_demand_reads_workloads_and_counts_pods() -> None:
    d = demand([
        {"kind": "Deployment", "metadata": {"name": "a"}, "spec": {"replicas": 4, "template": {
            "spec": {"containers": [{"resources": {"requests": {"cpu": "250m"}}},
                                    {"resources": {"requests": {"cpu": "250m",
                                                                "memory": "1Gi"}}}],
                     "initContainers": [{"resources": {"requests": {"cpu": "2"}}}]}}}},
        {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "y"}},
        {"kind": "Widget", "metadata": {"name": "w", "annotations": {
            "berth.dev/replicas-path": "spec.workers",
            "berth.dev/replica-requests": "cpu=1,memory=512Mi"}}, "spec": {"workers": 2}},
    ])
    assert d.replicas == 4
    # the init container's 2 CPUs outweigh the 500m of the two containers together
    assert d.per_replica == Resources(cpu=2000 + 1000, memory=(1 << 30) + (512 << 20), pods=2)
    assert d.whole == Resources(cpu=4 * 2000 + 2 * 1000, memory=4 * (1 << 30) + 2 * (512 << 20),
                                pods=6)


def test_static_weights_divide_by_webster() -> None:
    snap = FakeSnapshot([cluster("a"), cluster("b"), cluster("c")])
    weights = [StaticWeight(ClusterGroup(cluster_names=["a"]), 3),
               StaticWeight(ClusterGroup(cluster_names=["b"]), 2),
               StaticWeight(ClusterGroup(cluster_names=["c"]), 1)]
    got = shares(decide(framework(), divided(12, weights=weights), snap, []))
    assert got == {"a": 6, "b": 4, "c": 2}  # 3:2:1 of 12 exactly
    got = shares(decide(framework(), divided(7, weights=weights), snap, []))
    assert got == {"a": 4, "b": 2, "c": 1}  # Sainte-Laguë: 3.5 → 4, 2.33 → 2, 1.17 → 1


def test_static_weights_as_karmada_weighs_clusters() -> None:
    """Karmada's getStaticWeightInfoList: a selected cluster no rule names is ignored
    (weight 0), the largest matching weight counts, and with no weight anywhere every
    cluster weighs 1."""
    snap = FakeSnapshot([cluster("a", labels={"zone": "x"}), cluster("b"), cluster("c")])
    named = [StaticWeight(ClusterGroup(cluster_names=["a"]), 3),
             StaticWeight(ClusterGroup(cluster_names=["b"]), 2)]
    got = shares(decide(framework(), divided(12, weights=named), snap, []))
    assert got == {"a": 7, "b": 5}  # c is named by no rule: no replicas (Webster 7.2, 4.8)
    overlapping = [StaticWeight(ClusterGroup(cluster_names=["a", "b"]), 1),
                   StaticWeight(ClusterGroup(label_selector=WorkloadSelector(
                       match_labels={"zone": "x"})), 3)]
    got = shares(decide(framework(), divided(8, weights=overlapping), snap, []))
    assert got == {"a": 6, "b": 2}  # a matches both rules: the larger, 3
    nobody = [StaticWeight(ClusterGroup(cluster_names=["elsewhere"]), 5)]
    got = shares(decide(framework(), divided(9, weights=nobody), snap, []))
    assert got == {"a": 3, "b": 3, "c": 3}


@pytest.mark.parametrize("seed", range(20))
def test_division_is_house_monotone(seed: int) -> None:
    """Scaling up never takes a replica from a cluster; scaling down only removes."""
    rng = random.Random(seed)
    names = [f"c{i}" for i in range(rng.randint(2, 7))]
    snap = FakeSnapshot([cluster(n) for n in names])
    weights = [StaticWeight(ClusterGroup(cluster_names=[n]), rng.randint(0, 9)) for n in names]
    if not any(w.weight for w in weights):
        weights[0] = StaticWeight(ClusterGroup(cluster_names=[names[0]]), 1)
    before: dict[str, int | None] = {}
    current: list[Target] = []
    for n in range(0, 40):
        outcome = decide(framework(), divided(n, weights=weights), snap, current)
        now = shares(outcome)
        for name, k in now.items():
            assert (k or 0) >= (before.get(name) or 0), (n, before, now)
        assert sum(k or 0 for k in now.values()) == n
        before = now
        assert isinstance(outcome, Decision)
        current = outcome.targets
    for n in range(39, -1, -1):
        outcome = decide(framework(), divided(n, weights=weights), snap, current)
        now = shares(outcome)
        for name, k in now.items():
            assert (k or 0) <= (before.get(name) or 0), (n, before, now)
        before = now
        assert isinstance(outcome, Decision)
        current = outcome.targets


def test_capacity_caps_shares_and_reports_the_rest() -> None:
    snap = FakeSnapshot([cluster("big"), cluster("small"), cluster("full")],
                        room_of={"big": room(8), "small": room(2),
                               "full": Room(room(4).allocatable, Resources(pods=10))})
    outcome = decide(framework(), divided(30, division="Capacity"), snap, [])
    got = shares(outcome)
    assert got == {"big": 16, "small": 4}  # 8 cores / 500m, 2 cores / 500m; full: nothing
    assert isinstance(outcome, Decision) and outcome.unplaced == 10
    assert outcome.reason.startswith("10 replicas wait for room; 2/3 clusters are available: "
                                     "1 insufficient cpu, memory")


def test_aggregated_takes_the_fewest_clusters() -> None:
    snap = FakeSnapshot([cluster("a"), cluster("b"), cluster("c")],
                        room_of={"a": room(2), "b": room(8), "c": room(4)})
    assert shares(decide(framework(), divided(10, division="Aggregated"), snap, [])) == {"b": 10}
    got = shares(decide(framework(), divided(20, division="Aggregated"), snap, []))
    assert got == {"b": 16, "c": 4}


def test_duplicated_needs_the_whole_manifest_to_fit() -> None:
    snap = FakeSnapshot([cluster("a"), cluster("b")], room_of={"a": room(1), "b": room(4)})
    whole = app(demand=Demand(4, ONE, whole=ONE.times(4)))  # 2 cores in all
    outcome = decide(framework(), whole, snap, [])
    assert isinstance(outcome, Decision) and [t.name for t in outcome.targets] == ["b"]
    assert outcome.targets[0].replicas is None
    # It holds b now: what it holds there counts as free for it (no self-eviction).
    full = FakeSnapshot([cluster("a"), cluster("b")], room_of={
        "a": room(1), "b": Room(room(4).allocatable, Resources(cpu=0, memory=0, pods=100))})
    again = decide(framework(), whole, full, [Target("Cluster", "b", "default")])
    assert isinstance(again, Decision) and [t.name for t in again.targets] == ["b"]
    none = decide(framework(), whole, full, [])
    assert isinstance(none, NoFit) and "insufficient cpu, memory" in none.reason


def test_groups_fill_in_order_and_overflow() -> None:
    groups = [ClusterGroup(name="on-prem", label_selector=WorkloadSelector(
        match_labels={"site": "onprem"})), ClusterGroup(name="cloud", cluster_names=["aws"])]
    clusters = [cluster("rack1", labels={"site": "onprem"}),
                cluster("rack2", labels={"site": "onprem"}), cluster("aws"), cluster("gcp")]
    snap = FakeSnapshot(clusters, room_of={"rack1": room(2), "rack2": room(2), "aws": room(64)})
    assert shares(decide(framework(), divided(6, groups=groups), snap, [])) == {
        "rack1": 3, "rack2": 3}
    got = shares(decide(framework(), divided(12, groups=groups), snap, []))
    assert got == {"rack1": 4, "rack2": 4, "aws": 4}  # the cloud takes only the overflow
    # Scaling down reclaims the overflow first.
    assert shares(decide(framework(), divided(9, groups=groups), snap, [])) == {
        "rack1": 4, "rack2": 4, "aws": 1}
    # A whole application goes to the first group that has room, even if the cloud scores
    # better; gcp is in no group.
    whole = app(placement=Placement(cluster_groups=groups),
                demand=Demand(1, ONE, whole=ONE.times(5)))
    outcome = decide(framework(), whole, snap, [])
    assert isinstance(outcome, Decision) and [t.name for t in outcome.targets] == ["aws"]
    small = app(placement=Placement(cluster_groups=groups), demand=Demand(1, ONE, whole=ONE))
    outcome = decide(framework(), small, snap, [])
    assert isinstance(outcome, Decision) and outcome.targets[0].name in ("rack1", "rack2")
    assert "1 in no cluster group" in outcome.reason


def test_divide_prefers_current_holders_on_ties() -> None:
    snap = FakeSnapshot([cluster("a"), cluster("b")])
    fw = framework()
    first = decide(fw, divided(3), snap, [Target("Cluster", "b", "default", replicas=2),
                                          Target("Cluster", "a", "default", replicas=1)])
    assert shares(first) == {"a": 1, "b": 2}
    again = decide(fw, divided(3), snap, [Target("Cluster", "a", "default", replicas=2),
                                          Target("Cluster", "b", "default", replicas=1)])
    assert shares(again) == {"a": 2, "b": 1}


def test_no_room_anywhere_is_unschedulable_with_the_reason() -> None:
    snap = FakeSnapshot([cluster("a")], room_of={"a": Room(room(1).allocatable, Resources())})
    outcome = decide(framework(), divided(3), snap, [])
    assert isinstance(outcome, NoFit)
    assert "insufficient cpu, memory, pods" in outcome.reason


def test_an_application_in_a_namespace_without_clusters_is_told_where_they_are() -> None:
    snap = FakeSnapshot([cluster("a")])  # clusters in default
    prod = Subject(Ref("Application", "prod", "web"), "/berth/v1/applications/prod/web",
                   "Cluster")
    outcome = decide(framework(), prod, snap, [])
    assert isinstance(outcome, NoFit)
    assert outcome.reason == "no cluster in namespace prod; clusters are in: default"
    assert decide(framework(), prod, FakeSnapshot([]), []).reason == (
        "no cluster in namespace prod, nor in any other")
    many = FakeSnapshot([Candidate(Ref("Cluster", f"team-{i}", "c"), {}, ())
                         for i in range(80)])
    assert decide(framework(), prod, many, []).reason == (  # one line, whatever the fleet
        "no cluster in namespace prod; clusters are in: team-0, team-1, team-10, team-11, "
        "team-12 and 75 more")
    bound = FakeSnapshot([cluster("a")], sets={"prod": ["gpu", "eu"]})  # none of them here
    assert decide(framework(), prod, bound, []).reason == (
        "no cluster in namespace prod nor in the cluster sets bound to it (gpu, eu); "
        "clusters are in: default")


def test_a_metric_constraint_names_what_each_cluster_measures() -> None:
    """Each cluster lists the renewable share of its own grid zone; the constraint names
    what they measure (berth.dev/measures), and a cluster listing the plain name is
    judged by that, as in Krake."""
    from berth.controllers.scheduler.framework import MetricReading

    def share(zone: str, v: float) -> MetricReading:
        return MetricReading(f"renew_{zone}", 1.0, v, v, measures="renewable_share")

    snap = FakeSnapshot(
        [cluster("de", metrics={"renew_de": 1.0}), cluster("fr", metrics={"renew_fr": 1.0}),
         cluster("pl", metrics={"renew_pl": 1.0}), cluster("x", metrics={"load": 1.0}),
         cluster("plain", metrics={"renewable_share": 1.0})],
        values={("de", "renew_de"): share("de", 0.7), ("fr", "renew_fr"): share("fr", 0.4),
                ("pl", "renew_pl"): share("pl", 0.9), ("x", "load"): 0.99,
                ("plain", "renewable_share"): 0.65})
    green = app(metric_constraints=("renewable_share > 0.6",),
                placement=Placement(policy="PickAll"))
    outcome = decide(framework(), green, snap, [])
    assert isinstance(outcome, Decision)
    assert sorted(t.name for t in outcome.targets) == ["de", "pl", "plain"]
    assert "1 metric constraint 'renewable_share > 0.6': no metric renewable_share" in (
        outcome.reason)


@pytest.mark.parametrize(("pod_spec", "said"), [
    ({"containers": [{"resources": {"requests": [1]}}]},
     "containers[0].resources.requests: expected a mapping, not list"),
    ({"containers": [{"resources": "big"}]}, "containers[0].resources: expected a mapping"),
    ({"containers": 5}, "spec.containers: expected a list, not int"),
    ({"containers": ["nginx"]}, "containers[0]: expected a mapping, not str"),
    ({"initContainers": [[]], "containers": []}, None),  # empty: asks nothing
    ({"initContainers": [7]}, "initContainers[0]: expected a mapping, not int"),
    ({"overhead": [1]}, "spec.overhead: expected a mapping, not list"),
    ({"resources": [1]}, "spec.resources: expected a mapping, not list"),
    ({"resources": {"requests": "cpu=1"}}, "spec.resources.requests: expected a mapping"),
])
def test_a_workload_of_the_wrong_shape_is_a_quantity_error_naming_the_field(
        pod_spec: dict[str, object], said: str | None) -> None:
    """Hand-written manifests: bootstrap and apply refuse them with the field named, and
    the scheduler places them as asking nothing (never a TypeError from deep inside)."""
    manifest = [{"kind": "Deployment", "spec": {"replicas": 2, "template": {"spec": pod_spec}}}]
    if said is None:
        assert demand(manifest).per_replica == Resources(pods=1)
        return
    with pytest.raises(QuantityError, match=re.escape(said)) as caught:
        demand(manifest)
    assert str(caught.value).startswith("spec.manifest[0].spec.template.spec.")
