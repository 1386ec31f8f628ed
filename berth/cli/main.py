"""``berth``: subcommands for each process and tool, sharing the etcd options.

Only the subcommand that runs is imported (``berth --version`` and ``--help``
import no part of berth but this module; ``get`` not the scheduler): the table
below names each subcommand's module and one-line help, and the module's
``configure(parser, name)`` adds the rest.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]
# the long-running processes; the rest are one-shot tools
PROCESSES = {"scheduler", "metrics-cache", "propagator", "agent", "exporter", "inventory"}

COMMANDS: dict[str, tuple[str, str]] = {  # name: (module in berth.cli, one-line help)
    "bootstrap": ("bootstrap_cmd", "seed etcd from YAML documents (all or nothing)"),
    "scheduler": ("scheduler_cmd", "run the scheduler"),
    "metrics-cache": ("metrics_cache_cmd", "run the metrics-cache"),
    "propagator": ("propagator_cmd",
                   "run the propagator: apply placed applications, observe clusters"),
    "agent": ("agent_cmd", "run a pull cluster's agent: carry out its work from inside it"),
    "exporter": ("exporter_cmd", "run the exporter: clusters and decisions as ClusterProfiles "
                 "and PlacementDecisions (Argo CD, OCM)"),
    "inventory": ("inventory_cmd", "run the inventory: a hub's ClusterProfiles as berth's "
                  "Clusters"),
    "get": ("get_cmd", "list resources as a table (kubectl's manner)"),
    "describe": ("describe_cmd", "one resource with its Binding, status and history"),
    "explain": ("explain_cmd", "explain a scheduling decision"),
    "history": ("history_cmd", "what berth did to an application and why (the ledger)"),
    "apply": ("apply_cmd", "create or update resources from YAML"),
    "delete": ("delete_cmd", "delete resources (an Application via the propagator)"),
    "wait": ("wait_cmd", "wait until resources meet a condition (kubectl's manner)"),
    "cluster": ("cluster_cmd", "cluster chores: register; an agent's token, approve, revoke"),
    "cordon": ("cluster_cmd", "keep applications off a cluster (a taint)"),
    "uncordon": ("cluster_cmd", "take the cordon's taint away"),
    "completion": ("completion_cmd", "a bash or zsh completion script"),
    "rollout": ("rollout_cmd", "see and steer a new generation's rollout (status, pause, "
                "resume, approve, undo, history)"),
    "console": ("console_cmd", "serve the web console (fleet, applications, metrics, what-if)"),
    "upgrade": ("upgrade_cmd", "move secrets stored inline by an older berth apart (once)"),
    "access": ("access_cmd", "a team's access to its namespace: grant, revoke, show (as root)"),
}


def version() -> str:
    from importlib import metadata  # slow to import: only when asked

    try:
        return metadata.version("berth")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up when asked."""

    def __init__(self, option_strings: list[str], dest: str, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"berth {version()}")
        parser.exit()


def _add_log_level(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("--log-level", type=str.upper, choices=LEVELS, metavar="LEVEL",
                   default=default if default else argparse.SUPPRESS,
                   help="DEBUG, INFO, WARNING or ERROR, any case (default: INFO)")
    p.add_argument("--log-format", type=str.lower, choices=["text", "json"],
                   default="text" if default else argparse.SUPPRESS,
                   help="text (default) or json: one object per line")


def chosen(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is one (the top-level
    options' values are levels and formats, never a subcommand's name)."""
    return next((word for word in argv if word in COMMANDS), None)


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; only ``command`` (all of them when ``"*"``) with its
    arguments and the etcd options, the others by name and help alone."""
    p = argparse.ArgumentParser(prog="berth", description="A multi-cluster workload scheduler.")
    p.add_argument("--version", action=_Version)
    _add_log_level(p, "INFO")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        leaf = sub.add_parser(name, help=help_)
        if command in (name, "*"):
            importlib.import_module(f"berth.cli.{module}").configure(leaf, name)
            from berth.cli.etcd_options import add_etcd_options

            for action in _leaves(leaf):
                add_etcd_options(action)
                _add_log_level(action, None)  # also after the subcommand; given there, it wins
    return p


def _leaves(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser under ``p`` that runs something (``cluster register``, not
    ``cluster``)."""
    nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return [leaf for n in nested for sub in n.choices.values() for leaf in _leaves(sub)
            ] if nested else [p]


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
    argv = sys.argv[1:] if argv is None else list(argv)
    command = chosen(argv)
    args = parser(command).parse_args(argv)
    from berth.cli import logs
    from berth.cli.etcd_options import etcd_config, explain_store_error
    from berth.store import StoreError

    logs.configure(args.log_level, args.log_format, batched=args.command in PROCESSES)
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
