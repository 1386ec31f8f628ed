"""Metrics providers: static, Prometheus, Kafka topics, ksqlDB tables."""

from __future__ import annotations

from berth.controllers.metrics_cache.providers.base import Failure, Provider, Reading
from berth.store.documents.metrics import MetricsProviderSpec


def make_provider(name: str, spec: MetricsProviderSpec, *, timeout: float = 5.0,
                  retries: int = 2, batch: int = 200) -> Provider:
    """The provider a spec describes; ValueError if its section is missing."""
    kind = spec.effective_type()
    if kind == "static" and spec.static is not None:
        from berth.controllers.metrics_cache.providers.static import StaticProvider

        return StaticProvider(spec.static)
    if kind == "prometheus" and spec.prometheus is not None:
        from berth.controllers.metrics_cache.providers.prometheus import PrometheusProvider

        return PrometheusProvider(spec.prometheus, timeout=timeout, retries=retries,
                                  batch=batch)
    if kind == "ksql" and (spec.ksql is not None or spec.kafka is not None):
        from berth.controllers.metrics_cache.providers.ksql import KsqlProvider

        return KsqlProvider(spec.ksql or spec.kafka,  # type: ignore[arg-type]
                            timeout=timeout, batch=batch)
    if kind == "kafka" and spec.kafka is not None:
        from berth.controllers.metrics_cache.providers.kafka import KafkaProvider

        return KafkaProvider(spec.kafka, provider=name)
    raise ValueError(f"provider {name}: type {spec.type!r} without its section")


__all__ = ["Failure", "Provider", "Reading", "make_provider"]
