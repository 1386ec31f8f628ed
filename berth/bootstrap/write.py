"""Writing validated documents all or nothing.

Input that fits one etcd transaction (128 operations by default) is written
in one. Larger input is written in transactions of 128. A member that dies
with a chunk in flight does not fail the write: the chunk goes to the next
member, and a guard that then fails is read back (the chunk landed if every
key holds its value). If a chunk fails for good (a conflict, or no member
answers), every chunk already written is rolled back (created keys deleted,
replaced keys restored), each rollback guarded by the revision we wrote, so a
concurrent writer's change is never undone; the error says what was rolled
back, and names a key that could not be.

A document identical to what is stored (but for the bookkeeping berth fills
in: uid, created, modified, generation) is ``unchanged`` and not written, so
applying the same YAML again changes nothing and wakes no process. Other
existing resources are an error unless ``force``: then they are replaced,
keeping ``uid`` and ``created`` and bumping ``generation``, guarded by the
revision read, so a concurrent change makes the whole write fail cleanly. An
application being deleted is never replaced: that would bring it back.

A document's secrets (a Cluster's kubeconfig users, an Application's Secrets'
data, passwords and tokens of any other kind) are written to their own key
under ``/berth/v1/secrets/``, in the same transaction, with the document's
generation (:mod:`berth.store.credentials`); a change of a secret alone is
a new generation of its document. Each new generation of an Application adds
its manifest to the application's history (:mod:`berth.bootstrap.history`),
in the same transaction too.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from berth.bootstrap import depends, history, overrides, stages
from berth.bootstrap.load import Loaded, LoadErrors
from berth.store import KV, Delete, Put, Store, StoreError, encode, keys
from berth.store.codec import decode
from berth.store.credentials import STORED, Credentials, same, split
from berth.store.documents import Metadata
from berth.store.documents.reasons import listed

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Planned:
    where: str
    key: keys.Key
    value: bytes
    old: KV | None  # the value replaced (None: a create)
    unchanged: bool = False  # identical to what is stored: nothing to write
    bookkeeping: bool = False  # written with a document (its history): not one itself

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
    existing keys (without ``force``) and for applications being deleted. A document's
    secrets go to their own key, written with it (and with its generation)."""
    now = now or datetime.now(UTC)
    misfits = overrides.problems(store, loaded)
    doubled, unchosen = stages.problems(store, loaded)
    loops, unmet = depends.problems(store, loaded)
    misfits += doubled + loops
    for warning in unchosen + unmet:
        log.warning("%s", warning)
    if misfits:
        raise LoadErrors(misfits)
    parts = [_apart(item) for item in loaded]
    existing = store.get_many([item.key for item, _ in parts]
                              + [_secrets_key(item) for item, creds in parts if creds]
                              + [history.key_of(item) for item, _ in parts
                                 if history.kept(item)])
    errors: list[str] = []
    planned: list[Planned] = []
    for item, creds in parts:
        skey = _secrets_key(item) if creds is not None else keys.NO_KEY
        sold = existing.get(skey) if creds is not None else None
        old = existing.get(item.key)
        meta = item.doc.metadata
        if old is None:
            meta = msgspec.structs.replace(
                meta, uid=meta.uid or str(uuid.uuid4()), created=now, modified=now,
                generation=1,
            )
            doc = msgspec.structs.replace(item.doc, metadata=meta)
            planned += _with_secrets(Planned(item.where, item.key, encode(doc), None),
                                     creds, skey, sold, 1)
            planned += _with_history(item, doc, existing, now, created=True)
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
            if encode(same) == old.value and _same_secrets(creds, sold):
                planned.append(Planned(item.where, item.key, old.value, old, unchanged=True))
                if creds is not None and sold is not None:
                    planned.append(Planned(f"{item.where} (its credentials)", skey,
                                           sold.value, sold, unchanged=True))
                continue
        if not force:
            errors.append(f"{item.where}: {item.key} exists and differs (use --force to "
                          "replace it)")
            continue
        generation = (previous.generation if previous else 0) + 1
        meta = msgspec.structs.replace(
            meta,
            uid=previous.uid if previous and previous.uid else meta.uid or str(uuid.uuid4()),
            created=previous.created if previous and previous.created else now,
            modified=now,
            generation=generation,
            deleted=None,
        )
        doc = msgspec.structs.replace(item.doc, metadata=meta)
        planned += _with_secrets(Planned(item.where, item.key, encode(doc), old), creds, skey,
                                 sold, generation)
        planned += _with_history(item, doc, existing, now, created=previous is None)
    if errors:
        raise LoadErrors(errors)
    return planned


