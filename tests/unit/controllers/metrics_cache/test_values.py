"""Pure pieces of the metrics-cache: value documents, parsing, quoting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from berth.controllers.metrics_cache.providers.base import Failure, Forecasted, number
from berth.controllers.metrics_cache.providers.kafka import parse_record
from berth.controllers.metrics_cache.providers.ksql import identifier, pull_query
from berth.controllers.metrics_cache.providers.prometheus import PrometheusProvider
from berth.controllers.metrics_cache.providers.static import StaticProvider
from berth.controllers.metrics_cache.values import Series, Wanted, value_status
from berth.store.documents import ProviderInfo
from berth.store.documents.metrics import SeriesPoint, StaticSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)
P = ProviderInfo("p", "static")


def w(lo: float = 0, hi: float = 10) -> Wanted:
    return Wanted(Series("m", None), "m", lo, hi)


@pytest.mark.parametrize(
    ("wanted", "raw", "normalized", "out", "invalid"),
    [(w(), 2.5, 0.25, False, False), (w(), 12.0, 1.0, True, False),
     (w(), -1.0, 0.0, True, False), (w(5, 5), 5.0, None, False, True)],
)
def test_normalisation_and_flags(wanted: Wanted, raw: float, normalized: float | None,
                                 out: bool, invalid: bool) -> None:
    s = value_status(wanted, raw, P, None, NOW, 60)
    assert (s.value, s.normalized, s.out_of_range, s.invalid_range) == (raw, normalized, out,
                                                                        invalid)
    assert s.observed == NOW and s.error is None


def test_allowed_values_krake_s_list_of_the_only_values_a_metric_may_take() -> None:
    only = Wanted(Series("m", None), "m", 0, 5, (0.0, 1.0, 4.0, 5.0))
    assert value_status(only, 4.0, P, None, NOW, 60).normalized == 0.8
    wrong = value_status(only, 2.0, P, None, NOW, 60)
    assert wrong.value is None and wrong.error is not None
    assert (wrong.error.reason, wrong.error.message) == (
        "INVALID_METRIC", "value 2 is not one of the metric's allowed_values (0, 1, 4, 5)")
    assert value_status(w(), 2.0, P, None, NOW, 60).value == 2.0  # empty: any value


def test_an_error_keeps_the_last_value_until_it_is_stale() -> None:
    good = value_status(w(), 4.0, P, None, NOW, 60)
    failure = Failure("UNREACHABLE_METRICS_PROVIDER", "down")
    soon = value_status(w(), failure, P, good, NOW + timedelta(seconds=30), 60)
    assert (soon.value, soon.normalized, soon.observed) == (4.0, 0.4, NOW)  # kept, as it was
    assert soon.error is not None
    late = value_status(w(), failure, P, soon, NOW + timedelta(seconds=61), 60)
    assert late.value is None and late.normalized is None and late.error.reason == "UNREACHABLE_METRICS_PROVIDER"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("raw", "ok"),
    [("1.5", True), (2, True), ("nan", False), ("inf", False), ("abc", False), (None, False),
     (True, False), ([1], False)],
)
def test_numbers(raw: object, ok: bool) -> None:
    assert isinstance(number(raw, "m"), float) is ok


@pytest.mark.parametrize(
    ("value", "reading", "stamp"),
    [(b"3.5", 3.5, None), (b' {"value": 2, "timestamp": 10} ', 2.0, 10.0),
     (b'{"value": 2, "timestamp": 1700000000000}', 2.0, 1700000000.0),
     (b'{"value": "x"}', None, None), (b"[1, 2]", None, None), (None, None, None)],
)
def test_kafka_records(value: bytes | None, reading: float | None, stamp: float | None) -> None:
    got, ts = parse_record(value, "m")
    if reading is None:
        assert isinstance(got, Failure) and got.reason == "INVALID_METRIC"
    else:
        assert got == reading and ts == stamp


def test_ksql_statements_quote_user_names() -> None:
    assert pull_query("t", "k", "v", ["a", "b'; DROP TABLE t; --"]) == (
        "SELECT `k`, `v` FROM `t` WHERE `k` IN ('a', 'b''; DROP TABLE t; --');")
    with pytest.raises(ValueError, match="identifier"):
        identifier("evil`name")


@pytest.mark.parametrize(
    ("result", "expected"),
    [([{"metric": {}, "value": [1, "2.5"]}], 2.5), ([1, "7"], 7.0),
     ([], "UNKNOWN_METRIC"), ([{"value": [1, "1"]}, {"value": [1, "2"]}], "INVALID_METRIC"),
     ([{"value": [1, "NaN"]}], "INVALID_METRIC"), ({"weird": 1}, "INVALID_METRIC"),
     ([{"metric": {}}], "INVALID_METRIC")],
)
def test_prometheus_answers(result: object, expected: float | str) -> None:
    got = PrometheusProvider._value("q", result)
    assert got == expected if isinstance(expected, float) else got.reason == expected  # type: ignore[union-attr]


def test_a_forecast_s_points_become_the_value_as_their_time_comes() -> None:
    t = NOW.timestamp()
    reading = Forecasted(4.0, ((t - 600, 5.0), (t + 3600, 2.0), (t + 7200, 1.0),
                               (t + 90000, 9.0)))
    s = value_status(w(), reading, P, None, NOW, 60, horizon=86400)
    assert s.value == 5.0 and s.normalized == 0.5  # the point due ten minutes ago
    assert [(p.at, p.value) for p in s.forecast] == [
        (NOW + timedelta(hours=1), 2.0), (NOW + timedelta(hours=2), 1.0)]  # within 24 h
    again = value_status(w(), reading, P, None, NOW + timedelta(hours=1), 60)
    assert again.value == 2.0 and [p.value for p in again.forecast] == [1.0, 9.0]


def test_a_static_series_is_read_at_the_time_of_the_poll() -> None:
    now = datetime.now(UTC)
    spec = StaticSpec(series={"price": [
        SeriesPoint(now + timedelta(hours=1), 30.0), SeriesPoint(now - timedelta(hours=1), 80.0)],
        "later": [SeriesPoint(now + timedelta(hours=1), 1.0)]}, metrics={"flat": 3.0})
    found = StaticProvider(spec).fetch(["price", "later", "flat", "nope"])
    price = found["price"]
    assert isinstance(price, Forecasted) and price.value == 80.0
    assert [v for _, v in price.points] == [30.0]
    later = found["later"]
    assert isinstance(later, Failure) and "starts later" in later.message
    assert found["flat"] == 3.0
    nope = found["nope"]
    assert isinstance(nope, Failure) and nope.reason == "UNKNOWN_METRIC"


def test_kafka_records_with_a_forecast() -> None:
    reading, stamp = parse_record(
        b'{"value": 41.5, "timestamp": "2026-01-01T00:00:00Z",'
        b' "forecast": [[1767229200, 30], {"at": "2026-01-01T02:00:00Z", "value": 20.5}]}', "p")
    assert stamp == NOW.timestamp()
    assert reading == Forecasted(41.5, ((NOW.timestamp() + 3600, 30.0),
                                        (NOW.timestamp() + 7200, 20.5)))
    bad, _ = parse_record(b'{"value": 1, "forecast": [[1767229200, "x"]]}', "p")
    assert isinstance(bad, Failure) and "p forecast point 0" in bad.message
    bad, _ = parse_record(b'{"value": 1, "forecast": [["soon", 3]]}', "p")
    assert isinstance(bad, Failure) and "'soon' is not a time" in bad.message


def test_a_value_is_normalised_in_one_place() -> None:
    from berth.store.documents.metrics import normalized

    assert normalized(2.5, 0, 5) == (0.5, False)
    assert normalized(7, 0, 5) == (1.0, True)  # clamped, and said
    assert normalized(-1, 0, 5) == (0.0, True)
    assert normalized(1, 5, 5) is None  # no interval: INVALID_METRIC, not a number
