"""``berth propagator``: observe clusters and apply placed applications to them."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.controller_cmd import add_controller
from berth.controllers.propagator.config import PropagatorConfig, dump_config, load_config
from berth.controllers.runtime.process import Controller
from berth.store import Store


def _make(store: Store, config: Any, lease_ttl: int) -> Controller:
    from berth.controllers.propagator.propagator import Propagator

    return Propagator(store, config, lease_ttl=lease_ttl)


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth propagator``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    add_controller(
        p, name="propagator",
        description="Apply each application's manifest with server-side apply to the clusters "
        "its Binding names, move it make-before-break, remove it when deleted, re-apply on "
        "drift, and write /berth/v1/status/applications/<ns>/<name>; probe every Cluster's "
        "API and write /berth/v1/status/clusters/<ns>/<name>. Every replica works: each serves "
        "the clusters it claims (/berth/v1/leases/propagator/clusters/<ns>/<name>).",
        port=9103, load=load_config, dump_defaults=lambda: dump_config(PropagatorConfig()),
        make=_make, elect=False)
