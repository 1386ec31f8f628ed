"""``berth bootstrap FILE|DIR|- ...``: validate everything, then write all or nothing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import msgspec

from berth.actions.resources import mask
from berth.bootstrap import Loaded, LoadErrors, Planned, ignored, load, plan, write
from berth.cli.etcd_options import open_store
from berth.store import Store


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth bootstrap``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Validate every document of every input, then write them all in "
                     "one go, or nothing. Inputs are files, directories (their .yaml/.yml/.json "
                     "files, recursively) or - for standard input.")
    p.add_argument("inputs", nargs="+", metavar="FILE|DIR|-")
    p.add_argument("--force", action="store_true",
                   help="replace existing resources that differ (keeping uid and created, "
                   "bumping generation); identical ones are left unchanged either way")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be written, write nothing")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return seed(args, args.inputs, command="bootstrap", force=args.force)


def seed(args: argparse.Namespace, inputs: list[str], *, command: str, force: bool,
         report: Callable[[list[Planned]], None] | None = None,
         dry_run: Callable[[list[Planned]], None] | None = None,
         check: Callable[[Store, list[Loaded]], bool] | None = None) -> int:
    """Validate everything, then write all or nothing (``bootstrap`` and ``apply``);
    ``check`` may refuse the documents (it says why) before anything is planned."""
    def progress(what: str, done: int, total: int) -> None:
        if not getattr(args, "quiet", False):
            print(f"{command}: {what} {done}/{total}", file=sys.stderr, flush=True)

    try:
        loaded = load(inputs)
        progress("validated", len(loaded), len(loaded))
        for item in loaded:
            for line in ignored(item):
                print(f"warning: {line}", file=sys.stderr)
        store = open_store(args)
        if check is not None and not check(store, loaded):
            print(f"{command}: nothing written", file=sys.stderr)
            return 1
        planned = plan(store, loaded, force=force)
        shown = [p for p in planned if not p.bookkeeping]  # not histories: part of theirs
        if args.dry_run:
            if dry_run is not None:
                dry_run(shown)
            else:
                for p in shown:  # credentials masked, as everywhere the CLI prints
                    value = msgspec.json.encode(mask(msgspec.json.decode(p.value))).decode()
                    print(f"{p.action} {p.key}" + ("" if p.unchanged else f" {value}"))
            print(f"{command}: dry run, {len(shown)} documents, nothing written",
                  file=sys.stderr)
            return 0
        result = write(store, planned, progress=progress)
    except LoadErrors as exc:
        for line in exc.errors:
            print(f"error: {line}", file=sys.stderr)
        print(f"{command}: {len(exc.errors)} error(s); nothing written", file=sys.stderr)
        return 1
    if report is not None:
        report(shown)
    print(f"{command}: {result.created} created, {result.replaced} replaced, "
          f"{result.unchanged} unchanged"
          + (f" (revision {result.revision})" if result.revision else ""), file=sys.stderr)
    return 0
