"""``berth``: subcommands for each process and tool, sharing the etcd options."""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata

from berth.cli import (
    apply_cmd,
    bootstrap_cmd,
    cluster_cmd,
    delete_cmd,
    describe_cmd,
    explain_cmd,
    get_cmd,
    metrics_cache_cmd,
    propagator_cmd,
    scheduler_cmd,
)
from berth.cli.etcd_options import add_etcd_options, etcd_config, explain_store_error
from berth.store import StoreError

LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]
PROCESSES = {"scheduler", "metrics-cache", "propagator"}  # the rest are one-shot tools


def version() -> str:
    try:
        return metadata.version("berth")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown (not installed)"


def _add_log_level(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("--log-level", type=str.upper, choices=LEVELS, metavar="LEVEL",
                   default=default if default else argparse.SUPPRESS,
                   help="DEBUG, INFO, WARNING or ERROR, any case (default: INFO)")
    p.add_argument("--log-format", type=str.lower, choices=["text", "json"],
                   default="text" if default else argparse.SUPPRESS,
                   help="text (default) or json: one object per line")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and
    the traceback if there is one — for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": datetime.fromtimestamp(record.created, UTC).isoformat()
               .replace("+00:00", "Z"),
               "level": record.levelname, "logger": record.name,
               "message": record.getMessage(), "thread": record.threadName}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def _logging(level: str, form: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="berth", description="A multi-cluster workload scheduler.")
    p.add_argument("--version", action="version", version=f"berth {version()}")
    _add_log_level(p, "INFO")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (bootstrap_cmd, scheduler_cmd, metrics_cache_cmd, propagator_cmd, get_cmd,
                   describe_cmd, explain_cmd, apply_cmd, delete_cmd, cluster_cmd):
        module.add_parser(sub)
    for action in _leaves(sub):
        add_etcd_options(action)
        _add_log_level(action, None)  # also after the subcommand; given there, it wins
    return p


def _leaves(sub: argparse._SubParsersAction[argparse.ArgumentParser]
            ) -> list[argparse.ArgumentParser]:
    """Every parser that runs something (``cluster register``, not ``cluster``)."""
    out = []
    for parser_ in sub.choices.values():
        nested = [a for a in parser_._actions if isinstance(a, argparse._SubParsersAction)]
        out += [leaf for n in nested for leaf in _leaves(n)] if nested else [parser_]
    return out


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
    """Exit status: 0 done, 1 failed (etcd, the data), 2 a bad option or argument
    (argparse's own usage errors are 2 as well), 130 interrupted."""
    args = parser().parse_args(argv)
    _logging(args.log_level, args.log_format)
    _dump_stacks_on_crash_and_usr1()
    for chatty in ("urllib3", "httpx2", "httpcore2", "aiokafka", "hpack", "h2", "asyncio"):
        # a line per request (or HTTP/2 frame) otherwise
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if args.command not in PROCESSES:  # a tool reports etcd's failure itself, once
        logging.getLogger("berth.store.link").setLevel(logging.ERROR)
    try:
        etcd_config(args)  # bad etcd options are refused before anything runs
        return int(args.run(args))
    except ValueError as exc:  # bad option values (an --etcd URL, half a TLS pair, --http)
        print(f"berth {args.command}: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"berth {args.command}: {explain_store_error(exc, args)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader had enough (`berth get apps | head -1`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to say, nor at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())
