"""``berth``: subcommands for each process and tool, sharing the etcd options."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
from collections.abc import Sequence

from cli import (
    bootstrap_cmd,
    delete_cmd,
    explain_cmd,
    metrics_cache_cmd,
    propagator_cmd,
    scheduler_cmd,
)
from cli.etcd_options import add_etcd_options


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="berth", description="A multi-cluster workload scheduler.")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default: INFO")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (bootstrap_cmd, scheduler_cmd, metrics_cache_cmd, propagator_cmd, explain_cmd,
                   delete_cmd):
        module.add_parser(sub)
    for action in sub.choices.values():
        add_etcd_options(action)
    return p


def _dump_stacks_on_crash_and_usr1() -> None:
    """A crash in native code still leaves a stack in the log; ``kill -USR1``
    prints every thread's. Not where stderr is no file (berth called in-process)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _dump_stacks_on_crash_and_usr1()
    for chatty in ("urllib3", "httpx2", "httpcore2", "aiokafka"):  # a line per request otherwise
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        return int(args.run(args))
    except ValueError as exc:  # bad option values (an --etcd URL, half a TLS pair)
        print(f"berth {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
