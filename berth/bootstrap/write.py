"""Writing validated documents all or nothing.

Input that fits one etcd transaction (128 operations by default) is written
in one. Larger input is written in transactions of 128; if one fails, every
chunk already written is rolled back (created keys deleted, replaced keys
restored), each rollback guarded by the revision we wrote, so a concurrent
writer's change is never undone; a key that cannot be rolled back is named.

A document identical to what is stored (but for the bookkeeping berth fills
in: uid, created, modified, generation) is ``unchanged`` and not written, so
applying the same YAML again changes nothing and wakes no process. Other
existing resources are an error unless ``force``: then they are replaced,
keeping ``uid`` and ``created`` and bumping ``generation``, guarded by the
revision read, so a concurrent change makes the whole write fail cleanly. An
application being deleted is never replaced: that would bring it back.

A Cluster's kubeconfig credentials (its ``users``) are written to their own
key next to it, in the same transaction (:mod:`berth.store.credentials`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from berth.bootstrap.load import Loaded, LoadErrors
from berth.store import KV, MAX_TXN_OPS, Delete, Put, Store, StoreError, encode, keys
from berth.store.codec import decode
from berth.store.credentials import credentials_doc, has_credentials, split
from berth.store.documents import Cluster, Metadata

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Planned:
    where: str
    key: str
    value: bytes
    old: KV | None  # the value replaced (None: a create)
    unchanged: bool = False  # identical to what is stored: nothing to write

    @property
    def action(self) -> str:
        return "unchanged" if self.unchanged else "replace" if self.old else "create"


@dataclass(frozen=True, slots=True)
class Result:
    created: int
    replaced: int
    revision: int
    unchanged: int = 0


def plan(store: Store, loaded: Sequence[Loaded], *, force: bool,
         now: datetime | None = None) -> list[Planned]:
    """Fill in metadata and decide create, replace or unchanged; LoadErrors for
    existing keys (without ``force``) and for applications being deleted."""
    now = now or datetime.now(UTC)
    loaded, secrets = _apart(loaded)
    existing = store.get_many([item.key for item in loaded] + [k for _, k, _ in secrets.values()])
    errors: list[str] = []
    planned: list[Planned] = []
    for item in loaded:
        if item.key in secrets:  # the Cluster's credentials, at their own key, after it
            where, skey, svalue = secrets[item.key]
            sold = existing.get(skey)
            if sold is not None and sold.value != svalue and not force:
                errors.append(f"{where}: {skey} exists and differs (use --force to "
                              "replace it)")
            else:
                planned.append(Planned(where, skey, svalue, sold,
                                       unchanged=sold is not None and sold.value == svalue))
        old = existing.get(item.key)
        meta = item.doc.metadata
        if old is None:
            meta = msgspec.structs.replace(
                meta, uid=meta.uid or str(uuid.uuid4()), created=now, modified=now,
                generation=1,
            )
            doc = msgspec.structs.replace(item.doc, metadata=meta)
            planned.append(Planned(item.where, item.key, encode(doc), None))
            continue
        previous = _old_metadata(old)
        if previous is not None and previous.deleted is not None:
            since = msgspec.json.decode(msgspec.json.encode(previous.deleted))
            errors.append(f"{item.where}: {item.key} is being deleted (since {since}); "
                          "apply it again once it is gone")
            continue
        if previous is not None:
            same = msgspec.structs.replace(item.doc, metadata=msgspec.structs.replace(
                meta, uid=previous.uid, created=previous.created, modified=previous.modified,
                generation=previous.generation))
            if encode(same) == old.value:
                planned.append(Planned(item.where, item.key, old.value, old, unchanged=True))
                continue
        if not force:
            errors.append(f"{item.where}: {item.key} exists and differs (use --force to "
                          "replace it)")
            continue
        meta = msgspec.structs.replace(
            meta,
            uid=previous.uid if previous and previous.uid else meta.uid or str(uuid.uuid4()),
            created=previous.created if previous and previous.created else now,
            modified=now,
            generation=(previous.generation if previous else 0) + 1,
            deleted=None,
        )
        doc = msgspec.structs.replace(item.doc, metadata=meta)
        planned.append(Planned(item.where, item.key, encode(doc), old))
    if errors:
        raise LoadErrors(errors)
    return planned


def _apart(loaded: Sequence[Loaded]) -> tuple[list[Loaded], dict[str, tuple[str, str, bytes]]]:
    """Clusters with their kubeconfig's credentials taken out, and those credentials
    as (where, key, value) by the Cluster's key (see :mod:`berth.store.credentials`)."""
    out: list[Loaded] = []
    secrets: dict[str, tuple[str, str, bytes]] = {}
    for item in loaded:
        doc = item.doc
        if isinstance(doc, Cluster) and has_credentials(doc.spec.kubeconfig):
            assert doc.spec.kubeconfig is not None
            public, users = split(doc.spec.kubeconfig)
            doc = msgspec.structs.replace(
                doc, spec=msgspec.structs.replace(doc.spec, kubeconfig=public))
            item = Loaded(item.where, doc, item.key)
            meta = doc.metadata
            assert meta.namespace is not None  # a Cluster is namespaced: validated on load
            secrets[item.key] = (f"{item.where} (its credentials)",
                                 keys.credentials_key(meta.namespace, meta.name),
                                 encode(credentials_doc(meta.name, meta.namespace, users)))
        out.append(item)
    return out, secrets


