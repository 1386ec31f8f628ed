"""Providers ask for many metrics per request. The Prometheus provider's tagged
chunks answer exactly what one query per metric answers, against the real
Prometheus: plain names, functions, aggregations, expressions yielding no series
or several, scalars, range vectors, comments, and expressions Prometheus refuses at
parse time or while executing. The KSQL provider splits its pull query the same way
(against the suite's protocol-level ksqlDB server).
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator

import pytest

from berth.controllers.metrics_cache.providers.base import Failure, Forecasted, Reading
from berth.controllers.metrics_cache.providers.ksql import KsqlProvider
from berth.controllers.metrics_cache.providers.prometheus import QUERIES, PrometheusProvider
from berth.store.documents.metrics import KsqlSpec, PrometheusForecast, PrometheusSpec
from berth_testkit.servers.ksql import KsqlServer
from berth_testkit.servers.prometheus import PrometheusServer
from berth_testkit.servers.serving import serving

MIX = [
    "load",                                   # a plain name
    "avg_over_time(load[1m])",                # a function over a range
    "sum by (job) (temp)",                    # an aggregation to one series
    "sum(temp)",
    "temp",                                   # two series: INVALID_METRIC
    "absent_metric_name",                     # no series: UNKNOWN_METRIC
    "temp{room=\"b\"}",                       # a selector with a quoted label value
    "load * 2 > 100",                         # a filter that leaves nothing
    "scalar(load)",                           # a scalar cannot be tagged: asked alone
    "1 + 2",
    "vector(3)",
    "load[1m]",                               # a range vector: INVALID_METRIC
    "rate(load[",                             # a parse error: INVALID_METRIC
    "temp + on() temp",                       # an execution error (many-to-many)
    "noise",                                  # NaN: INVALID_METRIC
    "load # a comment that would swallow the rest of a line",
    'label_replace(load, "berth_q", "x", "", "")',  # the tag's own label, overwritten
    "load or temp",                           # several series again
]


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusServer]:
    yield from serving(lambda: PrometheusServer())


@pytest.fixture(scope="module")
def loaded(prometheus: PrometheusServer) -> PrometheusServer:
    values: dict[str, float | str] = {"load": 2.5, "noise": "NaN", 'temp{room="a"}': 20.0,
                                      'temp{room="b"}': 22.0}
    values |= {f"fleet_{i:04d}": float(i) for i in range(600)}
    prometheus.push(**values)
    prometheus.wait_value("fleet_0599", 599.0)
    prometheus.wait_value('temp{room="b"}', 22.0)
    prometheus.wait_value("load", 2.5)
    return prometheus


def one_by_one(provider: PrometheusProvider, expressions: list[str]) -> dict[str, Reading]:
    return {e: provider._single(e)[0] for e in expressions}  # each asked as written


def same(batched: dict[str, Reading], single: dict[str, Reading]) -> None:
    assert batched.keys() == single.keys()
    for e, want in single.items():
        got = batched[e]
        if isinstance(want, Failure):
            assert isinstance(got, Failure) and (got.reason, got.message) == (
                want.reason, want.message), e
        else:
            assert got == pytest.approx(want), e


def test_a_mix_of_expressions_is_answered_as_one_query_each_would(
    loaded: PrometheusServer
) -> None:
    provider = PrometheusProvider(PrometheusSpec(loaded.url))
    try:
        single = one_by_one(provider, MIX)
        reasons = {e: r.reason if isinstance(r, Failure) else "value" for e, r in single.items()}
        assert reasons["load"] == "value" and single["load"] == 2.5
        assert reasons["temp"] == "INVALID_METRIC" and reasons["noise"] == "INVALID_METRIC"
        assert reasons["absent_metric_name"] == "UNKNOWN_METRIC"
        assert reasons["rate(load["] == "INVALID_METRIC"
        assert reasons["temp + on() temp"] == "INVALID_METRIC"
        assert single["scalar(load)"] == 2.5 and single["1 + 2"] == 3.0

        before = QUERIES._value.get()
        same(dict(provider.fetch(MIX)), single)
        first = QUERIES._value.get() - before
        # the refused expressions were found by halving, and are asked alone from now on
        before = QUERIES._value.get()
        same(dict(provider.fetch(MIX)), single)
        second = QUERIES._value.get() - before
        alone = {"scalar(load)", "1 + 2", "load[1m]", "rate(load[", "temp + on() temp"}
        assert provider._alone == alone
        assert second == 1 + len(alone) < first
    finally:
        provider.close()


def test_many_metrics_in_several_chunks_with_bad_ones_among_them(
    loaded: PrometheusServer
) -> None:
    rng = random.Random(7)
    expressions = [f"fleet_{i:04d}" for i in range(600)]
    expressions += [f"max_over_time(fleet_{i:04d}[30s])" for i in range(0, 600, 7)]
    expressions += ["rate(fleet_0001[", "scalar(fleet_0002)", "fleet_9999", "temp"]
    rng.shuffle(expressions)
    provider = PrometheusProvider(PrometheusSpec(loaded.url), batch=100)
    try:
        single = one_by_one(provider, expressions)
        before = QUERIES._value.get()
        batched = dict(provider.fetch(expressions))
        same(batched, single)
        assert batched["fleet_0042"] == 42.0
        assert QUERIES._value.get() - before < 60  # against 690 one by one
        provider.fetch(expressions)  # only the two untaggable ones are asked alone now
        assert provider._alone == {"rate(fleet_0001[", "scalar(fleet_0002)"}
    finally:
        provider.close()


def test_ksql_pull_queries_are_chunked() -> None:
    ksql = KsqlServer()
    names = [f"heat_{i}" for i in range(1, 1201)] + ["it's", "missing"]
    ksql.tables["energy"] = {n: float(i) for i, n in enumerate(names[:-1])}
    provider = KsqlProvider(KsqlSpec(url=ksql.url, table="energy",
                                     comparison_column="metric_name", value_column="value"))
    try:
        got = provider.fetch(names)
        assert len(ksql.statements) == 7  # 200 names per pull query
        assert got["heat_1"] == 0.0 and got["heat_1200"] == 1199.0 and got["it's"] == 1200.0
        assert isinstance(got["missing"], Failure) and got["missing"].reason == "UNKNOWN_METRIC"
    finally:
        provider.close()
        ksql.close()


def test_a_forecast_by_persistence_comes_from_range_data(loaded: PrometheusServer) -> None:
    """The values one period ago, moved forward by the period, in one range query per
    chunk: what the metric was 10 s ago is its forecast for the next 10 s."""
    time.sleep(11)  # a period of history
    spec = PrometheusSpec(url=loaded.url, forecast=PrometheusForecast(
        period="10s", horizon="10s", step="2s"))
    provider = PrometheusProvider(spec)
    try:
        now = time.time()
        asking = ["fleet_0007", "load", "temp", "scalar(load)", "nothing_here"]
        found = provider.fetch(asking)  # finds that the scalar must be asked alone
        before = QUERIES._value.get()
        again = provider.fetch(asking)
        asked = QUERIES._value.get() - before
    finally:
        provider.close()
    me, load = found["fleet_0007"], found["load"]
    assert isinstance(me, Forecasted) and me.value == 7.0
    assert isinstance(load, Forecasted) and load.value == 2.5
    for reading, value in ((me, 7.0), (load, 2.5)):
        times = [t for t, _ in reading.points]
        assert len(times) == 5 and all(v == value for _, v in reading.points)
        assert now < times[0] <= now + 2.5 and times == sorted(times)
        assert all(b - a == pytest.approx(2.0) for a, b in itertools.pairwise(times))
    assert isinstance(found["temp"], Failure)  # two series: an error, no forecast either
    assert found["scalar(load)"] == 2.5  # asked alone: a value without a forecast
    assert isinstance(found["nothing_here"], Failure)
    assert asked <= 3  # the chunk, the scalar alone, and a range query if a step began
    assert again.keys() == found.keys() and isinstance(again["load"], Forecasted)
