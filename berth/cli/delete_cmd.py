"""``berth delete KIND [NAMESPACE/]NAME...`` or ``berth delete -f FILE``: delete
resources the way berth expects.

An Application is marked deleted (``metadata.deleted``); the propagator then
removes its objects from every cluster and deletes the key (a finalizer).
Every other kind is deleted at once. Both writes are guarded by the revision
just read, so a concurrent change is never overwritten. ``-f`` deletes the
resources a YAML file (or directory, or ``-``) defines, validated first.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

import msgspec

from berth.bootstrap import LoadErrors, load
from berth.cli.etcd_options import open_store
from berth.cli.kinds import named
from berth.store import Conflict, Delete, Put, Store, keys


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth delete``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Mark an Application deleted (the propagator removes it "
                     "from its clusters, then its key); delete any other resource's key.")
    p.add_argument("kind", nargs="?", help="a kind: applications, cluster, app, ...; or "
                   "TYPE/[NAMESPACE/]NAME")
    p.add_argument("names", nargs="*", metavar="[NAMESPACE/]NAME",
                   help="namespace defaults to -n's for namespaced kinds")
    p.add_argument("-n", "--namespace", default="default", help="default: default")
    p.add_argument("-f", "--filename", action="append", metavar="FILE|DIR|-",
                   help="delete what these documents define")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if bool(args.filename) == bool(args.kind):
        raise ValueError("give either KIND NAME... or -f FILE")
    if args.kind and not args.names and "/" not in args.kind:
        raise ValueError(f"delete {args.kind}: which? give one or more [NAMESPACE/]NAME")
    if args.filename:
        try:
            targets = [(keys.parse_key(item.key).kind, item.key) for item in load(args.filename)]
        except LoadErrors as exc:
            for line in exc.errors:
                print(f"error: {line}", file=sys.stderr)
            return 1
    else:
        targets = []
        for kind, names in named(args.kind, args.names):
            for text in names:
                namespace, _, name = text.rpartition("/")
                targets.append((kind, keys.resource_key(
                    kind.name, name, (namespace or args.namespace) if kind.namespaced
                    else None)))
    store = open_store(args)
    failed = [key for kind, key in targets if not delete(store, kind, key)]
    return 1 if failed else 0


def delete(store: Store, kind: keys.Kind, key: keys.Key) -> bool:
    """Delete (or mark deleted) one resource; say what happened. False: it failed."""
    kv = store.get(key)
    if kv is None:
        print(f"error: nothing at {key}", file=sys.stderr)
        return False
    ref = keys.parse_key(key)
    secrets = Delete(keys.secrets_key(kind.name, ref.name, ref.namespace))  # they go with it
    try:
        if kind.name != "Application":
            store.commit([Delete(key, kv.mod_revision), secrets])
            print(f"deleted {key}")
            return True
        doc: Any = msgspec.json.decode(kv.value)
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if not isinstance(meta, dict):
            print(f"error: {key} holds no document (no metadata); delete it with etcdctl",
                  file=sys.stderr)
            return False
        if meta.get("deleted"):
            print(f"{key} is already being deleted (since {meta['deleted']})")
            return True
        meta["deleted"] = datetime.now(UTC)  # encoded as every timestamp: ...Z
        # an application's objects are removed by reference: its secrets are not needed
        store.commit([Put(key, msgspec.json.encode(doc), kv.mod_revision), secrets])
        print(f"marked {key} deleted; the propagator removes it from its clusters, then the key")
        return True
    except Conflict:
        print(f"error: {key} changed meanwhile; try again", file=sys.stderr)
    except msgspec.DecodeError as exc:
        print(f"error: {key} holds no document ({exc}); delete it with etcdctl",
              file=sys.stderr)
    return False
