"""MetricScore: Krake's scheduler's metric scoring and stickiness, table by table (the
cases of its own tests)."""

from __future__ import annotations

from collections import Counter

import pytest

from berth.controllers.scheduler.framework import MetricReading
from berth_testkit.fakes.scheduler import HEAT, FakeSnapshot, app, cluster, evaluate


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
    snap = FakeSnapshot([cluster("a", metrics=HEAT), cluster("b", metrics=HEAT)],
                        {(c, "heat"): v for c, v in values.items()}, {"app": on})
    got = scores(snap)
    assert got == pytest.approx(expected)
    assert evaluate(snap, app())[1] == [winner]


def test_the_formula_weights_several_metrics() -> None:
    snap = FakeSnapshot([cluster("a", metrics={"heat": 0.45, "cost": 0.55})],
                        {("a", "heat"): 0.9, ("a", "cost"): 0.1}, {"app": ["a"]})
    assert scores(snap)["a"] == pytest.approx((0.1 + 0.9 * 0.45 + 0.1 * 0.55) / (0.1 + 1.0))


def test_stickiness_tips_a_tie() -> None:
    snap = FakeSnapshot([cluster("a", metrics=HEAT), cluster("b", metrics=HEAT)],
                        {("a", "heat"): 0.5, ("b", "heat"): 0.5}, {"app": ["b"]})
    assert all(evaluate(snap, app())[1] == ["b"] for _ in range(20))


def test_ties_are_broken_at_random() -> None:
    snap = FakeSnapshot([cluster("a", metrics=HEAT), cluster("b", metrics=HEAT)],
                        {("a", "heat"): 0.5, ("b", "heat"): 0.5})
    picks = Counter(evaluate(snap, app())[1][0] for _ in range(200))
    assert set(picks) == {"a", "b"} and min(picks.values()) > 40


def test_clusters_with_metrics_are_preferred() -> None:
    snap = FakeSnapshot([cluster("bare"), cluster("measured", metrics=HEAT)],
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
    snap = FakeSnapshot([cluster("broken", metrics=HEAT), cluster("good", metrics=HEAT)], values,
                        {"app": ["broken"]})
    ev, chosen = evaluate(snap, app())
    assert chosen == ["good"]
    broken = next(r for r in ev.ranked if r.candidate.ref.name == "broken")
    assert broken.tier == 0 and broken.score == pytest.approx(0.1)
