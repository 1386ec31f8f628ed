"""Placement policies, taints, selectors and cluster affinity (seeds 001, 003)."""

from __future__ import annotations

import msgspec
import pytest

from controllers.scheduler.config import SchedulerConfig, load_config
from controllers.scheduler.framework import Framework
from controllers.scheduler.plugins import REGISTRY
from store.documents import Affinity, Placement, Taint, Toleration
from tests.unit.scheduler.fake import FakeSnapshot, app, cluster, evaluate

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
    from controllers.scheduler.selection import select

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
    original = online.filter

    def counting(*args: object) -> object:
        nonlocal calls
        calls += 1
        return original(*args)  # type: ignore[arg-type]

    online.filter = counting  # type: ignore[method-assign]
    from controllers.scheduler.framework import CycleState
    snap = ranked_fleet()
    for i in range(50):
        subject = app(f"app{i}")
        subject.signature = b"same"
        state = CycleState()
        fw.pre_filter(state, subject, snap)
        fw.evaluate(state, subject, snap)
    assert calls == 5  # one pass over five clusters, not fifty


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