def _old_metadata(old: KV) -> Metadata | None:
    """The stored document's metadata, if it decodes (it may be garbage)."""
    try:
        header = decode(old.value, _Meta, old.key)
    except StoreError as exc:
        log.warning("replacing an undecodable value: %s", exc)
        return None
    return header.metadata


class _Meta(msgspec.Struct):
    metadata: Metadata


def write(store: Store, planned: Sequence[Planned], *,
          progress: Progress | None = None) -> Result:
    """Write ``planned`` all or nothing; StoreError (after rollback) on failure."""
    unchanged = sum(1 for p in planned if p.unchanged)
    planned = [p for p in planned if not p.unchanged]
    ops = [Put(p.key, p.value, p.old.mod_revision if p.old else 0) for p in planned]
    done: list[tuple[Sequence[Planned], int]] = []
    revision = 0
    for start in range(0, len(ops), MAX_TXN_OPS):
        chunk = ops[start : start + MAX_TXN_OPS]
        try:
            revision = store.commit(chunk)
        except StoreError as exc:
            if done:
                try:
                    _rollback(store, done, progress)
                except StoreError as incomplete:
                    raise StoreError(f"{exc}; {incomplete}") from exc
            raise StoreError(f"{exc}; nothing was written") from exc
        done.append((planned[start : start + MAX_TXN_OPS], revision))
        if progress:
            progress("written", min(start + MAX_TXN_OPS, len(ops)), len(ops))
    replaced = sum(1 for p in planned if p.old is not None)
    return Result(len(planned) - replaced, replaced, revision, unchanged)


def _rollback(store: Store, done: list[tuple[Sequence[Planned], int]],
              progress: Progress | None) -> None:
    undo: list[Put | Delete] = []
    for chunk, revision in done:
        for p in chunk:
            if p.old is None:
                undo.append(Delete(p.key, revision))
            else:
                undo.append(Put(p.key, p.old.value, revision, p.old.lease))
    failed: list[str] = []
    for start in range(0, len(undo), MAX_TXN_OPS):
        ops = undo[start : start + MAX_TXN_OPS]
        try:
            store.commit(ops)
        except StoreError:
            # Someone changed some of these meanwhile: undo the rest one by one.
            for op in ops:
                try:
                    store.commit([op])
                except StoreError as exc:
                    failed.append(f"{op.key} ({exc})")
        if progress:
            progress("rolled back", min(start + MAX_TXN_OPS, len(undo)), len(undo))
    if failed:
        raise StoreError("rollback incomplete; changed by someone else meanwhile: "
                         + ", ".join(failed))