def _with_history(item: Loaded, doc: msgspec.Struct, existing: dict[str, KV],
                  now: datetime, *, created: bool) -> list[Planned]:
    """An application's history with this generation's manifest added (guarded by the
    revision read, as the document is)."""
    if not history.kept(item):
        return []
    key = history.key_of(item)
    old = existing.get(key)
    value = history.added(old, doc, now, created=created)
    return [Planned(f"{item.where} (its history)", key, value, old, bookkeeping=True)]


def _secrets_key(item: Loaded) -> keys.Key:
    meta = item.doc.metadata
    return keys.secrets_key(_kind(item), meta.name, meta.namespace)


def _kind(item: Loaded) -> str:
    return keys.parse_key(item.key).kind.name


def _with_secrets(doc: Planned, creds: Credentials | None, skey: keys.Key, sold: KV | None,
                  generation: int) -> list[Planned]:
    """The document, and its secrets after it (written with its generation)."""
    if creds is None:
        return [doc]
    value = encode(msgspec.structs.replace(creds, generation=generation))
    return [doc, Planned(f"{doc.where} (its credentials)", skey, value, sold)]


def _same_secrets(creds: Credentials | None, sold: KV | None) -> bool:
    """Whether the secrets to write are those stored (a document without any: yes)."""
    if creds is None:
        return True
    if sold is None:
        return False
    try:
        stored = decode(sold.value, STORED, sold.key)
    except StoreError:
        return False
    return same(creds, stored)


def _apart(item: Loaded) -> tuple[Loaded, Credentials | None]:
    """The document without its secrets, and them (see :mod:`berth.store.credentials`)."""
    kind = _kind(item)
    public, creds = split(kind, msgspec.to_builtins(item.doc))
    if creds is None:
        return item, None
    doc = msgspec.convert(public, type(item.doc))
    return Loaded(item.where, doc, item.key), creds


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
    """Write ``planned`` all or nothing; StoreError (after rollback) on failure.

    Each chunk goes through :meth:`Store.commit_surely`: a member that dies with a chunk
    in flight does not end the write (the chunk is sent to the next member, and found
    landed if it did); only when no member answers is what was written rolled back."""
    unchanged = sum(1 for p in planned if p.unchanged)
    planned = [p for p in planned if not p.unchanged]
    ops = [Put(p.key, p.value, p.old.mod_revision if p.old else 0) for p in planned]
    done: list[tuple[Sequence[Planned], int]] = []
    revision = 0
    room = store.room
    for start in range(0, len(ops), room):
        chunk = ops[start : start + room]
        try:
            revision = store.commit_surely(chunk)
        except StoreError as exc:
            if not done:
                raise StoreError(f"{exc}; nothing was written") from exc
            written = [p.key for chunk_done, _ in done for p in chunk_done]
            what = (f"the {len(written)} keys written before it ({written[0]} to "
                    f"{written[-1]})")
            try:
                _rollback(store, done, progress)
            except StoreError as incomplete:
                raise StoreError(f"{exc}; rolling back {what}: {incomplete}") from exc
            raise StoreError(f"{exc}; {what} were rolled back: nothing was written") from exc
        done.append((planned[start : start + room], revision))
        if progress:
            progress("written", _documents(planned[:start + room]),
                     _documents(planned))
    replaced = sum(1 for p in planned if p.old is not None and not p.bookkeeping)
    return Result(_documents(planned) - replaced, replaced, revision, unchanged)


def _documents(planned: Sequence[Planned]) -> int:
    """How many of ``planned`` are documents (not the bookkeeping written with them)."""
    return sum(1 for p in planned if not p.bookkeeping)


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
    room = store.room
    for start in range(0, len(undo), room):
        ops = undo[start : start + room]
        try:
            store.commit_surely(ops)
        except StoreError:
            # Someone changed some of these meanwhile: undo the rest one by one.
            for op in ops:
                try:
                    store.commit_surely([op])
                except StoreError as exc:
                    failed.append(f"{op.key} ({exc})")
        if progress:
            progress("rolled back", min(start + room, len(undo)), len(undo))
    if failed:
        raise StoreError("rollback incomplete; changed by someone else meanwhile, or etcd "
                         "unreachable: " + listed(failed, named=10))
