"""What a poll is asked for and what its readings make: the series a provider is polled
for (:class:`Wanted`, grouped per provider in a :class:`ProviderPlan`) and the value
document each reading becomes (:func:`value_status`: the value normalised, a forecast
kept, an error next to the last good value until it is stale)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from berth.controllers.metrics_cache.providers import Failure, Reading
from berth.controllers.metrics_cache.providers.base import INVALID, Forecasted
from berth.store import keys
from berth.store.documents import (
    ForecastPoint,
    MetricError,
    MetricsProvider,
    MetricValueStatus,
    ProviderInfo,
)
from berth.store.documents.metrics import normalized

MAX_FORECAST = 500  # points of a forecast kept in a value's document


@dataclass(frozen=True, slots=True)
class Series:
    """One value key: a GlobalMetric (namespace None) or a namespaced Metric."""

    name: str
    namespace: str | None

    @property
    def key(self) -> keys.Key:
        return keys.metric_value_key(self.name, self.namespace)


@dataclass(frozen=True, slots=True)
class Wanted:
    series: Series
    query: str  # the metric's name on the provider
    min: float
    max: float
    allowed: tuple[float, ...] = ()  # Krake's allowed_values: empty, any value


@dataclass(slots=True)
class ProviderPlan:
    key: str  # the provider resource's key
    name: str
    spec: bytes  # encoded spec: a change rebuilds the provider
    doc: MetricsProvider | None
    wanted: list[Wanted]


def _forecast(reading: Forecasted, now: datetime, horizon: float
              ) -> tuple[float, list[ForecastPoint]]:
    """The value in effect at ``now`` (a forecast point whose time has come replaces the
    value given with it) and the points still ahead, up to ``horizon`` seconds and
    MAX_FORECAST points."""
    t = now.timestamp()
    value = reading.value
    ahead: list[ForecastPoint] = []
    for at, v in reading.points:
        if at <= t:
            value = v
        elif at <= t + horizon and len(ahead) < MAX_FORECAST:
            ahead.append(ForecastPoint(datetime.fromtimestamp(at, UTC), v))
    return value, ahead


def value_status(w: Wanted, reading: Reading, provider: ProviderInfo,
                 previous: MetricValueStatus | None, now: datetime,
                 stale_after: float, horizon: float = 172800.0) -> MetricValueStatus:
    """The document for one reading.

    After an error the last good value (with its normalised form and when it
    was last observed) stays, next to the error, until ``stale_after`` seconds
    after it was last confirmed by a poll — not after it was first seen: a value
    constant for an hour and read a second ago is as fresh as a new one — then
    only the error remains.
    """
    forecast: list[ForecastPoint] = []
    if isinstance(reading, Forecasted):
        reading, forecast = _forecast(reading, now, horizon)
    if w.allowed and not isinstance(reading, Failure) and reading not in w.allowed:
        reading = Failure(INVALID, f"value {reading:g} is not one of the metric's "
                          f"allowed_values ({', '.join(f'{v:g}' for v in w.allowed)})")
    if isinstance(reading, Failure):
        error = MetricError(reading.reason, reading.message)
        if previous is not None and previous.value is not None and previous.observed is not None \
                and (now - previous.observed).total_seconds() < stale_after:
            return msgspec.structs.replace(previous, provider=provider, error=error)
        return MetricValueStatus(provider=provider, error=error)
    scaled = normalized(reading, w.min, w.max)
    return MetricValueStatus(value=reading, normalized=scaled[0] if scaled else None,
                             out_of_range=bool(scaled and scaled[1]),
                             invalid_range=scaled is None, observed=now, provider=provider,
                             forecast=forecast)


__all__ = ["MAX_FORECAST", "ProviderPlan", "Series", "Wanted", "value_status"]
