"""The ledger in etcd: where records live, their ids, reading them back, and what
retention removes (docs/ledger.md).

Each record is a key of its own under ``/berth/v1/ledger/``::

    /berth/v1/ledger/<plural>/<namespace>/<name>/<id>.<by>.<bytes>

``id`` is the record's time, UTC to the microsecond (``20261128T013000.123456Z``),
so a resource's records list in the order they happened; ``by`` is the process
that wrote it (``scheduler``, ``propagator``), ``bytes`` the size of its value.
The id and size ride in the key so that retention works from a keys-only
range, without reading a value. A record is created once (guarded on its
absence) and never rewritten; etcd's compaction leaves live keys alone, so a
record stays until retention deletes it.

Retention keeps, of each resource's records by each process, the newest
``keep``; none older than ``days``; and, over every record, at most
``max_bytes`` — the oldest go first, whoever wrote them. The scheduler's leader
applies it (:class:`~berth.controllers.scheduler.trim.Trimmer`).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec

from berth.store import keys
from berth.store.client import Store
from berth.store.codec import decode, encode
from berth.store.documents.ledger import Record
from berth.store.errors import StoreError
from berth.store.ops import Put

log = logging.getLogger(__name__)

LEDGER = keys.LEDGER
ID_FORMAT = "%Y%m%dT%H%M%S.%fZ"
WRITERS = ("scheduler", "propagator")


def record_id(at: datetime) -> str:
    """The id of a record made at ``at`` (UTC, to the microsecond: sorts as it happened):
    ``ID_FORMAT``, written out (strftime costs several times as much)."""
    t = at.astimezone(UTC) if at.utcoffset() else at
    return (f"{t.year:04d}{t.month:02d}{t.day:02d}T{t.hour:02d}{t.minute:02d}"
            f"{t.second:02d}.{t.microsecond:06d}Z")


def id_time(rid: str) -> datetime:
    """The time a record id names; ValueError if it names none."""
    return datetime.strptime(rid, ID_FORMAT).replace(tzinfo=UTC)


prefix = keys.ledger_prefix


@dataclass(frozen=True, slots=True)
class Entry:
    """A record's key, parsed: whose it is, when, by whom, how large."""

    key: keys.Key
    resource: str  # the key's prefix: one resource's records
    id: str
    at: datetime
    by: str
    size: int


def parse(key: str) -> Entry:
    """A ledger key's parts; ValueError for a key berth did not make."""
    if not key.startswith(LEDGER):
        raise ValueError(f"{key!r} is not a ledger key")
    head, _, last = key.rpartition("/")
    try:
        keys.parse_key(keys.ROOT + head[len(LEDGER):])  # a resource's key: its layout
    except ValueError as exc:  # said of the ledger's key, not the resource's it names
        raise ValueError(f"{key!r}: not <kind>/[<namespace>/]<name>/<record> under "
                         f"{LEDGER} ({str(exc).partition(': ')[2] or exc})") from None
    parts = last.rsplit(".", 2)
    if len(parts) != 3 or parts[1] not in WRITERS or not parts[2].isdigit():
        raise ValueError(f"{key!r}: expected <id>.<{'|'.join(WRITERS)}>.<bytes>")
    rid, by, size = parts
    return Entry(keys.Key(key), head + "/", rid, id_time(rid), by, int(size))


class Stamps:
    """Strictly increasing times for one process's records: two records of the same
    resource never share an id, however coarse or still the clock."""

    def __init__(self) -> None:
        self._last: datetime | None = None
        self._lock = threading.Lock()

    def next(self, now: datetime) -> datetime:
        with self._lock:
            if self._last is not None and now <= self._last:
                now = self._last + timedelta(microseconds=1)
            self._last = now
            return now


def put(kind: str, namespace: str | None, name: str, by: str, record: Record,
        rid: str = "") -> Put:
    """The write that creates ``record`` of a resource, by process ``by`` (only if its
    key is absent: a record is never rewritten); ``rid``: its id if already made."""
    value = encode(record)
    return Put(keys.ledger_key(prefix(kind, namespace, name), rid or record_id(record.time),
                               by, len(value)), value, 0)


def history(store: Store, kind: str, namespace: str | None, name: str
            ) -> tuple[list[tuple[Entry, Record]], list[str]]:
    """A resource's records with their keys, oldest first, and what could not be read
    (one line per key that is not a record: named, skipped)."""
    kvs, _ = store.list_prefix(prefix(kind, namespace, name))
    out: list[tuple[Entry, Record]] = []
    problems: list[str] = []
    for kv in kvs:
        try:
            out.append((parse(kv.key), decode(kv.value, Record, kv.key)))
        except (ValueError, StoreError, msgspec.DecodeError) as exc:
            problems.append(f"{kv.key}: skipped: {exc}")
    out.sort(key=lambda er: er[0].id)
    return out, problems


@dataclass(frozen=True, slots=True)
class Retention:
    """How much of the ledger is kept (docs/ledger.md "Retention")."""

    keep: int = 100  # newest records per resource and writer
    days: float = 30.0
    max_bytes: int = 256 << 20  # every record's value together


def doomed(entries: Iterable[Entry], retention: Retention, now: datetime,
           cutoff: datetime | None = None) -> Iterator[Entry]:
    """Of one resource's ``entries``, those retention removes: beyond the newest
    ``keep`` of a writer, older than ``days``, or not newer than ``cutoff`` (the
    total's: :func:`size_cutoff`)."""
    oldest = now - timedelta(days=retention.days)
    if cutoff is not None:
        oldest = max(oldest, cutoff + timedelta(microseconds=1))
    by: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by[e.by].append(e)
    for mine in by.values():
        mine.sort(key=lambda e: e.id)
        extra = len(mine) - retention.keep
        for i, e in enumerate(mine):
            if i < extra or e.at < oldest:
                yield e


SIZE_STEP = timedelta(minutes=1)  # the size limit's grain: what one byte over costs


def size_bucket(at: datetime) -> datetime:
    """The start of the minute ``at`` falls in: records are weighed by the minute."""
    return at.replace(second=0, microsecond=0)


def size_cutoff(sizes: dict[datetime, int], max_bytes: int) -> datetime | None:
    """The end of the newest minute whose records (and every older one's) must go for
    the rest to fit in ``max_bytes``; None when everything fits. ``sizes``: bytes per
    minute (its start, :func:`size_bucket`)."""
    total = 0
    for minute in sorted(sizes, reverse=True):
        total += sizes[minute]
        if total > max_bytes:
            return minute + SIZE_STEP - timedelta(microseconds=1)
    return None


__all__ = ["LEDGER", "WRITERS", "Entry", "Retention", "Stamps", "doomed", "history",
           "id_time", "parse", "prefix", "put", "record_id", "size_bucket", "size_cutoff"]
