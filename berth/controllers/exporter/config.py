"""The exporter's configuration file (YAML), with safe defaults."""

from __future__ import annotations

import msgspec

from berth.controllers.runtime.config import dump_yaml, load_yaml


class ExporterConfig(msgspec.Struct, forbid_unknown_fields=True):
    timeout: float = 10.0  # seconds for one request to an export's API
    workers: int = 4  # requests in flight to one export's API at once
    settle: float = 0.1  # seconds a burst of changes is gathered before it is written
    resync: float = 300.0  # seconds between two full comparisons with what is there
    max_backoff: float = 60.0  # seconds, at most, between two tries of an API that fails
    events: bool = True  # say an export's failures and recoveries as events
    event_ttl: float = 3600.0
    watch_idle_timeout: float = 30.0
    # seconds between two reads of Argo CD's Applications, for the applications it
    # deploys (docs/argocd.md, section 7): a move waits this long, at most, for its word
    verdicts: float = 1.0

    def __post_init__(self) -> None:
        if min(self.timeout, self.resync, self.max_backoff, self.verdicts) <= 0:
            raise ValueError("timeout, resync, max_backoff and verdicts must be positive")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.settle < 0:
            raise ValueError("settle must not be negative")


def load_config(path: str | None) -> ExporterConfig:
    return load_yaml(path, ExporterConfig)


def dump_config(config: ExporterConfig) -> str:
    return dump_yaml(config)
