"""TopologySpread: a PickN placement spread across a label's values within a skew
(Kubernetes' topology spread constraints, by cluster)."""

from __future__ import annotations

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.framework import Framework
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store.documents import Placement
from berth_testkit.fakes.scheduler import HEAT, FakeSnapshot, app, cluster, evaluate


def spread(policy: Placement) -> list[str]:
    snap = FakeSnapshot(
        [cluster(f"{z}{i}", labels={"region": z}, metrics=HEAT) for z in "ab" for i in range(3)]
        + [cluster("c0", labels={"region": "c"}, metrics=HEAT), cluster("none", metrics=HEAT)],
        {(f"{z}{i}", "heat"): (0.9 if z == "a" else 0.5) - i / 100 for z in "ab"
         for i in range(3)} | {("c0", "heat"): 0.1, ("none", "heat"): 0.95})
    return sorted(evaluate(snap, app(placement=policy))[1])


def test_topology_spread_keeps_the_skew_of_a_pick_n() -> None:
    from berth.store.documents import TopologySpreadConstraint as T

    hard = Placement(policy="PickN", number_of_clusters=3,
                     topology_spread_constraints=[T(1, "region")])
    assert spread(hard) == ["a0", "b0", "c0"]  # one per region, not the three best ("a*")
    loose = Placement(policy="PickN", number_of_clusters=4,
                      topology_spread_constraints=[T(2, "region")])
    assert spread(loose) == ["a0", "a1", "b0", "b1"]  # a:2 b:2 c:0 is a skew of 2
    soft = Placement(policy="PickN", number_of_clusters=6,
                     topology_spread_constraints=[T(1, "region", "ScheduleAnyway")])
    # Kept while it can be; then the best remaining one, even unlabelled.
    assert spread(soft) == ["a0", "a1", "b0", "b1", "c0", "none"]


def test_a_spread_reads_the_best_of_each_zone_not_the_ranking_down_to_it() -> None:
    """The best 100 clusters are all in region a: the second and third picks are read
    among the clusters of the other regions, not by walking the ranking past a's."""
    from berth.controllers.scheduler.framework import Ranking
    from berth.store.documents import TopologySpreadConstraint as T

    base = {"a": 0.9, "b": 0.5, "c": 0.2}
    snap = FakeSnapshot(
        [cluster(f"{z}{i:03d}", labels={"region": z}, metrics=HEAT) for z in "abc"
         for i in range(100)],
        {(f"{z}{i:03d}", "heat"): base[z] - i / 1000 for z in "abc" for i in range(100)})
    for number, expected in ((3, ["a000", "b000", "c000"]),
                             (5, ["a000", "a001", "b000", "b001", "c000"])):
        ev, chosen = evaluate(snap, app(placement=Placement(
            policy="PickN", number_of_clusters=number,
            topology_spread_constraints=[T(1, "region")])))
        assert sorted(chosen) == expected
        assert isinstance(ev.ranked, Ranking)
        assert len(ev.ranked._done) < 10  # read for the first pick only


def test_the_explanation_lists_every_chosen_target_in_its_place() -> None:
    """A spread picks clusters below the best few: the Binding's explanation, which keeps
    the best ``limit``, lists them too, by score; the chosen ones with their metric
    readings, the others with their scores."""
    from berth.controllers.scheduler.decide import Decision, decide
    from berth.store.documents import TopologySpreadConstraint as T

    snap = FakeSnapshot(
        [cluster(f"{z}{i}", labels={"region": z}, metrics=HEAT) for z in "ab" for i in range(3)],
        {(f"{z}{i}", "heat"): (0.9 if z == "a" else 0.5) - i / 100 for z in "ab"
         for i in range(3)})
    fw = Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})
    subject = app(placement=Placement(policy="PickN", number_of_clusters=2,
                                      topology_spread_constraints=[T(1, "region")]))
    decision = decide(fw, subject, snap, [])
    assert isinstance(decision, Decision)
    assert [t.name for t in decision.targets] == ["a0", "b0"]
    listed = [e for e in decision.explained(fw, snap, 2) if "score" in e]
    assert [e["candidate"].rsplit("/", 1)[1] for e in listed] == ["a0", "a1", "b0"]
    assert ["metrics" in e for e in listed] == [True, False, True]


def test_topology_spread_stops_short_rather_than_break_a_hard_skew() -> None:
    from berth.store.documents import TopologySpreadConstraint as T

    p = Placement(policy="PickN", number_of_clusters=6, topology_spread_constraints=[T(1, "region")])
    assert spread(p) == ["a0", "a1", "b0", "b1", "c0"]  # a sixth would make a skew of 2
