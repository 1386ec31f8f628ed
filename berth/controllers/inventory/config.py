"""The inventory process's configuration file (YAML), with safe defaults."""

from __future__ import annotations

import msgspec

from berth.controllers.runtime.config import dump_yaml, load_yaml


class InventoryConfig(msgspec.Struct, forbid_unknown_fields=True):
    interval: float = 5.0  # seconds between two reads of each hub's ClusterProfiles
    timeout: float = 10.0  # seconds for one request to a hub
    watch_idle_timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.interval <= 0 or self.timeout <= 0:
            raise ValueError("interval and timeout must be positive")


def load_config(path: str | None) -> InventoryConfig:
    return load_yaml(path, InventoryConfig)


def dump_config(config: InventoryConfig) -> str:
    return dump_yaml(config)
