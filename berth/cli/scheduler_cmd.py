"""``berth scheduler``: place applications on clusters (and clusters on clouds)."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.controller_cmd import add_controller
from berth.controllers.runtime.process import Controller
from berth.controllers.scheduler.config import SchedulerConfig, dump_config, load_config
from berth.store import Store


def _load(path: str | None) -> SchedulerConfig:
    from berth.controllers.scheduler.scheduler import check_config

    config = load_config(path)
    check_config(config)  # refuse a bad plugin configuration at once
    return config


def _make(store: Store, config: Any, _lease_ttl: int) -> Controller:
    from berth.controllers.scheduler.scheduler import Scheduler

    return Scheduler(store, config)


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth scheduler``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    add_controller(
        p, name="scheduler",
        description="Watch applications, clusters and metric values; write a Binding for "
        "each application (and each cluster without a kubeconfig).",
        port=9101, load=_load, dump_defaults=lambda: dump_config(SchedulerConfig()),
        make=_make)
