"""The metrics-cache's configuration file (YAML), with safe defaults."""

from __future__ import annotations

import msgspec

from berth.controllers.runtime.config import dump_yaml, load_yaml


class MetricsCacheConfig(msgspec.Struct, forbid_unknown_fields=True):
    lease_ttl: int = 15  # seconds a value outlives this process
    events: bool = True  # say providers' and metrics' failures as events (docs/events.md)
    event_ttl: float = 3600.0  # seconds an event outlives its last occurrence
    poll_interval: float = 10.0  # seconds, unless the provider's spec says otherwise
    jitter: float = 0.1  # each interval varies by up to this fraction
    timeout: float = 5.0  # seconds for one provider request
    retries: int = 2  # retries of an unreachable provider within one poll
    batch: int = 200  # metrics per request to Prometheus or ksqlDB (1: one request each)
    stale_after: float = 60.0  # an errored metric keeps its last value this long
    watch_idle_timeout: float = 30.0
    forecast_horizon: float = 172800.0  # seconds of a provider's forecast kept (48 h)

    def __post_init__(self) -> None:
        if self.lease_ttl < 2:
            raise ValueError("lease_ttl must be at least 2 seconds")
        if self.poll_interval <= 0 or self.timeout <= 0:
            raise ValueError("poll_interval and timeout must be positive")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        if self.batch < 1:
            raise ValueError("batch must be at least 1")
        if self.forecast_horizon < 0:
            raise ValueError("forecast_horizon must not be negative")
        if self.retries < 0 or self.stale_after < 0:
            raise ValueError("retries and stale_after must not be negative")


def load_config(path: str | None) -> MetricsCacheConfig:
    return load_yaml(path, MetricsCacheConfig)


def dump_config(config: MetricsCacheConfig) -> str:
    return dump_yaml(config)
