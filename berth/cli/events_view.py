"""``berth get events`` and the events at the end of ``berth describe``, in kubectl's
manner (docs/events.md)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from berth.actions.resources import age, table
from berth.cli.etcd_options import open_store
from berth.cli.kinds import resolve
from berth.store import Store, Watch, decode
from berth.store.errors import StoreError
from berth.store.events import EVENTS, Event, listed, prefix
from berth.store.keys import Prefix

NAMES = ("events", "event", "ev")


def _object(e: Event) -> str:
    return f"{e.involvedObject.kind.lower()}/{e.involvedObject.name}"


def _row(e: Event, now: datetime, every_namespace: bool) -> list[str]:
    last = age(e.lastTimestamp, now)
    if e.count > 1:
        last += f" (x{e.count} over {age(e.firstTimestamp, now)})"
    row = [last, e.type, e.reason, _object(e), e.source, e.message]
    return [e.involvedObject.namespace or "", *row] if every_namespace else row


def _head(every_namespace: bool) -> list[str]:
    head = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "SOURCE", "MESSAGE"]
    return ["NAMESPACE", *head] if every_namespace else head


def _under(args: argparse.Namespace) -> tuple[Prefix, str | None]:
    """The prefix to read, and the namespace to keep (None: every one)."""
    namespace = None if args.all_namespaces else args.namespace
    if not args.for_:
        return EVENTS, namespace
    kind_text, _, name = args.for_.partition("/")
    if not name:
        raise ValueError(f"--for {args.for_!r}: say KIND/NAME (app/web, cluster/de-1)")
    kind = resolve(kind_text)
    ns, _, name = name.rpartition("/")
    ns = ns or args.namespace
    return prefix(kind.name, ns if kind.namespaced else None, name), None


def get(args: argparse.Namespace) -> int:
    """``berth get events [-A] [-n NS] [--for KIND/NAME] [--watch]``."""
    store = open_store(args)
    under, namespace = _under(args)
    revision = store.revision()
    found, problems = listed(store, under)
    for p in problems:
        print(f"berth: {p}", file=sys.stderr)
    shown = sorted((e for _, e in found if namespace is None
                    or e.involvedObject.namespace in (namespace, None)),
                   key=lambda e: e.lastTimestamp)
    now = datetime.now(UTC)
    every = bool(args.all_namespaces)
    if shown:
        rows = [_head(every), *(_row(e, now, every) for e in shown)]
        text = table(rows)
        print(text if not args.no_headers else text.split("\n", 1)[-1], flush=True)
    elif not args.watch:
        print(f"No events found{'' if namespace is None else f' in {namespace} namespace'}.",
              file=sys.stderr)
    if args.watch:
        _watch(store, under, namespace, revision, every)
    return 0


def _watch(store: Store, under: Prefix, namespace: str | None, revision: int,
           every: bool) -> None:
    named: set[str] = set()
    for batch in Watch(store, under, revision + 1):
        for ev in batch.events:
            if ev.type != "PUT":
                continue  # expired
            try:
                e = decode(ev.value, Event, ev.key)
            except StoreError as exc:
                if ev.key not in named:  # named once; the watch goes on
                    named.add(ev.key)
                    print(f"berth: {ev.key}: skipped: {exc}", file=sys.stderr)
                continue
            if namespace is None or e.involvedObject.namespace in (namespace, None):
                print("   ".join(_row(e, datetime.now(UTC), every)), flush=True)


def described(store: Store, kind: str, namespace: str | None, name: str,
              limit: int = 10) -> list[str]:
    """``describe``'s last section: the object's latest events, oldest first."""
    found, _ = listed(store, prefix(kind, namespace, name))
    events = sorted((e for _, e in found), key=lambda e: e.lastTimestamp)[-limit:]
    if not events:
        return ["Events:      <none>"]
    now = datetime.now(UTC)
    rows = [["TYPE", "REASON", "AGE", "FROM", "MESSAGE"]] + [
        [e.type, e.reason, age(e.lastTimestamp, now) + (f" (x{e.count})" if e.count > 1
                                                          else ""), e.source, e.message]
        for e in events]
    return ["Events:", *("  " + line for line in table(rows).split("\n"))]


__all__ = ["NAMES", "described", "get"]
