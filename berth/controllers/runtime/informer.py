"""An informer: a local, always-current copy of one key prefix.

It lists the prefix, then watches from the list's revision + 1; when etcd
says that revision was compacted it lists again and tells its handlers the
difference, so they see every change in order and never miss a deletion.
Values are decoded with the caller's msgspec type (usually a small view
holding only the fields the caller reads), optionally converted into what
the caller keeps (so a large fleet is held once, in the caller's own shape).
A value that does not decode (or convert) is logged with its key and
skipped; the informer keeps the last good value and keeps running. So is one
whose conversion fails in a way its converter did not foresee (any exception,
logged with its traceback): it is that value's fault or the converter's, and
either way the other keys must still be kept — it must not stop the informer,
nor make it list again and again. A key that
is none of berth's (``keys.problem``: an extra segment, an empty or
non-ASCII name — written by hand) is not an item at all: logged once, ignored.
A document whose ``metadata`` names another resource than its key does
(``keys.misplaced``: written by hand at another key) is refused like a value
that does not decode: the key is the name, and a copy at a second key would
be a second placement of the same thing.

The cache is a thread-safe store (client-go's ThreadSafeStore is the model):
only the informer's thread changes it, always under its lock, and readers on
any thread get single items or copies (``get``, ``item``, ``items``,
``list_keys``), never the dict itself. Handlers run on the informer's thread,
after the change, outside the lock.

It knows no resource kind: the prefix and the type are the caller's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Any, Final, Generic, Protocol, TypeVar, cast

from prometheus_client import Counter

from berth.store import (
    Compacted,
    Invalid,
    Store,
    StoreError,
    Unavailable,
    Watch,
    WatchEvent,
    decode,
    keys,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

DECODE_ERRORS = Counter(
    "berth_informer_decode_errors_total", "Stored values that did not decode", ["prefix"]
)
RELISTS = Counter("berth_informer_relists_total", "Lists after compaction or errors", ["prefix"])
EVENTS = Counter("berth_informer_events_total", "Changes delivered to handlers", ["prefix"])


class EventType(Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


class Item(Generic[T]):
    """A decoded value and the revision it was written at. Never changed: readers on
    any thread share it.

    Item and Event are plain slotted classes: one is made for every change
    delivered, and ``Final`` says what a frozen dataclass would, at no cost."""

    __slots__ = ("key", "lease", "mod_revision", "obj")

    def __init__(self, key: keys.Key, obj: T, mod_revision: int, lease: int = 0) -> None:
        self.key: Final = key
        self.obj: Final = obj
        self.mod_revision: Final = mod_revision
        self.lease: Final = lease  # the etcd lease the key is attached to (0: none)

    def __repr__(self) -> str:
        return f"Item({self.key!r}, {self.obj!r}, {self.mod_revision}, {self.lease})"


class Event(Generic[T]):
    """A change to one key, as the handlers are told of it."""

    __slots__ = ("key", "obj", "old", "revision", "type")

    def __init__(self, type: EventType, key: keys.Key, obj: T, old: T | None,
                 revision: int) -> None:
        self.type: Final = type
        self.key: Final = key
        self.obj: Final = obj  # the new value; for DELETED, the last known one
        self.old: Final = old
        self.revision: Final = revision

    def __repr__(self) -> str:
        return f"Event({self.type.value}, {self.key!r}, {self.obj!r}, {self.revision})"


Handler = Callable[[Event[T]], None]


class Source(Protocol[T]):
    """What a reader of an informer's copy needs of it: an item by key, and to be told
    of changes (a test hands a stand-in of its own)."""

    def get(self, key: str) -> T | None: ...

    def item(self, key: str) -> Item[T] | None: ...

    def __contains__(self, key: object) -> bool: ...

    def add_handler(self, handler: Callable[[Event[Any]], None]) -> None: ...

    def add_invalid_handler(self, handler: Callable[[keys.Key, int], None]) -> None: ...

    def add_cleared_handler(self, handler: Callable[[keys.Key, int], None]) -> None: ...


class _Valued(Protocol):
    """A stored key-value or a watch event: its value, read only when needed."""

    @property
    def value(self) -> bytes: ...


class Informer(Generic[T]):
    """Keeps ``cache`` equal to the decodable values under ``prefix``."""

    def __init__(
        self,
        store: Store,
        prefix: keys.Prefix | keys.Key,  # a Key: that key alone (and any under it)
        type_: Any,  # a msgspec type: a Struct, or a tagged union of them
        *,
        convert: Callable[[keys.Key, Any], T] | None = None,
        idle_timeout: float = 30.0,
        retry_delay: float = 1.0,
        layout: Callable[[str], str | None] = keys.problem,
        known: Callable[[str, int, Callable[[], bytes]], Any] | None = None,
    ) -> None:
        """Keep values of ``type_``; with ``convert``, keep ``convert(key, value)``.
        ``layout``: why a key is not one to keep (None: it is). ``known(key,
        revision, read)``: the value this process itself wrote at exactly that revision,
        as kept (converted already), if it knows it (its own writes echoed by the watch
        are then neither decoded nor converted again: handlers see the very object);
        ``read()`` gives the stored bytes, for a writer that knows what it wrote but not
        yet where it landed."""
        self.store = store
        self.prefix = prefix
        self.type = type_
        self.convert = convert
        self.idle_timeout = idle_timeout
        self.retry_delay = retry_delay
        self.layout = layout
        self.known = known
        self.handlers: list[Handler[T]] = []
        self.invalid_handlers: list[Callable[[keys.Key, int], None]] = []
        self.cleared_handlers: list[Callable[[keys.Key, int], None]] = []
        self._invalid: dict[str, int] = {}  # key → revision of the value that did not decode
        self._items: dict[str, Item[T]] = {}  # changed by the informer's thread only
        self._lock = threading.Lock()  # guards _items: held for one change or one copy
        self.revision = 0  # everything up to here has been delivered
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._watch: Watch | None = None
        self._seen = threading.Condition()
        self._worker: threading.Thread | None = None
        self._odd: set[str] = set()  # keys outside berth's layout, said once each
        self._events = EVENTS.labels(prefix)

    # -- reading --------------------------------------------------------------

    def get(self, key: str) -> T | None:
        with self._lock:
            item = self._items.get(key)
        return item.obj if item else None

    def item(self, key: str) -> Item[T] | None:
        """The value at ``key`` with its revision, or None."""
        with self._lock:
            return self._items.get(key)

    def items(self) -> list[Item[T]]:
        """A copy: every item as of now."""
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> list[keys.Key]:
        """A copy: every key as of now."""
        with self._lock:  # (every key came from etcd, or from overlay(), as a Key)
            return cast(list[keys.Key], list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def add_handler(self, handler: Handler[T]) -> None:
        self.handlers.append(handler)

    def add_invalid_handler(self, handler: Callable[[keys.Key, int], None]) -> None:
        """Called with the key and revision of each value that does not decode (so the
        key's owner can replace it: its compare-and-swap needs that revision)."""
        self.invalid_handlers.append(handler)

    def add_cleared_handler(self, handler: Callable[[keys.Key, int], None]) -> None:
        """Called with the key and revision when a key that held a value that did not
        decode is deleted (the owner's remembered garbage revision is stale then)."""
        self.cleared_handlers.append(handler)

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.synced.wait(timeout)

    def wait_for_revision(self, revision: int, timeout: float) -> bool:
        """Block until changes up to ``revision`` have been delivered."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while self.revision < revision:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._seen.wait(left)
        return True

    # -- running --------------------------------------------------------------

    def start(self) -> threading.Thread:
        self._worker = threading.Thread(
            target=self.run, name=f"informer {self.prefix}", daemon=True
        )
        self._worker.start()
        return self._worker

    def stop(self, *, wait: bool = True) -> None:
        """Stop watching; ``wait=False`` returns at once (then call ``join``)."""
        self._stop.set()
        if self._watch is not None:
            self._watch.close()
        if wait:
            self.join()

    def alive(self) -> bool:
        """The watching thread runs (or was never started, or was stopped)."""
        return (self._worker is None or self._worker.is_alive() or self._stop.is_set())

    def join(self, timeout: float = 10.0) -> None:
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout=timeout)

    def overlay(self, key: keys.Key, value: bytes) -> None:
        """What-if: take ``value`` as stored at ``key`` (it is written nowhere) and tell
        the handlers, as a watch would. Only on an informer that no longer watches."""
        self._store_value(key, value, self.revision + 1)

    def sync(self) -> None:
        """List the prefix now (the first list, or a relist) and deliver the changes."""
        self._relist()

    def run(self) -> None:
        """Watch until stopped; list first if not synced, again after compaction."""
        failures = 0  # in a row: the wait before listing again doubles, up to 30 s
        while not self._stop.is_set():
            try:
                if not self.synced.is_set():
                    self._relist()
                failures = 0
                self._watch = self.store.watch(self.prefix, self.revision + 1,
                                               idle_timeout=self.idle_timeout)
                if self._stop.is_set():
                    return
                for batch in self._watch:
                    for ev in batch.events:
                        self._apply(ev)
                    # A batch's header revision can run ahead of events still to
                    # come (etcd sends a long backlog in parts); only a quiet batch
                    # (a progress notification) vouches for its header revision.
                    self._advance(self._watch.next_revision - 1)
            except Compacted as exc:
                log.warning("informer %s: %s", self.prefix, exc)
                self.synced.clear()
                RELISTS.labels(self.prefix).inc()
            except StoreError as exc:
                if self._stop.is_set():
                    return
                failures += 1
                delay = min(30.0, self.retry_delay * 2 ** (failures - 1))
                quiet = isinstance(exc, Unavailable) or failures > 1  # the link said it
                log.log(logging.DEBUG if quiet else logging.ERROR,
                        "informer %s: %s; listing again in %.1fs", self.prefix, exc, delay)
                self.synced.clear()
                RELISTS.labels(self.prefix).inc()
                self._stop.wait(delay)
            except Exception:  # a bug must not end the watch silently: start over
                if self._stop.is_set():
                    return
                log.exception("informer %s failed; listing again in %.1fs",
                              self.prefix, self.retry_delay)
                self.synced.clear()
                RELISTS.labels(self.prefix).inc()
                self._stop.wait(self.retry_delay)

    def _relist(self) -> None:
        kvs, revision = self.store.list_prefix(self.prefix)
        seen = set()
        for kv in kvs:
            seen.add(kv.key)
            current = self.item(kv.key)
            if current is not None and current.mod_revision == kv.mod_revision:
                continue
            self._store_value(kv.key, kv, kv.mod_revision, kv.lease)
        for key in [k for k in self.list_keys() if k not in seen]:
            with self._lock:
                gone = self._items.pop(key)
            self._emit(Event(EventType.DELETED, key, gone.obj, gone.obj, revision))
        for key in [cast(keys.Key, k) for k in self._invalid if k not in seen]:
            self._cleared(key, revision)
        self._advance(revision)
        self.synced.set()

    def _apply(self, ev: WatchEvent) -> None:
        if ev.type == "DELETE":
            if ev.key in self._invalid:
                self._cleared(ev.key, ev.mod_revision)
            with self._lock:
                gone = self._items.pop(ev.key, None)
            if gone is not None:
                self._emit(Event(EventType.DELETED, ev.key, gone.obj, gone.obj, ev.mod_revision))
        else:
            self._store_value(ev.key, ev, ev.mod_revision, ev.lease)

    def _cleared(self, key: keys.Key, revision: int) -> None:
        del self._invalid[key]
        for handler in self.cleared_handlers:
            try:
                handler(key, revision)
            except Exception:
                log.exception("informer %s: handler failed on cleared %s", self.prefix, key)

    def _outside(self, key: str) -> bool:
        """Whether ``key`` is none of berth's: warned about once, never an item."""
        why = self.layout(key)
        if why is None:
            return False
        if key not in self._odd and len(self._odd) < 10_000:
            self._odd.add(key)
            log.warning("informer %s: ignoring %r: %s", self.prefix, key, why)
        return True

    def _store_value(self, key: keys.Key, kv: _Valued | bytes, revision: int,
                     lease: int = 0) -> None:
        """Keep what ``kv`` holds at ``key``: as ``known`` says it is, else decoded (a
        watch event's value is not even read then)."""
        # a key already kept passed the layout check (only this thread adds keys)
        if key not in self._items and self._outside(key):
            return

        def read() -> bytes:
            return kv if isinstance(kv, bytes) else kv.value

        try:
            obj = self.known(key, revision, read) if self.known is not None else None
            if obj is None:
                obj = decode(read(), self.type, key)
                _check_identity(key, obj)
                if self.convert is not None:
                    obj = self.convert(key, obj)
        except Exception as exc:
            DECODE_ERRORS.labels(self.prefix).inc()
            if isinstance(exc, Misplaced):
                log.error("skipping a document at another key than its own: %s", exc)
            elif isinstance(exc, Invalid | ValueError):
                log.error("skipping undecodable value: %s", exc)
            else:  # not foreseen: the converter's trace, too
                log.error("skipping %s: converting its value failed: %r", key, exc,
                          exc_info=exc)
            self._invalid[key] = revision
            for invalid in self.invalid_handlers:
                try:
                    invalid(key, revision)
                except Exception:
                    log.exception("informer %s: handler failed on invalid %s", self.prefix, key)
            return
        self._invalid.pop(key, None)
        item = Item(key, obj, revision, lease)
        with self._lock:
            old = self._items.get(key)
            self._items[key] = item
        kind = EventType.ADDED if old is None else EventType.MODIFIED
        self._emit(Event(kind, key, obj, old.obj if old else None, revision))

    def _emit(self, event: Event[T]) -> None:
        self._events.inc()
        for handler in self.handlers:
            try:
                handler(event)
            except Exception:
                log.exception(
                    "informer %s: handler failed on %s %s", self.prefix, event.type.value, event.key
                )

    def _advance(self, revision: int) -> None:
        with self._seen:
            if revision > self.revision:
                self.revision = revision
                self._seen.notify_all()


class Misplaced(Invalid):
    """A document whose metadata names another resource than its key."""


def _check_identity(key: str, obj: object) -> None:
    """Misplaced when a decoded document's metadata names another resource than ``key``.
    The informer knows no kind: a document's identity is its ``metadata`` name and
    namespace where it has them (every document berth stores does)."""
    meta = getattr(obj, "metadata", None)
    name = getattr(meta, "name", None)
    if name is None:
        return
    why = keys.misplaced(key, name, getattr(meta, "namespace", None))
    if why is not None:
        raise Misplaced(f"{key}: {why}")
