"""ClusterGroups: only the clusters of ``placement.clusterGroups`` (named, or selected by
labels) are candidates. How the groups' order fills a divided application is
``test_replicas.py``'s ``test_groups_fill_in_order_and_overflow``."""

from __future__ import annotations

from berth.controllers.scheduler.framework import CycleState
from berth.controllers.scheduler.plugins.cluster_groups import ClusterGroups
from berth.store.documents import ClusterGroup, Placement
from berth.store.documents.application import WorkloadSelector
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate, rejected_both_ways

GROUPS = [ClusterGroup(name="on-prem", label_selector=WorkloadSelector(
    match_labels={"site": "onprem"})), ClusterGroup(name="cloud", cluster_names=["aws"])]
SNAP = FakeSnapshot([cluster("rack1", labels={"site": "onprem"}), cluster("aws"),
                     cluster("gcp"), cluster("lab", labels={"site": "lab"})])


def test_a_cluster_in_no_group_is_no_candidate() -> None:
    ev, chosen = evaluate(SNAP, app(placement=Placement(policy="PickAll", cluster_groups=GROUPS)))
    assert sorted(chosen) == ["aws", "rack1"]
    assert ev.rejected["Cluster/default/gcp"].reason == "in no cluster group"


def test_without_groups_it_skips_and_its_two_forms_agree() -> None:
    plugin = ClusterGroups()
    assert plugin.pre_filter(CycleState(), app(), SNAP).code.name == "SKIP"
    grouped = app(placement=Placement(cluster_groups=GROUPS))
    assert rejected_both_ways(plugin, grouped, SNAP) == (["gcp", "lab"],) * 2
