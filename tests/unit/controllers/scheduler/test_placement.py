"""Placement policies (PickOne, PickN, PickAll, PickFixed) and the framework's filtering:
one pass for equal subjects, early stop, rejection groups, standing. Each plugin's own
cases are in plugins/."""

from __future__ import annotations

import pytest

from berth.controllers.scheduler.config import SchedulerConfig, load_config
from berth.controllers.scheduler.framework import CycleState, Framework
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store.documents import Placement
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate, ranked_fleet


@pytest.mark.parametrize(
    ("placement", "chosen"),
    [
        (Placement(), ["c0"]),
        (Placement(policy="PickN", number_of_clusters=3), ["c0", "c1", "c2"]),
        (Placement(policy="PickN", number_of_clusters=9), ["c0", "c1", "c2", "c3", "c4"]),
        (Placement(policy="PickAll"), ["c0", "c1", "c2", "c3", "c4"]),
        (Placement(policy="PickFixed", cluster_names=["c3", "c1", "nope"]), ["c1", "c3"]),
    ],
)
def test_placement_policies(placement: Placement, chosen: list[str]) -> None:
    assert evaluate(ranked_fleet(), app(placement=placement))[1] == chosen


def test_raising_n_keeps_the_existing_targets() -> None:
    snap = ranked_fleet()
    snap.targets["app"] = ["c3", "c4"]  # placed when they were the best
    got = evaluate(snap, app(placement=Placement(policy="PickN", number_of_clusters=3)))[1]
    assert got == ["c0", "c3", "c4"]


def test_ignored_during_execution_keeps_feasible_targets() -> None:
    from berth.controllers.scheduler.framework.selection import select

    snap = ranked_fleet()
    snap.targets["app"] = ["c4"]
    subject = app(placement=Placement(ignored_during_execution=True))
    ev, _ = evaluate(snap, subject)
    chosen = select(subject, ev.ranked, snap.current_targets(subject), keep_current=True)
    assert [r.candidate.ref.name for r in chosen] == ["c4"]


def test_equal_subjects_share_one_filter_pass() -> None:
    calls = 0
    fw = Framework(SchedulerConfig(), REGISTRY)
    online = fw.instances["CandidateOnline"]
    original = online.filter_set

    def counting(*args: object) -> object:
        nonlocal calls
        calls += 1
        return original(*args)  # type: ignore[arg-type]

    online.filter_set = counting  # type: ignore[method-assign]
    from berth.controllers.scheduler.framework import CycleState
    snap = ranked_fleet()
    for i in range(50):
        subject = app(f"app{i}")
        subject.signature = b"same"
        state = CycleState()
        fw.pre_filter(state, subject, snap)
        fw.evaluate(state, subject, snap)
    assert calls == 1  # one pass over the five clusters, not fifty


def test_the_configuration_refuses_nonsense(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "c.yaml"
    bad.write_text("stickiness_weight: -1\n")
    with pytest.raises(ValueError, match="stickiness_weight must not be negative"):
        load_config(str(bad))
    bad.write_text("plugins: {filter: [{name: NoSuchPlugin}]}\n")
    with pytest.raises(ValueError, match="unknown plugin 'NoSuchPlugin'"):
        Framework(load_config(str(bad)), REGISTRY)
    bad.write_text("plugins: {score: [{name: CandidateOnline}]}\n")
    with pytest.raises(ValueError, match="CandidateOnline does not implement score"):
        Framework(load_config(str(bad)), REGISTRY)
    bad.write_text("reschedule_afterr: 5\n")
    with pytest.raises(ValueError, match="unknown field 'reschedule_afterr'"):
        load_config(str(bad))


def test_percentage_of_clusters_to_score_stops_filtering_early() -> None:
    big = FakeSnapshot([cluster(f"c{i:03d}") for i in range(400)])
    ev, _ = evaluate(big, app(), SchedulerConfig(percentage_of_clusters_to_score=50))
    assert len(ev.ranked) == 200  # max(100, 400 x 50%)
    ev, _ = evaluate(big, app(), SchedulerConfig(percentage_of_clusters_to_score=10))
    assert len(ev.ranked) == 100  # never fewer than 100 (the Kubernetes scheduler)
    ev, _ = evaluate(big, app())
    assert len(ev.ranked) == 400


def test_rejection_groups_are_the_small_ones_largest_first_each_named_in_full() -> None:
    """The explanation's rejections: the groups of three or fewer candidates (the
    reason counts the larger ones), as the reason orders them (most rejected first), at
    most ``limit`` of them, each with its count and every one of its candidates."""
    from berth.controllers.scheduler.decide import Decision, decide

    clusters = ([cluster(f"fr{i}", labels={"location": "FR"}) for i in range(5)]
                + [cluster(f"it{i}", labels={"location": "IT", "tier": "gold"}) for i in range(2)]
                + [cluster("de", labels={"location": "DE", "tier": "gold"})]
                + [cluster(f"de-low{i}", labels={"location": "DE", "tier": "bronze"})
                   for i in range(3)]
                + [cluster("it-low", labels={"location": "IT", "tier": "silver"})])
    snap = FakeSnapshot(clusters)
    fw = Framework(SchedulerConfig(), REGISTRY, {})
    subject = app(label_constraints=("location in (DE, IT)", "tier != bronze",
                                     "tier != silver"))
    decision = decide(fw, subject, snap, [])
    assert isinstance(decision, Decision)
    rejected = [e for e in decision.explained(fw, snap, 3) if "rejected_by" in e]
    assert rejected == [
        {"rejected_by": "LabelConstraints", "reason": "label constraint 'tier != bronze'",
         "count": 3, "candidates": ["Cluster/default/de-low0", "Cluster/default/de-low1",
                                    "Cluster/default/de-low2"]},
        {"rejected_by": "LabelConstraints", "reason": "label constraint 'tier != silver'",
         "count": 1, "candidates": ["Cluster/default/it-low"]},
    ]
    assert decision.reason == ("3/12 clusters are available: 5 label constraint "
                               "'location in (DE, IT)', 3 label constraint 'tier != bronze', "
                               "1 label constraint 'tier != silver'")
    one = [e for e in decision.explained(fw, snap, 1) if "rejected_by" in e]
    assert one == rejected[:1]


def test_standing_is_each_candidates_place_by_the_scores_no_subject_changes() -> None:
    """What a sweep orders by: each candidate's place in the fleet by the metric scores,
    from the entry decisions read; ``read`` only if one did (the fleet before a change
    must not be ranked by the values after it)."""
    snap = FakeSnapshot([cluster(n, metrics={"m": 1.0}) for n in ("a", "b", "c", "d")],
                        {("a", "m"): 0.2, ("b", "m"): 0.9, ("c", "m"): 0.5})
    fw = Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})
    fleet = snap.fleet(app())
    assert fw.standing(fleet, snap, read=True) == {}  # no decision read this fleet yet
    state = CycleState(fleet=fleet)
    assert fw.pre_filter(state, app(), snap).ok
    assert fw.evaluate(state, app(), snap).ranked[0].candidate.ref.name == "b"
    # d has no value: without metrics, a lower tier than every cluster with them
    assert fw.standing(fleet, snap, read=True) == {
        "Cluster/default/b": 0, "Cluster/default/c": 1, "Cluster/default/a": 2,
        "Cluster/default/d": 3}
    unscored = SchedulerConfig(plugins={"filter": [], "score": []})
    assert Framework(unscored, REGISTRY).standing(fleet, snap) == {}
