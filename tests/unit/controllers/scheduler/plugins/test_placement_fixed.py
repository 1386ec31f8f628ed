"""PlacementFixed: a PickFixed placement considers only the clusters it names (Fleet's
``clusterNames``); a name no cluster has is no error."""

from __future__ import annotations

from berth.controllers.scheduler.framework import CycleState
from berth.controllers.scheduler.plugins.placement_fixed import PlacementFixed
from berth.store.documents import Placement
from berth_testkit.fakes.scheduler import app, evaluate, ranked_fleet, rejected_both_ways


def test_only_the_named_clusters_in_the_ranking_s_order() -> None:
    fixed = app(placement=Placement(policy="PickFixed", cluster_names=["c3", "c1", "nope"]))
    ev, chosen = evaluate(ranked_fleet(), fixed)
    assert chosen == ["c1", "c3"]
    assert ev.rejected["Cluster/default/c0"].reason == "not in clusterNames"


def test_other_policies_skip_it_and_its_two_forms_agree() -> None:
    plugin, snap = PlacementFixed(), ranked_fleet()
    assert plugin.pre_filter(CycleState(), app(), snap).code.name == "SKIP"
    fixed = app(placement=Placement(policy="PickFixed", cluster_names=["c2"]))
    assert rejected_both_ways(plugin, fixed, snap) == (["c0", "c1", "c3", "c4"],) * 2
