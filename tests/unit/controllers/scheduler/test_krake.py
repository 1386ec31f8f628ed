"""Seed 000's behaviour, table by table: filtering, metric scoring, stickiness."""

from __future__ import annotations

from collections import Counter

import pytest

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.framework import Code, Framework, MetricReading
from berth.controllers.scheduler.framework.selection import summary
from berth.controllers.scheduler.plugins import REGISTRY
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate

M = {"heat": 1.0}  # one metric, weight 1


def scores(snapshot: FakeSnapshot, **kw: object) -> dict[str, float]:
    ev, _ = evaluate(snapshot, app(**kw))
    return {r.candidate.ref.name: r.score for r in ev.ranked}


@pytest.mark.parametrize(
    ("values", "on", "expected", "winner"),
    [
        # Krake's scheduler: two clusters at 0.75, app on A
        ({"a": 0.75, "b": 0.75}, ["a"], {"a": (0.75 + 0.1) / 1.1, "b": 0.75}, "a"),
        # metrics beat stickiness: B is better by more than the stickiness
        ({"a": 0.5, "b": 0.9}, ["a"], {"a": (0.5 + 0.1) / 1.1, "b": 0.9}, "b"),
        # stickiness holds against a smaller improvement
        ({"a": 0.70, "b": 0.72}, ["a"], {"a": (0.70 + 0.1) / 1.1, "b": 0.72}, "a"),
        # not yet placed: the best metric wins
        ({"a": 0.2, "b": 0.3}, [], {"a": 0.2, "b": 0.3}, "b"),
    ],
)
def test_metric_scoring_with_stickiness(values: dict[str, float], on: list[str],
                                        expected: dict[str, float], winner: str) -> None:
    snap = FakeSnapshot([cluster("a", metrics=M), cluster("b", metrics=M)],
                        {(c, "heat"): v for c, v in values.items()}, {"app": on})
    got = scores(snap)
    assert got == pytest.approx(expected)
    assert evaluate(snap, app())[1] == [winner]


def test_the_formula_weights_several_metrics() -> None:
    snap = FakeSnapshot([cluster("a", metrics={"heat": 0.45, "cost": 0.55})],
                        {("a", "heat"): 0.9, ("a", "cost"): 0.1}, {"app": ["a"]})
    assert scores(snap)["a"] == pytest.approx((0.1 + 0.9 * 0.45 + 0.1 * 0.55) / (0.1 + 1.0))


def test_stickiness_tips_a_tie() -> None:
    snap = FakeSnapshot([cluster("a", metrics=M), cluster("b", metrics=M)],
                        {("a", "heat"): 0.5, ("b", "heat"): 0.5}, {"app": ["b"]})
    assert all(evaluate(snap, app())[1] == ["b"] for _ in range(20))


def test_ties_are_broken_at_random() -> None:
    snap = FakeSnapshot([cluster("a", metrics=M), cluster("b", metrics=M)],
                        {("a", "heat"): 0.5, ("b", "heat"): 0.5})
    picks = Counter(evaluate(snap, app())[1][0] for _ in range(200))
    assert set(picks) == {"a", "b"} and min(picks.values()) > 40


def test_clusters_with_metrics_are_preferred() -> None:
    snap = FakeSnapshot([cluster("bare"), cluster("measured", metrics=M)],
                        {("measured", "heat"): 0.01}, {"app": ["bare"]})
    assert evaluate(snap, app())[1] == ["measured"]


def test_without_any_metrics_only_stickiness_scores() -> None:
    snap = FakeSnapshot([cluster("a"), cluster("b")], targets={"app": ["a"]})
    assert scores(snap) == pytest.approx({"a": 0.1, "b": 0.0})
    assert evaluate(snap, app())[1] == ["a"]


@pytest.mark.parametrize(
    "reading",
    [None,  # missing: expired, or the metrics-cache is down
     MetricReading("heat", 1.0, reason="UNREACHABLE_METRICS_PROVIDER"),
     MetricReading("heat", 1.0, value=3.0, reason="INVALID_METRIC", message="min == max")],
)
def test_a_cluster_with_unusable_metrics_counts_as_without(reading: MetricReading | None) -> None:
    values: dict[tuple[str, str], MetricReading | float] = {("good", "heat"): 0.2}
    if reading is not None:
        values[("broken", "heat")] = reading
    snap = FakeSnapshot([cluster("broken", metrics=M), cluster("good", metrics=M)], values,
                        {"app": ["broken"]})
    ev, chosen = evaluate(snap, app())
    assert chosen == ["good"]
    broken = next(r for r in ev.ranked if r.candidate.ref.name == "broken")
    assert broken.tier == 0 and broken.score == pytest.approx(0.1)


