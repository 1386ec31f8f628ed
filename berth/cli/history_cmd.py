"""``berth history [NS/]APP``: what berth did to an application and why, from the ledger.

One line per record, oldest first: when, which process, what happened
(placed, moved, held, a copy's health, a rollout step), why (the trigger and
its particulars) and from where to where. Records that do not decode are
named on stderr and skipped. ``berth explain application APP --at TIME``
answers from the same records (:func:`then`): where the application ran at
that time, the decision that put it there, and the propagator's last word
before it.
"""

from __future__ import annotations

import argparse
import json
import sys

import msgspec

from berth.actions.history import Entries, lines, when
from berth.cli.etcd_options import open_store
from berth.cli.kinds import application
from berth.store import Store, ledger


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth history``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Print an application's ledger: every placement change with its "
                     "trigger, every copy's health change and rollout step, oldest first.")
    p.add_argument("name", metavar="[NAMESPACE/]NAME", help="namespace defaults to -n's")
    p.add_argument("-n", "--namespace", default="default", help="default: default")
    p.add_argument("--since", metavar="TIME|DURATION",
                   help="only records from then on: 2026-11-28T01:00:00Z, or 2h (ago)")
    p.add_argument("--by", choices=ledger.WRITERS, help="only one process's records")
    p.add_argument("-o", "--output", choices=["table", "wide", "json"], default="table")
    p.set_defaults(run=run)


def read(store: Store, namespace: str, name: str) -> Entries:
    """The application's records, oldest first; the undecodable named on stderr."""
    entries, problems = ledger.history(store, "Application", namespace, name)
    for p in problems:
        print(f"berth: {p}", file=sys.stderr)
    return entries


def run(args: argparse.Namespace) -> int:
    namespace, _, name = application(args.name).rpartition("/")
    namespace = namespace or args.namespace
    entries = read(open_store(args), namespace, name)
    if args.since:
        since = when(args.since)
        entries = [(e, r) for e, r in entries if r.time >= since]
    if args.by:
        entries = [(e, r) for e, r in entries if e.by == args.by]
    if args.output == "json":
        print(json.dumps([{"id": e.id, "by": e.by, **msgspec.to_builtins(r)}
                          for e, r in entries], indent=2))
        return 0
    if not entries:
        print(f"no records for application {namespace}/{name} (its ledger is empty, or "
              "retention removed them)", file=sys.stderr)
        return 1
    print("\n".join(lines(entries, wide=args.output == "wide")))
    return 0


__all__ = ["read"]
