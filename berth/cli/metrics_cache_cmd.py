"""``berth metrics-cache``: keep current metric values in leased etcd keys."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.controller_cmd import add_controller
from berth.controllers.metrics_cache.config import MetricsCacheConfig, dump_config, load_config
from berth.controllers.runtime.process import Controller
from berth.store import Store


def _make(store: Store, config: Any, _lease_ttl: int) -> Controller:
    from berth.controllers.metrics_cache.cache import MetricsCache

    return MetricsCache(store, config)


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth metrics-cache``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    add_controller(
        p, name="metrics-cache",
        description="Poll the metrics providers that referenced metrics name and keep each "
        "value at /berth/v1/metricvalues/..., leased.",
        port=9102, load=load_config, dump_defaults=lambda: dump_config(MetricsCacheConfig()),
        make=_make)
