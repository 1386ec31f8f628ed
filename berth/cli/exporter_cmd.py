"""``berth exporter``: write berth's clusters and decisions into the Kubernetes APIs that
Export documents name, in the fleet's standard shapes (docs/argocd.md)."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.controller_cmd import add_controller
from berth.controllers.exporter.config import ExporterConfig, dump_config, load_config
from berth.controllers.runtime.process import Controller
from berth.store import Store


def _make(store: Store, config: Any, _lease_ttl: int) -> Controller:
    from berth.controllers.exporter.exporter import Exporter

    return Exporter(store, config)


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth exporter``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    add_controller(
        p, name="exporter",
        description="Write each cluster as a ClusterProfile and each application's decisions "
        "as PlacementDecisions (SIG-Multicluster's, and OCM's for Argo CD) into the "
        "Kubernetes APIs that Export documents name.",
        port=9105, load=load_config, dump_defaults=lambda: dump_config(ExporterConfig()),
        make=_make)
