"""Pure pieces of the metrics-cache: value documents, parsing, quoting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from berth.controllers.metrics_cache.cache import Series, Wanted, value_status
from berth.controllers.metrics_cache.providers.base import Failure, number
from berth.controllers.metrics_cache.providers.kafka import parse_record
from berth.controllers.metrics_cache.providers.ksql import identifier, pull_query
from berth.controllers.metrics_cache.providers.prometheus import PrometheusProvider
from berth.store.documents import ProviderInfo

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
