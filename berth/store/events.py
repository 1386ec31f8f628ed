"""Events: what happened to an object lately, in the shape of a Kubernetes Event, kept
for an hour (docs/events.md).

An event is a key of its own under ``/berth/v1/events/``::

    /berth/v1/events/<plural>/[<namespace>/]<name>/<source>.<reason>.<digest>

``source`` is the process that saw it (``scheduler``, ``propagator``,
``metrics-cache``), ``digest`` a short hash of its type and message: the same
thing happening again is the same key, its ``count`` and ``lastTimestamp``
raised (:class:`~berth.controllers.runtime.events.Recorder` correlates).
Every event is attached to a lease, so etcd deletes it about ``ttl`` after it
last happened; the ledger (:mod:`berth.store.ledger`) is what stays.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import msgspec

from berth.store import keys
from berth.store.client import Store
from berth.store.codec import decode
from berth.store.errors import StoreError

EVENTS = keys.EVENTS
NORMAL, WARNING = "Normal", "Warning"


class InvolvedObject(msgspec.Struct, omit_defaults=True):
    kind: str
    name: str
    namespace: str | None = None


class Event(msgspec.Struct, tag_field="kind", tag="Event", omit_defaults=True):
    """One thing that happened to an object, ``count`` times from ``firstTimestamp`` to
    ``lastTimestamp`` (Kubernetes' core/v1 Event, its fields that berth fills, by their
    names)."""

    involvedObject: InvolvedObject
    type: str  # Normal or Warning
    reason: str  # UpperCamelCase: Moved, FailedScheduling, Unhealthy
    message: str
    source: str  # the process that saw it
    firstTimestamp: datetime
    lastTimestamp: datetime
    count: int = 1


prefix = keys.events_prefix


def key(obj: InvolvedObject, source: str, type_: str, reason: str, message: str) -> keys.Key:
    """The key an event lives at: the same object, source, type, reason and message are
    the same key (a repeat counts there)."""
    digest = hashlib.blake2b(f"{type_}\0{message}".encode(), digest_size=6).hexdigest()
    return keys.event_key(prefix(obj.kind, obj.namespace, obj.name), source, reason, digest)


def listed(store: Store, under: keys.Prefix = EVENTS
           ) -> tuple[list[tuple[keys.Key, Event]], list[str]]:
    """The events under ``under`` with their keys, and what could not be read (one line
    per key that holds no event: named, skipped)."""
    kvs, _ = store.list_prefix(under)
    out: list[tuple[keys.Key, Event]] = []
    problems: list[str] = []
    for kv in kvs:
        try:
            out.append((kv.key, decode(kv.value, Event, kv.key)))
        except StoreError as exc:
            problems.append(f"{kv.key}: skipped: {exc}")
    return out, problems


__all__ = ["EVENTS", "NORMAL", "WARNING", "Event", "InvolvedObject", "key", "listed", "prefix"]
