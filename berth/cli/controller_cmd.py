"""What every controller subcommand shares: its options, and running it as a process.

``--config FILE``, ``--write-config-to FILE``, ``--http HOST:PORT`` and
``--lease-ttl S``; then leader election, the health endpoint and signals
(:func:`controllers.runtime.process.run_process`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from berth.cli.etcd_options import open_store
from berth.controllers.runtime.process import Controller, parse_listen, run_process
from berth.store import Store


def add_controller(
    p: argparse.ArgumentParser,
    *,
    name: str,
    description: str,
    port: int,
    load: Callable[[str | None], Any],
    dump_defaults: Callable[[], str],
    make: Callable[[Store, Any, int], Controller],
    elect: bool = True,
    lease_ttl: int = 10,
    prepare: Callable[[argparse.Namespace], dict[str, Any]] | None = None,
) -> None:
    """``make(store, config, lease_ttl)``; ``elect=False``: every replica runs it.
    ``prepare(args)``: what to do before etcd is dialled, returning more for
    :func:`run_process` (an agent's election key and campaign)."""
    p.description = description
    p.add_argument("--config", metavar="FILE", help="configuration (YAML) over the defaults")
    p.add_argument("--write-config-to", metavar="FILE",
                   help="write the default configuration to FILE (- for standard output) "
                   "and exit")
    p.add_argument("--http", default=f"127.0.0.1:{port}", metavar="HOST:PORT",
                   help=f"/healthz, /readyz and /metrics (default 127.0.0.1:{port}; port 0: any)")
    p.add_argument("--lease-ttl", type=int, default=lease_ttl,
                   help=f"lease, seconds (default {lease_ttl}): leader election" + (
                       "" if elect else "; the replica's membership and cluster claims"))

    def run(args: argparse.Namespace) -> int:
        if args.write_config_to == "-":
            sys.stdout.write(dump_defaults())
            return 0
        if args.write_config_to:
            Path(args.write_config_to).write_text(dump_defaults())
            print(f"wrote the default configuration to {args.write_config_to}", file=sys.stderr)
            return 0
        config = load(args.config)  # a bad file is refused before connecting
        more = prepare(args) if prepare is not None else {}
        store = open_store(args)
        return run_process(name=name, store=store,
                           make=lambda written: make(written, config, args.lease_ttl),
                           listen=parse_listen(args.http), lease_ttl=args.lease_ttl,
                           elect=elect, about={"config": msgspec.to_builtins(config)},
                           **more)

    p.set_defaults(run=run)
