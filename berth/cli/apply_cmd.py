"""``berth apply -f FILE|DIR|-``: create or update resources from YAML.

Validated exactly as ``bootstrap`` validates (every error of every document
first, nothing written on any), then written all or nothing with a
compare-and-swap on each key's revision: an existing resource is updated
(``uid`` and ``created`` kept, ``generation`` bumped), an identical one is
``unchanged`` and not written, an application being deleted is refused.
``--dry-run`` writes nothing and prints, per document, what would change as a
diff of the stored document against the new one (credentials masked).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any

import msgspec
import yaml

from berth.actions.resources import mask
from berth.bootstrap import Loaded, Planned
from berth.cli.bootstrap_cmd import seed
from berth.store import Store, keys
from berth.store.documents import Application

_BOOKKEEPING = ("uid", "created", "modified", "generation")


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth apply``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Validate every document, then create or update them all "
                     "(compare-and-swap per key), or nothing.")
    p.add_argument("-f", "--filename", action="append", required=True, metavar="FILE|DIR|-",
                   help="a file, a directory (its .yaml/.yml/.json files) or - (stdin); "
                   "may be given more than once")
    p.add_argument("--dry-run", action="store_true",
                   help="write nothing; print what would change, as a diff")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--validate", choices=["strict", "warn", "ignore"], default="strict",
                   help="dry-run each manifest object on an ONLINE cluster of the "
                   "application's namespace first: strict (default) refuses the file on an "
                   "error, warn only says it, ignore skips it (kubectl's --validate)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    def check(store: Store, loaded: list[Loaded]) -> bool:
        return manifests_ok(store, loaded, args.validate)

    return seed(args, args.filename, command="apply", force=True, report=report,
                dry_run=diff, check=None if args.validate == "ignore" else check)


def manifests_ok(store: Store, loaded: list[Loaded], mode: str) -> bool:
    """The applications' manifests judged by a cluster (``dryrun``); False to refuse."""
    from berth.controllers.propagator.dryrun import check

    apps = [(item.where, item.doc.metadata.namespace or "default",
             msgspec.to_builtins(item.doc.spec.manifest))
            for item in loaded if isinstance(item.doc, Application)]
    if not apps:
        return True
    found = check(store, apps)
    for line in found.notes:
        print(f"note: {line}", file=sys.stderr)
    for line in found.errors:
        print(f"{'error' if mode == 'strict' else 'warning'}: {line}", file=sys.stderr)
    return mode != "strict" or not found.errors


def _name(p: Planned) -> str:
    ref = keys.parse_key(p.key)
    name = f"{ref.kind.name.lower()}/{ref.namespace + '/' if ref.namespace else ''}{ref.name}"
    return f"{name} credentials" if ref.family == "secret" else name


def report(planned: list[Planned]) -> None:
    for p in planned:
        print(f"{_name(p)} {'unchanged' if p.unchanged else 'configured' if p.old else 'created'}")


def _shown(value: bytes | None) -> list[str]:
    """A stored document as YAML lines, without the bookkeeping berth fills in."""
    if value is None:
        return []
    try:
        doc: Any = msgspec.json.decode(value)
    except msgspec.DecodeError:
        return [f"<not a document: {value[:80]!r}>"]
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
        doc["metadata"] = {k: v for k, v in doc["metadata"].items() if k not in _BOOKKEEPING}
    return yaml.safe_dump(mask(doc), sort_keys=False).splitlines(keepends=True)


def diff(planned: list[Planned]) -> None:
    for p in planned:
        if p.unchanged:
            print(f"{_name(p)} unchanged")
            continue
        print(f"{_name(p)} {'configured' if p.old else 'created'} (dry run)")
        old = _shown(p.old.value if p.old else None)
        print("".join(difflib.unified_diff(old, _shown(p.value), "stored", "applied")),
              end="")
