"""The propagator's configuration file (YAML), with safe defaults."""

from __future__ import annotations

import msgspec

from controllers.runtime.config import dump_yaml, load_yaml


class PropagatorConfig(msgspec.Struct, forbid_unknown_fields=True):
    probe_interval: float = 10.0  # seconds between probes of each cluster
    probe_timeout: float = 5.0  # seconds for one request to a cluster
    probe_concurrency: int = 8  # clusters probed at once
    grace: int = 3  # failed probes in a row before a cluster changes state
    watch_idle_timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.probe_interval <= 0 or self.probe_timeout <= 0:
            raise ValueError("probe_interval and probe_timeout must be positive")
        if self.probe_concurrency < 1 or self.grace < 1:
            raise ValueError("probe_concurrency and grace must be at least 1")


def load_config(path: str | None) -> PropagatorConfig:
    return load_yaml(path, PropagatorConfig)


def dump_config(config: PropagatorConfig) -> str:
    return dump_yaml(config)
