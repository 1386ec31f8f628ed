"""``berth metrics-cache``: keep current metric values in leased etcd keys."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.etcd_options import open_store
from controllers.metrics_cache.config import MetricsCacheConfig, dump_config, load_config
from controllers.runtime.process import parse_listen, run_process


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("metrics-cache", help="run the metrics-cache",
                       description="Poll the metrics providers that referenced metrics name "
                       "and keep each value at /berth/v1/metricvalues/..., leased.")
    p.add_argument("--config", metavar="FILE", help="configuration (YAML)")
    p.add_argument("--write-config-to", metavar="FILE",
                   help="write the default configuration to FILE and exit")
    p.add_argument("--http", default="127.0.0.1:9102", metavar="HOST:PORT",
                   help="/healthz, /readyz and /metrics (default 127.0.0.1:9102; port 0: any)")
    p.add_argument("--lease-ttl", type=int, default=10,
                   help="leader election lease, seconds (default 10)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.write_config_to:
        Path(args.write_config_to).write_text(dump_config(MetricsCacheConfig()))
        print(f"wrote the default configuration to {args.write_config_to}", file=sys.stderr)
        return 0
    config = load_config(args.config)
    from controllers.metrics_cache.cache import MetricsCache

    store = open_store(args)
    return run_process(name="metrics-cache", store=store,
                       make=lambda: MetricsCache(store, config),
                       listen=parse_listen(args.http), lease_ttl=args.lease_ttl)
