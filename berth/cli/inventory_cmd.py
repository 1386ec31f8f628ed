"""``berth inventory``: keep the ClusterProfiles of the hubs Inventory documents name as
berth's Clusters (docs/inventory.md)."""

from __future__ import annotations

import argparse
from typing import Any

from berth.cli.controller_cmd import add_controller
from berth.controllers.inventory.config import InventoryConfig, dump_config, load_config
from berth.controllers.runtime.process import Controller
from berth.store import Store


def _make(store: Store, config: Any, _lease_ttl: int) -> Controller:
    from berth.controllers.inventory.inventory import InventoryController

    return InventoryController(store, config)


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth inventory``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    add_controller(
        p, name="inventory",
        description="Keep one berth Cluster per ClusterProfile of the hubs that Inventory "
        "documents name (KEP-4322), reached through the consumer's exec plugins.",
        port=9106, load=load_config, dump_defaults=lambda: dump_config(InventoryConfig()),
        make=_make)
