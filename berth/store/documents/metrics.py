"""Metrics and metrics providers (Krake's "Metrics and Metrics Providers").

A provider says where values come from (Prometheus, a Kafka topic, a ksqlDB
table, or static values in its own spec); a metric names a provider, the
metric's name on that provider, and the [min, max] interval its values are
normalised with. Krake's YAML loads unchanged, including its ``type: kafka``
provider with a ``kafka: {url, table, comparison_column, value_column}`` spec,
which is really a KSQL pull query and is treated as one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from berth.store.documents.base import Metadata, Strict

# A metric definition's label saying what it measures, for applications' costMetric:
# the Metrics of one quantity in different places (carbon intensity per grid zone)
# carry the same value.
MEASURES = "berth.dev/measures"


def normalized(value: float, lo: float, hi: float) -> tuple[float, bool] | None:
    """A metric's value scaled to [0, 1] by its definition's ``[lo, hi]``, clamped, and
    whether it lay outside; None when ``lo < hi`` does not hold. The one place a value
    is normalised: the metrics-cache writes it, the scheduler scores with it (against
    the definition as it is now), ``berth get`` shows it."""
    if not lo < hi:
        return None
    n = (value - lo) / (hi - lo)
    return min(1.0, max(0.0, n)), not 0.0 <= n <= 1.0


class PrometheusForecast(Strict):
    """A forecast by persistence: what each metric was one ``period`` ago (range data,
    every ``step``), ``horizon`` ahead. For signals with a daily shape (carbon intensity,
    energy prices, heat demand), the same hours yesterday are the usual baseline."""

    period: str | float = "24h"
    horizon: str | float = "24h"
    step: str | float = "1h"


class PrometheusSpec(Strict):
    url: str
    timeout: float | None = None  # seconds for one query
    poll_interval: float | None = None  # seconds between polls
    forecast: PrometheusForecast | None = None


class KafkaSpec(Strict):
    """Either Krake's KSQL table (url, table, columns) or a topic consumer."""

    # Krake's KSQL flavour
    url: str | None = None
    table: str | None = None
    comparison_column: str | None = None
    value_column: str | None = None
    # topic-consumer flavour
    bootstrap_servers: str | list[str] | None = None
    topic: str | None = None
    group_id: str | None = None
    security_protocol: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    poll_interval: float | None = None

    @property
    def is_ksql(self) -> bool:
        """True when this is Krake's KSQL table rather than a topic."""
        return self.bootstrap_servers is None and self.topic is None


class KsqlSpec(Strict):
    url: str
    table: str
    comparison_column: str
    value_column: str
    poll_interval: float | None = None


class SeriesPoint(Strict):
    """One value of a series, in effect from ``at`` until the next point's ``at``."""

    at: datetime
    value: float


class StaticSpec(Strict):
    """Fixed values (``metrics``), or series of timed values (``series``): a series' value
    is that of its last point at or before now, and its later points are its forecast."""

    metrics: dict[str, float] = {}
    series: dict[str, list[SeriesPoint]] = {}


ProviderType = Literal["prometheus", "kafka", "ksql", "static"]


class MetricsProviderSpec(Strict):
    type: ProviderType
    prometheus: PrometheusSpec | None = None
    kafka: KafkaSpec | None = None
    ksql: KsqlSpec | None = None
    static: StaticSpec | None = None
    poll_interval: float | None = None

    def effective_type(self) -> str:
        """``ksql`` for Krake's KSQL-flavoured ``kafka`` spec, else ``type``."""
        if self.type == "kafka" and self.kafka is not None and self.kafka.is_ksql:
            return "ksql"
        return self.type


class MetricsProvider(Strict, tag_field="kind", tag="MetricsProvider"):
    metadata: Metadata
    spec: MetricsProviderSpec
    api: str = "core"
    status: dict[str, Any] | None = None


class GlobalMetricsProvider(MetricsProvider, tag="GlobalMetricsProvider"):
    pass


class ProviderRef(Strict):
    name: str  # the provider resource
    metric: str  # the metric's name on that provider


class MetricSpec(Strict):
    min: float
    max: float
    provider: ProviderRef
    # Krake's: the only values the metric may take (empty: any). Another value is
    # recorded as INVALID_METRIC.
    allowed_values: list[float] = []


class Metric(Strict, tag_field="kind", tag="Metric"):
    metadata: Metadata
    spec: MetricSpec
    api: str = "core"
    status: dict[str, Any] | None = None


class GlobalMetric(Metric, tag="GlobalMetric"):
    pass


class MetricRef(Strict):
    """A resource's use of a metric, with the weight it has in the score."""

    name: str
    weight: float
    namespaced: bool = False


class MetricError(msgspec.Struct, omit_defaults=True):
    """Why a metric has no usable value, with Krake's reason codes."""

    reason: str  # UNREACHABLE_METRICS_PROVIDER, UNKNOWN_METRICS_PROVIDER, UNKNOWN_METRIC, ...
    message: str = ""


class ProviderInfo(msgspec.Struct, omit_defaults=True):
    name: str
    type: str = ""


class ForecastPoint(msgspec.Struct, array_like=True):
    """A value the metric is expected to take from ``at`` on: ``[at, value]``."""

    at: datetime
    value: float


class MetricValueStatus(msgspec.Struct, omit_defaults=True):
    """What the metrics-cache last observed for a metric, and what its provider
    forecasts (later points only, oldest first; empty when it gives none)."""

    value: float | None = None  # raw, as the provider gave it
    normalized: float | None = None  # (value - min) / (max - min), clamped to [0, 1]
    out_of_range: bool = False  # value outside [min, max]: normalized was clamped
    invalid_range: bool = False  # min >= max: no normalized value
    observed: datetime | None = None
    provider: ProviderInfo | None = None
    error: MetricError | None = None
    forecast: list[ForecastPoint] = []


class MetricValue(msgspec.Struct, tag_field="kind", tag="MetricValue"):
    """The document at ``/berth/v1/metricvalues/...`` (written by the metrics-cache)."""

    metadata: Metadata
    status: MetricValueStatus
    api: str = "core"


class MetricPicture(msgspec.Struct, tag_field="kind", tag="MetricPicture", omit_defaults=True):
    """The document at ``/berth/v1/metricvalues/picture``: whether the values are whole.

    The publisher of the values (the metrics-cache) writes it after the values
    it describes, on the same lease: ``complete`` once every provider has
    answered since it started (or since its values were lost), and then a new
    ``generation`` after every poll that changed values. Readers decide on
    metric values only as of a complete picture, never on one half written.
    """

    complete: bool
    generation: int = 0
    publisher: str = "metrics-cache"
    updated: datetime | None = None
    api: str = "core"
