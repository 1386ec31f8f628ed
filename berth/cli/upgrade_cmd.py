"""``berth upgrade``: bring what is stored to this version's layout.

Documents written before every kind's secrets were kept apart (a Project's or
a Cloud's OpenStack ``auth``, a Kafka provider's ``sasl_password``, a
Cluster's kubeconfig users, an Application's Secrets' data) still carry them
inline, where every process's etcd role may read them. This moves them under
``/berth/v1/secrets/`` (:mod:`berth.store.credentials`), each document with
its secrets in one transaction guarded by the revisions read, so a
concurrent change makes that document's move fail (and is said) instead of
being overwritten. Run it once after upgrading berth, as an administrator
(the ``berth-admin`` user may write both); running it again changes nothing.
A document's generation is kept: what it says has not changed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from berth.cli.etcd_options import open_store
from berth.store import Put, Store, StoreError, decode, encode, keys
from berth.store.credentials import STORED, Credentials, split


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth upgrade``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Move secrets that documents still carry inline (written before "
                     "this version) under /berth/v1/secrets/; run once after upgrading.")
    p.add_argument("--dry-run", action="store_true", help="say what would move; write nothing")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    store = open_store(args)
    moved = failed = 0
    for kind in keys.KINDS.values():
        kvs, _ = store.list_prefix(keys.resource_prefix(kind.name))
        for kv in kvs:
            if keys.problem(kv.key) is not None:
                continue  # not one of berth's keys: the processes ignore it too
            outcome = upgrade(store, kind.name, kv.key, kv.value, kv.mod_revision,
                              dry_run=args.dry_run)
            if outcome is None:
                continue
            if outcome:
                print(f"error: {kv.key}: {outcome}", file=sys.stderr)
                failed += 1
            else:
                moved += 1
                print(f"{kv.key}: secrets {'would move' if args.dry_run else 'moved'} to "
                      f"{keys.secrets_key(kind.name, *_name(kv.key))}")
    print(f"{moved} document(s) {'to upgrade' if args.dry_run else 'upgraded'}"
          + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0


def _name(key: str) -> tuple[str, str | None]:
    ref = keys.parse_key(key)
    return ref.name, ref.namespace


def upgrade(store: Store, kind: str, key: keys.Key, value: bytes, revision: int, *,
            dry_run: bool = False) -> str | None:
    """Move one document's inline secrets apart: None when it has none, "" when moved
    (or, dry, to move), else why it could not be."""
    try:
        doc: Any = msgspec.json.decode(value)
    except msgspec.DecodeError as exc:
        return f"not JSON ({exc}): left as it is"
    if not isinstance(doc, dict):
        return None
    public, creds = split(kind, doc)
    if creds is None:
        return None
    name, namespace = _name(key)
    skey = keys.secrets_key(kind, name, namespace)
    try:
        stored = store.get(skey)
        old: Credentials | None = decode(stored.value, STORED, skey) if stored else None
    except StoreError as exc:
        return str(exc)
    meta = doc.get("metadata")
    generation = meta.get("generation", 0) if isinstance(meta, dict) else 0
    users = {u.get("name"): u for u in (old.users if old else [])}
    users.update({u.get("name"): u for u in creds.users})
    merged = msgspec.structs.replace(
        creds, values={**(old.values if old else {}), **creds.values},
        users=list(users.values()), generation=generation if isinstance(generation, int) else 0)
    if dry_run:
        return ""
    try:
        store.commit_surely([Put(key, encode(public), revision),
                             Put(skey, encode(merged), stored.mod_revision if stored else 0)])
    except StoreError as exc:
        return f"{exc}; run `berth upgrade` again"
    return ""
