"""``berth scheduler``: place applications on clusters (and clusters on clouds)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.etcd_options import open_store
from controllers.runtime.process import parse_listen, run_process
from controllers.scheduler.config import SchedulerConfig, dump_config, load_config
from controllers.scheduler.framework import Framework
from controllers.scheduler.plugins import REGISTRY


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scheduler", help="run the scheduler",
                       description="Watch applications, clusters and metric values; write "
                       "a Binding for each application (and each cluster without a kubeconfig).")
    p.add_argument("--config", metavar="FILE", help="scheduler configuration (YAML)")
    p.add_argument("--write-config-to", metavar="FILE",
                   help="write the default configuration to FILE and exit")
    p.add_argument("--http", default="127.0.0.1:9101", metavar="HOST:PORT",
                   help="/healthz, /readyz and /metrics (default 127.0.0.1:9101; port 0: any)")
    p.add_argument("--lease-ttl", type=int, default=10,
                   help="leader election lease, seconds (default 10)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.write_config_to:
        Path(args.write_config_to).write_text(dump_config(SchedulerConfig()))
        print(f"wrote the default configuration to {args.write_config_to}", file=sys.stderr)
        return 0
    config = load_config(args.config)
    Framework(config, REGISTRY)  # refuse a bad plugin configuration before connecting
    from controllers.scheduler.scheduler import Scheduler

    store = open_store(args)
    return run_process(
        name="scheduler", store=store, make=lambda: Scheduler(store, config),
        listen=parse_listen(args.http), lease_ttl=args.lease_ttl,
    )
