"""``berth propagator``: observe clusters (and, next, apply applications to them)."""

from __future__ import annotations

import argparse
from typing import Any

from cli.controller_cmd import add_controller
from controllers.propagator.config import PropagatorConfig, dump_config, load_config
from controllers.runtime.process import Controller
from store import Store


def _make(store: Store, config: Any) -> Controller:
    from controllers.propagator.observer import Observer

    return Observer(store, config)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_controller(
        sub, name="propagator", help="run the propagator (for now: the cluster observer)",
        description="Probe every Cluster's API and write its health and the custom resources "
        "it serves to /berth/v1/status/clusters/<ns>/<name>.",
        port=9103, load=load_config, dump_defaults=lambda: dump_config(PropagatorConfig()),
        make=_make)
