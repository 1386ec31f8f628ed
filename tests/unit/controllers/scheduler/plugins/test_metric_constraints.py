"""MetricConstraints: Krake's metric constraints compare the raw value; a cluster
without the metric fails them."""

from __future__ import annotations

import pytest

from berth.controllers.scheduler.framework import MetricReading
from berth_testkit.fakes.scheduler import HEAT, FakeSnapshot, app, cluster, evaluate


@pytest.mark.parametrize(
    ("raw", "normalized", "constraint", "fits"),
    [(3.0, 0.6, "heat < 4", True), (5.0, 1.0, "heat < 4", False),
     (3.0, 0.6, "heat >= 3", True), (3.0, 0.6, "heat gt 0.7", True)],
)
def test_metric_constraints_compare_the_raw_value(raw: float, normalized: float,
                                                  constraint: str, fits: bool) -> None:
    snap = FakeSnapshot([cluster("a", metrics=HEAT)],
                        {("a", "heat"): MetricReading("heat", 1, raw, normalized)})
    assert evaluate(snap, app(metric_constraints=(constraint,)))[1] == (["a"] if fits else [])


def test_a_metric_constraint_fails_a_cluster_without_that_metric() -> None:
    snap = FakeSnapshot([cluster("a")])
    ev, chosen = evaluate(snap, app(metric_constraints=("heat < 4",)))
    assert chosen == []
    assert "no metric heat" in ev.rejected["Cluster/default/a"].reason
