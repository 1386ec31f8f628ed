"""``berth rollout``: see and steer how a new generation reaches an application's
clusters (docs/rollouts.md), in kubectl's manner.

- ``status APP [--watch]``: per stage and cluster, the generation there, its
  health, and what the rollout waits for; with ``--watch``, until it is
  complete (exit 0), halted or rolled back (exit 1), or ``--timeout``;
- ``pause APP`` / ``resume APP``: no more clusters start while paused
  (those in progress go on);
- ``approve APP STAGE``: let a stage that waits for approval start; refused
  for a stage that is not waiting;
- ``undo APP [--to-generation N]``: write an earlier manifest (by default the
  one before the current) as a new generation, which rolls out as any other;
- ``history APP``: the manifests kept.

Pause, resume and approve write the application's rollout controls
(``/berth/v1/rollouts/applications/<ns>/<name>``) with a compare-and-swap;
``undo`` writes the application as ``berth apply`` does, so its
history gains the new generation in the same transaction.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

from berth.actions import rollouts
from berth.actions.rollouts import Refused, approve_stage, report, set_paused
from berth.bootstrap import LoadErrors, plan, write
from berth.bootstrap.history import stored
from berth.bootstrap.load import to_document
from berth.cli.etcd_options import open_store
from berth.cli.kinds import application
from berth.store import Invalid, Store, decode, keys
from berth.store.credentials import STORED, merge, with_current_secrets
from berth.store.documents import Application
from berth.store.documents.rollouts import (
    COMPLETE,
    ENDED,
)

ACTIONS = ("status", "pause", "resume", "approve", "undo", "history")


def configure(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "See and steer the rollout of an application's new generation."
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {"status": "where the rollout stands, per stage and cluster",
             "pause": "start no more clusters (those in progress go on)",
             "resume": "go on after a pause",
             "approve": "let a stage that waits for approval start",
             "undo": "write an earlier manifest as a new generation",
             "history": "the manifests kept"}
    for action in ACTIONS:
        a = actions.add_parser(action, help=helps[action])
        a.add_argument("application", metavar="[NAMESPACE/]NAME",
                       help="also app/NAME, as kubectl takes TYPE/NAME")
        a.add_argument("-n", "--namespace", default="default", help="default: default")
        if action == "status":
            a.description = ("Where the rollout stands, per stage and cluster. Exits 1 when "
                             "it is halted or rolled back (with or without --watch), else 0.")
            a.add_argument("-w", "--watch", action="store_true",
                           help="follow it until it is complete, halted or rolled back")
            a.add_argument("--timeout", type=float, default=0.0,
                           help="seconds to watch at most (0: no limit)")
        if action == "approve":
            a.add_argument("stage")
        if action == "undo":
            a.add_argument("--to-generation", type=int, metavar="N",
                           help="the generation whose manifest to write again (default: the "
                           "one before the current)")
        a.set_defaults(run=_RUN[action])


def _name(args: argparse.Namespace) -> tuple[str, str]:
    namespace, _, name = application(args.application).rpartition("/")
    return namespace or args.namespace, name


def _opened(args: argparse.Namespace) -> tuple[Store, str, str, Application | None]:
    """The store, the application's namespace and name, and the application (None: no
    such application)."""
    namespace, name = _name(args)
    store = open_store(args)
    return store, namespace, name, rollouts.application(store, namespace, name)


def _missing(namespace: str, name: str) -> int:
    print(f"error: application {namespace}/{name} not found", file=sys.stderr)
    return 1


# -- status -----------------------------------------------------------------------


def status(args: argparse.Namespace) -> int:
    namespace, name = _name(args)
    store = open_store(args)
    started = time.monotonic()
    last = ""
    while True:
        try:
            text, r = report(store, namespace, name)
        except LookupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if text != last:
            print(text + ("\n" if args.watch else ""), flush=True)
            last = text
        ended = r is None or r.phase in (COMPLETE, *ENDED)
        if not args.watch or ended:
            return 1 if r is not None and r.phase in ENDED else 0
        if args.timeout and time.monotonic() - started > args.timeout:
            print(f"error: not complete in {args.timeout:g} s", file=sys.stderr)
            return 1
        time.sleep(1.0)


# -- pause, resume, approve -------------------------------------------------------------


def _acted(act: Callable[[], str]) -> int:
    try:
        print(act())
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def pause(args: argparse.Namespace) -> int:
    namespace, name = _name(args)
    return _acted(lambda: set_paused(open_store(args), namespace, name, True))


def resume(args: argparse.Namespace) -> int:
    namespace, name = _name(args)
    return _acted(lambda: set_paused(open_store(args), namespace, name, False))


def approve(args: argparse.Namespace) -> int:
    namespace, name = _name(args)
    return _acted(lambda: approve_stage(open_store(args), namespace, name, args.stage,
                                        _who()))


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


# -- undo, history ------------------------------------------------------------------------


def undo(args: argparse.Namespace) -> int:
    store, namespace, name, app = _opened(args)
    if app is None:
        return _missing(namespace, name)
    gen = app.metadata.generation
    history = stored(store, namespace, name)
    kept = [r.generation for r in history.revisions] if history is not None else []
    target = args.to_generation if args.to_generation is not None else max(
        (g for g in kept if g < gen), default=None)
    revision = history.revision(target) if history is not None and target else None
    if revision is None:
        which = f"generation {target}" if target else "an earlier generation"
        print(f"error: {which} of application {namespace}/{name} is not kept (kept: "
              f"{', '.join(map(str, kept)) or 'none'})", file=sys.stderr)
        return 1
    doc: dict[str, Any] = msgspec.to_builtins(app)
    creds_kv = store.get(keys.secrets_key("Application", name, namespace))
    creds = decode(creds_kv.value, STORED, creds_kv.key) if creds_kv is not None else None
    current = merge(doc, creds)["spec"].get("manifest") or []
    manifest = with_current_secrets(revision.manifest, current)
    if manifest is None:
        print(f"error: generation {target} has a Secret the current manifest no longer has: "
              "its data is not kept", file=sys.stderr)
        return 1
    doc["spec"]["manifest"] = manifest
    try:
        loaded = to_document(f"application {namespace}/{name}", doc)
        planned = plan(store, [loaded], force=True)
    except Invalid as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except LoadErrors as exc:
        for line in exc.errors:
            print(f"error: {line}", file=sys.stderr)
        return 1
    if planned[0].unchanged:
        print(f"application/{namespace}/{name} unchanged (generation {target}'s manifest "
              "is the current one)")
        return 0
    write(store, planned)
    print(f"application/{namespace}/{name} rolled back to the manifest of generation "
          f"{target}, as generation {gen + 1}")
    return 0


def history(args: argparse.Namespace) -> int:
    store, namespace, name, app = _opened(args)
    if app is None:
        return _missing(namespace, name)
    kept = stored(store, namespace, name)
    if kept is None or not kept.revisions:
        print(f"application {namespace}/{name}: no history kept (written before berth kept "
              "one, or not through berth apply)")
        return 0
    rows = [("GENERATION", "WRITTEN", "OBJECTS", "IMAGES")]
    for r in kept.revisions:
        images = sorted({c.get("image", "") for obj in r.manifest for c in _containers(obj)})
        mark = " (current)" if r.generation == app.metadata.generation else ""
        rows.append((f"{r.generation}{mark}", f"{r.written:%Y-%m-%d %H:%M:%S}" if r.written
                     else "-", str(len(r.manifest)), ", ".join(i for i in images if i) or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[3])
    return 0


def _containers(obj: Any) -> list[dict[str, Any]]:
    """The containers and initContainers of a workload's pod template."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(pod, dict):
        return []
    return [c for field in ("initContainers", "containers")
            for c in pod.get(field) or [] if isinstance(c, dict)]


_RUN = {"status": status, "pause": pause, "resume": resume, "approve": approve,
        "undo": undo, "history": history}
