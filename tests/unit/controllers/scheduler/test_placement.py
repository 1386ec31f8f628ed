"""Placement policies, taints, selectors and cluster affinity (Crossplane's workload scheduler, Fleet's placement)."""

from __future__ import annotations

import msgspec
import pytest

from berth.controllers.scheduler.config import SchedulerConfig, load_config
from berth.controllers.scheduler.framework import CycleState, Framework
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store.documents import Affinity, Placement, Taint, Toleration
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate

M = {"heat": 1.0}


def ranked_fleet(n: int = 5) -> FakeSnapshot:
    """Clusters c0..c{n-1}, c0 the best."""
    return FakeSnapshot([cluster(f"c{i}", metrics=M) for i in range(n)],
                        {(f"c{i}", "heat"): 1.0 - i / 10 for i in range(n)})


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


@pytest.mark.parametrize(
    ("effect", "tolerations", "fits"),
    [
        ("NoSchedule", [], False),
        ("NoExecute", [], False),
        ("NoSchedule", [Toleration(key="gpu", operator="Exists")], True),
        ("NoSchedule", [Toleration(key="gpu", value="yes")], True),
        ("NoSchedule", [Toleration(key="gpu", value="no")], False),
        ("NoSchedule", [Toleration(key="gpu", operator="Exists", effect="NoExecute")], False),
        ("NoExecute", [Toleration(operator="Exists")], True),
    ],
)
def test_taints_and_tolerations(effect: str, tolerations: list[Toleration], fits: bool) -> None:
    snap = FakeSnapshot([cluster("t", taints=(Taint("gpu", effect, "yes"),))])  # type: ignore[arg-type]
    assert evaluate(snap, app(tolerations=tuple(tolerations)))[1] == (["t"] if fits else [])


def test_prefer_no_schedule_steers_away_without_rejecting() -> None:
    tainted = cluster("tainted", taints=(Taint("maint", "PreferNoSchedule"),))
    snap = FakeSnapshot([tainted, cluster("clean")])
    ev, chosen = evaluate(snap, app())
    assert chosen == ["clean"] and len(ev.ranked) == 2
    only = FakeSnapshot([cluster("tainted", taints=(Taint("maint", "PreferNoSchedule"),))])
    assert evaluate(only, app())[1] == ["tainted"]


