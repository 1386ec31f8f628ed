"""An application's history: its last manifests, written with each new generation.

``berth apply`` adds the manifest of every new generation of an Application
to ``/berth/v1/history/applications/<ns>/<name>`` in the transaction that
writes the generation, so the history and the application never disagree.
It keeps the last ``spec.rollout.historyLimit`` manifests (10 by default)
and at most :data:`HISTORY_BYTES` of them; the newest is always kept. Being
the current value of a live key, it survives etcd's compaction. A rollout
holds clusters on (or rolls them back to) a generation from it, and
``berth rollout undo`` writes one of them again as a new generation.

Secrets' data is not in it: the manifests are kept as the application's
document keeps them, with the data stored apart; a Secret always takes its
current data (docs/rollouts.md).
"""

from __future__ import annotations

import logging
from datetime import datetime

import msgspec

from berth.bootstrap.load import Loaded
from berth.store import KV, Store, StoreError, encode, keys
from berth.store.codec import decode
from berth.store.documents import Application
from berth.store.documents.rollouts import (
    HISTORY_BYTES,
    HISTORY_LIMIT,
    ApplicationHistory,
    HistoryMeta,
    Revision,
)

log = logging.getLogger(__name__)


def kept(item: Loaded) -> bool:
    """Whether ``item`` is a document whose manifests are kept (an Application)."""
    return isinstance(item.doc, Application)


def key_of(item: Loaded) -> keys.Key:
    meta = item.doc.metadata
    return keys.history_key(meta.namespace or "", meta.name)


def _decoded(old: KV | None) -> ApplicationHistory | None:
    if old is None:
        return None
    try:
        return decode(old.value, ApplicationHistory, old.key)
    except StoreError as exc:
        log.warning("%s: not a history (%s); starting it again", old.key, exc)
        return None


def added(old: KV | None, doc: msgspec.Struct, now: datetime, *, created: bool) -> bytes:
    """The history at ``old`` with ``doc``'s generation added, trimmed to its limits. A
    new application starts a new history (one left by an earlier namesake is dropped)."""
    assert isinstance(doc, Application)
    meta = doc.metadata
    was = None if created else _decoded(old)
    revisions = [r for r in (was.revisions if was else []) if r.generation < meta.generation]
    revisions.append(Revision(meta.generation, doc.spec.manifest, now))
    limit = doc.spec.rollout.history_limit if doc.spec.rollout else HISTORY_LIMIT
    revisions = revisions[-max(1, limit):]
    made = ApplicationHistory(HistoryMeta(meta.name, meta.namespace), revisions)
    value = encode(made)
    while len(value) > HISTORY_BYTES and len(made.revisions) > 1:
        made.revisions.pop(0)
        value = encode(made)
    return value


def stored(store: Store, namespace: str, name: str) -> ApplicationHistory | None:
    """The application's history as stored (None: none kept); StoreError if unreadable."""
    kv = store.get(keys.history_key(namespace, name))
    return decode(kv.value, ApplicationHistory, kv.key) if kv is not None else None
