"""``berth delete KIND [NAMESPACE/]NAME``: delete a resource the way berth expects.

An Application is marked deleted (``metadata.deleted``); the propagator then
removes its objects from every cluster and deletes the key (a finalizer).
Every other kind is deleted at once. Both writes are guarded by the revision
just read, so a concurrent change is never overwritten.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

import msgspec

from cli.etcd_options import open_store
from cli.kinds import resolve
from store import Conflict, keys


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("delete", help="delete a resource (an Application via the propagator)",
                       description="Mark an Application deleted (the propagator removes it "
                       "from its clusters, then its key); delete any other resource's key.")
    p.add_argument("kind", help="a kind or its plural: Application, clusters, ...")
    p.add_argument("name", metavar="[NAMESPACE/]NAME",
                   help="namespace defaults to 'default' for namespaced kinds")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        kind = resolve(args.kind)
        namespace, _, name = args.name.rpartition("/")
        key = keys.resource_key(kind.name, name,
                                (namespace or "default") if kind.namespaced else None)
        store = open_store(args)
        kv = store.get(key)
        if kv is None:
            print(f"error: nothing at {key}", file=sys.stderr)
            return 1
        if kind.name != "Application":
            store.delete(key, kv.mod_revision)
            print(f"deleted {key}")
            return 0
        doc: Any = msgspec.json.decode(kv.value)
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if not isinstance(meta, dict):
            print(f"error: {key} holds no document (no metadata); delete it with etcdctl",
                  file=sys.stderr)
            return 1
        if meta.get("deleted"):
            print(f"{key} is already being deleted (since {meta['deleted']})")
            return 0
        meta["deleted"] = datetime.now(UTC)  # encoded as every timestamp: ...Z
        store.update(key, msgspec.json.encode(doc), kv.mod_revision)
        print(f"marked {key} deleted; the propagator removes it from its clusters, then the key")
    except Conflict:
        print(f"error: {args.name} changed meanwhile; try again", file=sys.stderr)
        return 1
    except msgspec.DecodeError as exc:
        print(f"error: {args.name} holds no document ({exc}); delete it with etcdctl",
              file=sys.stderr)
        return 1
    return 0
