"""Deferrable work: the cheapest (cluster, start) before the deadline, through decide()."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from berth.bootstrap.load import Invalid, to_document
from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, Deferral, Deferred, NoFit, decide
from berth.controllers.scheduler.framework import Framework, MetricReading
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store.documents import ForecastPoint, Placement, Target
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster

T0 = 1_800_000_000.0  # "now" in these tests
HOUR = 3600.0
DEFER = Deferral(margin=60.0, min_saving=0.05)


def at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def price(name: str, now: float, later: list[tuple[float, float]],
          measures: str = "") -> MetricReading:
    """A price metric: ``now`` now, then (hours from T0, value) points."""
    return MetricReading(name, 1.0, now, 0.5, measures=measures,
                         forecast=[ForecastPoint(at(T0 + h * HOUR), v) for h, v in later])


def framework() -> Framework:
    return Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})


def job(hours: float = 6.0, metric: str = "price", **kw: object):
    return app(placement=Placement(start_before=at(T0 + hours * HOUR), cost_metric=metric),
               created=T0, **kw)


def snapshot() -> FakeSnapshot:
    # de: 80 now, 30 in 3 h, 20 in 8 h (after the deadline); fr: 50 now, 40 in 1 h
    snap = FakeSnapshot([cluster("de", metrics={"price-de": 1.0}),
                         cluster("fr", metrics={"price-fr": 1.0}),
                         cluster("pl")])  # no cost metric
    snap.values[("de", "price-de")] = price("price-de", 80, [(3, 30), (8, 20)], "price")
    snap.values[("fr", "price-fr")] = price("price-fr", 50, [(1, 40)], "price")
    return snap


def test_waits_for_the_cheapest_start_before_the_deadline() -> None:
    out = decide(framework(), job(), snapshot(), [], defer=DEFER, now=T0)
    assert isinstance(out, Deferred), out
    assert out.start == T0 + 3 * HOUR  # de at 30, not the 20 that comes after the deadline
    assert out.plan.at is not None and out.plan.at.candidate.ref.name == "de"
    assert out.plan.cost == 30 and out.plan.cost_now == 50
    assert out.reason.startswith("deferred until ")
    assert "on de" in out.reason


def test_at_the_start_it_is_placed_where_it_is_cheapest_then() -> None:
    out = decide(framework(), job(), snapshot(), [], defer=DEFER, now=T0 + 3 * HOUR)
    assert isinstance(out, Decision), out
    assert [t.name for t in out.targets] == ["de"]


def test_never_later_than_the_deadline_less_the_margin() -> None:
    # 59 s before the deadline the margin (60 s) has passed: it starts now, where cheapest now
    out = decide(framework(), job(hours=1.0), snapshot(), [], defer=DEFER,
                 now=T0 + HOUR - 59)
    assert isinstance(out, Decision)
    assert [t.name for t in out.targets] == ["fr"]
    # a deadline already past: now, too
    out = decide(framework(), job(hours=-1.0), snapshot(), [], defer=DEFER, now=T0)
    assert isinstance(out, Decision)


def test_a_small_saving_is_not_worth_a_wait() -> None:
    snap = snapshot()
    snap.values[("de", "price-de")] = price("price-de", 80, [], "price")
    snap.values[("fr", "price-fr")] = price("price-fr", 50, [(1, 48)], "price")  # 4 % less
    out = decide(framework(), job(), snap, [], defer=DEFER, now=T0)
    assert isinstance(out, Decision)
    assert [t.name for t in out.targets] == ["fr"]  # the cheapest now


def test_started_work_is_not_deferred_again() -> None:
    out = decide(framework(), job(), snapshot(), [Target("Cluster", "fr", "default")],
                 defer=DEFER, now=T0)
    assert isinstance(out, Decision)


def test_without_costs_it_waits_for_values_until_its_latest_start() -> None:
    snap = snapshot()
    out = decide(framework(), job(metric="carbon"), snap, [], defer=DEFER, now=T0)
    assert isinstance(out, Deferred) and out.start == T0 + 6 * HOUR - 60
    assert "no feasible cluster has a value of carbon yet" in out.reason
    out = decide(framework(), job(metric="carbon"), snap, [], defer=DEFER,
                 now=T0 + 6 * HOUR - 60)
    assert isinstance(out, Decision)  # then it starts, costs or not


def test_max_delay_counts_from_creation_and_needs_it() -> None:
    late = app(placement=Placement(max_delay="6h", cost_metric="price"), created=T0)
    out = decide(framework(), late, snapshot(), [], defer=DEFER, now=T0)
    assert isinstance(out, Deferred) and out.start == T0 + 3 * HOUR
    unknown = app(placement=Placement(max_delay="6h", cost_metric="price"))  # no creation time
    assert isinstance(decide(framework(), unknown, snapshot(), [], defer=DEFER, now=T0),
                      Decision)


def test_only_feasible_clusters_are_waited_for() -> None:
    snap = snapshot()
    out = decide(framework(), job(cluster_selector={"zone": "fr"}), snap, [], defer=DEFER,
                 now=T0)
    assert isinstance(out, NoFit)  # nothing carries the label: nothing to wait for either
    snap.clusters[1] = cluster("fr", labels={"zone": "fr"}, metrics={"price-fr": 1.0})
    out = decide(framework(), job(cluster_selector={"zone": "fr"}), snap, [], defer=DEFER,
                 now=T0)
    assert isinstance(out, Deferred) and out.start == T0 + HOUR  # fr's own drop


@pytest.mark.parametrize(("placement", "field", "says"), [
    ({"maxDelay": "8h"}, "spec.placement.costMetric", "needs the metric"),
    ({"costMetric": "price"}, "spec.placement.costMetric", "needs startBefore or maxDelay"),
    ({"maxDelay": "8 hours", "costMetric": "p"}, "spec.placement.maxDelay", "not a duration"),
    ({"maxDelay": "8h", "startBefore": "2026-11-24T06:00:00Z", "costMetric": "p"},
     "spec.placement.maxDelay", "not both"),
    ({"startBefore": "2026-11-24T06:00:00", "costMetric": "p"}, "spec.placement.startBefore",
     "time zone"),
])
def test_bad_deferral_fields_are_named(placement: dict[str, object], field: str,
                                       says: str) -> None:
    doc = {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": "a", "namespace": "default"},
           "spec": {"manifest": [], "placement": placement}}
    with pytest.raises(Invalid) as caught:
        to_document("a.yaml", doc)
    assert f"a.yaml {field}: " in str(caught.value) and says in str(caught.value), caught.value