def affinity(required: list[dict[str, object]] | None = None,
             preferred: list[dict[str, object]] | None = None) -> Affinity:
    body: dict[str, object] = {}
    if required is not None:
        body["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "clusterSelectorTerms": required}
    if preferred is not None:
        body["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return msgspec.convert({"clusterAffinity": body}, Affinity)


FLEET = FakeSnapshot([
    cluster("aws-1", labels={"provider": "aws", "cpus": "8"}),
    cluster("gcp-1", labels={"provider": "gcp", "cpus": "32"}),
    cluster("bare", labels={}),
])


@pytest.mark.parametrize(
    ("terms", "names"),
    [
        ([{"matchExpressions": [{"key": "provider", "operator": "In", "values": ["aws"]}]}],
         {"aws-1"}),
        ([{"matchExpressions": [{"key": "provider", "operator": "NotIn", "values": ["aws"]}]}],
         {"gcp-1", "bare"}),
        ([{"matchExpressions": [{"key": "provider", "operator": "Exists"}]}], {"aws-1", "gcp-1"}),
        ([{"matchExpressions": [{"key": "provider", "operator": "DoesNotExist"}]}], {"bare"}),
        ([{"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["16"]}]}],
         {"gcp-1"}),
        ([{"matchExpressions": [{"key": "cpus", "operator": "Lt", "values": ["16"]}]}],
         {"aws-1"}),
        ([{"matchLabels": {"provider": "gcp"}},
          {"matchExpressions": [{"key": "provider", "operator": "DoesNotExist"}]}],
         {"gcp-1", "bare"}),  # terms are ORed
    ],
)
def test_required_cluster_affinity(terms: list[dict[str, object]], names: set[str]) -> None:
    ev, _ = evaluate(FLEET, app(affinity=affinity(required=terms),
                                placement=Placement(policy="PickAll")))
    assert {r.candidate.ref.name for r in ev.ranked} == names


def test_preferred_cluster_affinity_ranks() -> None:
    pref = [{"weight": 1, "preference": {"matchLabels": {"provider": "aws"}}},
            {"weight": 3, "preference": {"matchExpressions": [
                {"key": "cpus", "operator": "Gt", "values": ["16"]}]}}]
    ev, chosen = evaluate(FLEET, app(affinity=affinity(preferred=pref)))
    assert chosen == ["gcp-1"]
    assert {r.candidate.ref.name: r.score for r in ev.ranked} == pytest.approx(
        {"gcp-1": 0.75, "aws-1": 0.25, "bare": 0.0})


def test_cluster_selector() -> None:
    assert evaluate(FLEET, app(cluster_selector={"provider": "aws"}))[1] == ["aws-1"]


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


def workload_affinity(kind: str, required: list[dict[str, object]] | None = None,
                      preferred: list[dict[str, object]] | None = None) -> Affinity:
    body: dict[str, object] = {}
    if required is not None:
        body["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if preferred is not None:
        body["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return msgspec.convert({kind: body}, Affinity)


def zoned() -> FakeSnapshot:
    from berth.controllers.scheduler.framework import Placed, Ref

    snap = FakeSnapshot([cluster("a1", labels={"zone": "a"}), cluster("a2", labels={"zone": "a"}),
                         cluster("b1", labels={"zone": "b"}), cluster("nozone")])
    snap.others = [Placed(Ref("Application", "default", "backend"), {"app": "backend"},
                          (Ref("Cluster", "default", "a1"),))]
    return snap


BACKEND = {"labelSelector": {"matchLabels": {"app": "backend"}}, "topologyKey": "zone"}


def test_required_workload_affinity_follows_the_backend_into_its_zone() -> None:
    ev, _ = evaluate(zoned(), app(affinity=workload_affinity("workloadAffinity", [BACKEND]),
                                  placement=Placement(policy="PickAll")))
    assert {r.candidate.ref.name for r in ev.ranked} == {"a1", "a2"}


def test_required_workload_anti_affinity_avoids_the_backends_zone() -> None:
    ev, _ = evaluate(zoned(), app(affinity=workload_affinity("workloadAntiAffinity", [BACKEND]),
                                  placement=Placement(policy="PickAll")))
    assert {r.candidate.ref.name for r in ev.ranked} == {"b1", "nozone"}


def test_the_first_of_a_group_may_land_anywhere() -> None:
    snap = zoned()
    snap.others = []
    me = app(labels={"app": "backend"}, placement=Placement(policy="PickAll"),
             affinity=workload_affinity("workloadAffinity", [BACKEND]))
    ev, _ = evaluate(snap, me)
    assert {r.candidate.ref.name for r in ev.ranked} == {"a1", "a2", "b1"}  # not "nozone"


def test_preferred_workload_affinity_and_anti_affinity_score() -> None:
    pref = [{"weight": 2, "workloadAffinityTerm": BACKEND}]
    _, chosen = evaluate(zoned(), app(affinity=workload_affinity("workloadAffinity", preferred=pref)))
    assert chosen[0] in ("a1", "a2")
    ev, _ = evaluate(zoned(), app(affinity=workload_affinity("workloadAntiAffinity",
                                                             preferred=pref)))
    assert ev.ranked[-1].candidate.labels.get("zone") == "a"
    assert ev.ranked[-1].score == pytest.approx(-1.0)


def spread(policy: Placement) -> list[str]:
    snap = FakeSnapshot(
        [cluster(f"{z}{i}", labels={"region": z}, metrics=M) for z in "ab" for i in range(3)]
        + [cluster("c0", labels={"region": "c"}, metrics=M), cluster("none", metrics=M)],
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
        [cluster(f"{z}{i:03d}", labels={"region": z}, metrics=M) for z in "abc"
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
        [cluster(f"{z}{i}", labels={"region": z}, metrics=M) for z in "ab" for i in range(3)],
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


def test_percentage_of_clusters_to_score_stops_filtering_early() -> None:
    big = FakeSnapshot([cluster(f"c{i:03d}") for i in range(400)])
    ev, _ = evaluate(big, app(), SchedulerConfig(percentage_of_clusters_to_score=50))
    assert len(ev.ranked) == 200  # max(100, 400 x 50%)
    ev, _ = evaluate(big, app(), SchedulerConfig(percentage_of_clusters_to_score=10))
    assert len(ev.ranked) == 100  # never fewer than 100 (the Kubernetes scheduler)
    ev, _ = evaluate(big, app())
    assert len(ev.ranked) == 400


def test_a_cluster_the_application_failed_on_is_avoided_for_the_backoff() -> None:
    import time

    snap = ranked_fleet()
    subject = app()
    snap.failures["app"] = {"Cluster/default/c0": time.time() - 60}  # a minute ago
    ev, chosen = evaluate(snap, subject)
    assert chosen == ["c1"]
    why = [status.reason for status, bits in ev.rejections
           if "c0" in [c.ref.name for c in ev.fleet.select(bits)]]
    assert len(why) == 1 and why[0].startswith("could not become available here in time")
    config = load_config(None)
    config.plugins["filter"] = [p if p.name != "FailedTargets" else msgspec.structs.replace(
        p, args={"backoff": 30}) for p in config.plugins["filter"]]
    config.plugins["preFilter"] = [p if p.name != "FailedTargets" else msgspec.structs.replace(
        p, args={"backoff": 30}) for p in config.plugins["preFilter"]]
    assert evaluate(snap, subject, config)[1] == ["c0"]  # the backoff is over


def test_failed_targets_has_a_set_form_that_agrees() -> None:
    import time

    from berth.controllers.scheduler.framework import CycleState
    from berth.controllers.scheduler.plugins.failed_targets import FailedTargets

    snap = ranked_fleet()
    subject = app()
    snap.failures["app"] = {"Cluster/default/c2": time.time(), "Cluster/default/gone": 0.0}
    plugin, state = FailedTargets(), CycleState()
    assert plugin.pre_filter(state, subject, snap).ok
    fleet = snap.fleet(subject)
    rejected = [(status.reasons, fleet.select(bits)) for status, bits in
                plugin.filter_set(state, subject, fleet, (1 << len(fleet)) - 1, snap)]
    per_candidate = [c for c in fleet.select((1 << len(fleet)) - 1)
                     if not plugin.filter(state, subject, c, snap).ok]
    assert [c.ref.name for _, cs in rejected for c in cs] == [c.ref.name for c in per_candidate]
    assert [c.ref.name for c in per_candidate] == ["c2"]
    with pytest.raises(ValueError, match="backoff"):
        FailedTargets({"backoff": "soon"})


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