def test_offline_deleted_and_foreign_clusters_are_never_chosen() -> None:
    other_ns = cluster("elsewhere")
    other_ns.ref = type(other_ns.ref)("Cluster", "other", "elsewhere")
    snap = FakeSnapshot([cluster("down", state="OFFLINE"), cluster("new", state=""),
                         cluster("gone", deleted=True), other_ns, cluster("ok")])
    ev, chosen = evaluate(snap, app())
    assert chosen == ["ok"]
    assert {k: s.reason for k, s in ev.rejected.items()} == {
        "Cluster/default/down": "not ONLINE (OFFLINE)",
        "Cluster/default/new": "not ONLINE (no status)",
        "Cluster/default/gone": "deleted",
    }
    assert ev.considered == 4


def test_label_constraints_filter_and_explain() -> None:
    snap = FakeSnapshot([cluster("de", labels={"location": "DE"}),
                         cluster("fr", labels={"location": "FR"}), cluster("nolabel")])
    ev, chosen = evaluate(snap, app(label_constraints=("location is not FR",)))
    assert chosen == ["de"]  # the unlabelled cluster fails "is not" too
    assert summary("Cluster", ev) == (
        "1/3 clusters are available: 2 label constraint 'location != FR'")


@pytest.mark.parametrize(
    ("raw", "normalized", "constraint", "fits"),
    [(3.0, 0.6, "heat < 4", True), (5.0, 1.0, "heat < 4", False),
     (3.0, 0.6, "heat >= 3", True), (3.0, 0.6, "heat gt 0.7", True)],
)
def test_metric_constraints_compare_the_raw_value(raw: float, normalized: float,
                                                  constraint: str, fits: bool) -> None:
    snap = FakeSnapshot([cluster("a", metrics=M)],
                        {("a", "heat"): MetricReading("heat", 1, raw, normalized)})
    assert evaluate(snap, app(metric_constraints=(constraint,)))[1] == (["a"] if fits else [])


def test_a_metric_constraint_fails_a_cluster_without_that_metric() -> None:
    snap = FakeSnapshot([cluster("a")])
    ev, chosen = evaluate(snap, app(metric_constraints=("heat < 4",)))
    assert chosen == []
    assert "no metric heat" in ev.rejected["Cluster/default/a"].reason


def test_an_invalid_expression_is_a_reason_not_a_crash() -> None:
    ev, chosen = evaluate(FakeSnapshot([cluster("a")]), app(label_constraints=("location iz DE",)))
    assert chosen == []
    status = ev.error
    assert status is not None
    assert status.code is Code.UNRESOLVABLE and status.plugin == "LabelConstraints"
    assert "cannot parse 'location iz DE'" in status.reason


def test_custom_resources_must_all_be_served() -> None:
    snap = FakeSnapshot([cluster("a", custom_resources=frozenset({"crontabs.stable.example.com"})),
                         cluster("b")])
    assert evaluate(snap, app(custom_resources=("crontabs.stable.example.com",)))[1] == ["a"]


def test_only_a_subject_new_metric_values_can_help_is_tried_again_on_them() -> None:
    """The queueing hint for a metric picture (Framework.metric_blind): a subject that
    only filters which never read metric values rejected everywhere cannot fit on new
    values; one a metric constraint rejected anywhere can."""
    snap = FakeSnapshot([cluster("a", labels={"location": "DE"}, metrics={"heat": 1.0}),
                         cluster("b", labels={"location": "FR"}, metrics={"heat": 1.0})],
                        values={("a", "heat"): 9.0, ("b", "heat"): 9.0})
    fw = Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})
    labels, _ = evaluate(snap, app(label_constraints=("location is PL",)))
    assert not labels.feasible and fw.metric_blind(labels)
    heat, _ = evaluate(snap, app(metric_constraints=("heat < 4",)))
    assert not heat.feasible and not fw.metric_blind(heat)
    both, _ = evaluate(snap, app(label_constraints=("location is DE",),
                                 metric_constraints=("heat < 4",)))  # b by label, a by heat
    assert not both.feasible and not fw.metric_blind(both)
    fits, chosen = evaluate(snap, app(label_constraints=("location is DE",)))
    assert chosen == ["a"] and not fw.metric_blind(fits)
    assert not fw.metric_blind(None)  # pre-filter refused it: tried again on any change
