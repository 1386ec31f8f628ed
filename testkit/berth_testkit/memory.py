"""etcd in memory, at the one boundary where berth speaks to it: for unit tests of the
processes that neither start a server nor sleep.

:class:`MemoryStore` is a :class:`~berth.store.Store` whose requests
(:meth:`Store.call`: ranges, transactions with their compares, leases) are
answered by :class:`Memory`, in the gateway's JSON (int64s as strings, false
booleans left out, keys and values in base64), and whose watches
(:meth:`Store.watch`) read Memory's history. Everything above that boundary —
the guarded writes and the conflicts they name, fences, informers, the Binding
writer — is berth's own code, unchanged. A test waits for what it expects with
:meth:`Memory.wait_until`, which wakes at each write: nothing polls, nothing
sleeps. A ``quota`` makes it refuse every write that puts anything once its
keys and values hold that many bytes (etcd's NOSPACE alarm; deleting frees the
space at once here, where etcd needs a compaction, a defragmentation and the
alarm disarmed). What it does not model: authentication, compaction (history
is kept whole), lease expiry (a lease ends when revoked), and more than one
member.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from berth.store import EtcdConfig, Fence, NoSpace, Store, StoreError
from berth.store.keys import Key, Prefix
from berth.store.ops import b64, unb64
from berth.store.watch import Watch, WatchBatch, WatchEvent


@dataclass(frozen=True, slots=True)
class _Stored:
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


class Memory:
    """The keys, their revisions and every change since the start, under one condition
    (each write notifies it)."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.keys: dict[str, _Stored] = {}
        self.revision = 1
        self.history: list[WatchEvent] = []  # every change, in revision order
        self.leases: dict[int, int] = {}  # lease ID → its TTL
        self._next_lease = 0x1000
        self.quota = 0  # bytes of keys and values beyond which puts are refused (0: none)
        self.refused = 0  # transactions refused for the quota

    # -- for tests ---------------------------------------------------------------------

    def wait_until(self, check: Callable[[], bool], timeout: float = 10.0) -> None:
        """Block until ``check()`` holds, re-checked at each write; AssertionError after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"not reached within {timeout}s")
                self.changed.wait(left)

    # -- the gateway ---------------------------------------------------------------------

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.changed:
            if path == "kv/range":
                return self._range(body)
            if path == "kv/txn":
                return self._txn(body)
            if path == "kv/compaction":
                return self._header()
            if path == "maintenance/status":
                used = self.in_use()
                return {**self._header(), "dbSize": str(used), "dbSizeInUse": str(used),
                        **({"dbSizeQuota": str(self.quota)} if self.quota else {})}
            if path == "maintenance/alarm":
                full = bool(self.quota) and self.in_use() >= self.quota
                return {**self._header(), "alarms": [{"alarm": "NOSPACE"}] if full else []}
            if path == "lease/grant":
                self._next_lease += 1
                self.leases[self._next_lease] = int(body["TTL"])
                return {**self._header(), "ID": str(self._next_lease), "TTL": body["TTL"]}
            if path == "lease/keepalive":
                ttl = self.leases.get(int(body["ID"]))
                return {"result": {"ID": body["ID"], "TTL": str(ttl if ttl else -1)}}
            if path == "lease/revoke":
                lease = int(body["ID"])
                if self.leases.pop(lease, None) is None:
                    raise StoreError(f"lease {lease:x}: requested lease not found")
                gone = [k for k, v in self.keys.items() if v.lease == lease]
                if gone:
                    self.revision += 1
                    for k in gone:
                        self._delete(k)
                    self.changed.notify_all()
                return self._header()
        raise StoreError(f"{path}: not answered by the in-memory store")

    def _header(self) -> dict[str, Any]:
        return {"header": {"revision": str(self.revision)}}

    def in_use(self) -> int:
        """The bytes the keys and values hold: etcd's database, without its overhead."""
        return sum(len(k) + len(v.value) for k, v in self.keys.items())

    def _selected(self, body: dict[str, Any]) -> list[str]:
        key = unb64(body["key"]).decode()
        end = unb64(body["range_end"]).decode("latin-1") if body.get("range_end") else None
        if end is None:
            return [key] if key in self.keys else []
        return sorted(k for k in self.keys if key <= k and (end == "\0" or k < end))

    def _kv(self, key: str) -> dict[str, Any]:
        s = self.keys[key]
        out: dict[str, Any] = {"key": b64(key), "value": b64(s.value),
                               "create_revision": str(s.create_revision),
                               "mod_revision": str(s.mod_revision), "version": str(s.version)}
        if s.lease:
            out["lease"] = str(s.lease)
        return out

    def _range(self, body: dict[str, Any]) -> dict[str, Any]:
        found = self._selected(body)
        out: dict[str, Any] = {**self._header(), "count": str(len(found))}
        limit = int(body.get("limit") or 0)
        if limit and len(found) > limit:
            found, out["more"] = found[:limit], True
        if not body.get("count_only"):
            out["kvs"] = [self._kv(k) for k in found]
            if body.get("keys_only"):
                for kv in out["kvs"]:
                    del kv["value"]
        return out

    def _holds(self, compare: dict[str, Any]) -> bool:
        s = self.keys.get(unb64(compare["key"]).decode())
        target = compare["target"]
        field = {"CREATE": "create_revision", "MOD": "mod_revision", "VERSION": "version"}[target]
        have = getattr(s, field) if s is not None else 0
        want = int(compare.get(field, 0))
        return {"EQUAL": have == want, "NOT_EQUAL": have != want, "GREATER": have > want,
                "LESS": have < want}[compare.get("result", "EQUAL")]

    def _txn(self, body: dict[str, Any]) -> dict[str, Any]:
        succeeded = all(self._holds(c) for c in body.get("compare", []))
        ops = body.get("success" if succeeded else "failure", [])
        if self.quota and self.in_use() >= self.quota and any("request_put" in op for op in ops):
            self.refused += 1  # waiters see it, as they see a write
            self.changed.notify_all()
            raise NoSpace("etcdserver: mvcc: database space exceeded")
        writes = any("request_put" in op or "request_delete_range" in op for op in ops)
        if writes:
            self.revision += 1
        responses: list[dict[str, Any]] = []
        for op in ops:
            if "request_range" in op:
                found = self._selected(op["request_range"])
                responses.append({"response_range": {"kvs": [self._kv(k) for k in found],
                                                     "count": str(len(found))}})
            elif "request_put" in op:
                put = op["request_put"]
                key = unb64(put["key"]).decode()
                lease = int(put.get("lease", 0))
                if lease and lease not in self.leases:
                    raise StoreError(f"{key}: requested lease not found")
                self._put(key, unb64(put["value"]), lease)
                responses.append({"response_put": {}})
            elif "request_delete_range" in op:
                for key in self._selected(op["request_delete_range"]):
                    self._delete(key)
                responses.append({"response_delete_range": {}})
        if writes:
            self.changed.notify_all()
        out: dict[str, Any] = {**self._header(), "responses": responses}
        if succeeded:
            out["succeeded"] = True  # a false one is left out, as the gateway does
        return out

    def _put(self, key: str, value: bytes, lease: int) -> None:
        was = self.keys.get(key)
        now = _Stored(value, was.create_revision if was else self.revision, self.revision,
                      was.version + 1 if was else 1, lease)
        self.keys[key] = now
        self.history.append(WatchEvent("PUT", Key(key), b64(value), now.mod_revision,
                                       now.create_revision, now.version,
                                       b64(was.value) if was else None, lease))

    def _delete(self, key: str) -> None:
        was = self.keys.pop(key)
        self.history.append(WatchEvent("DELETE", Key(key), "", self.revision, 0, 0,
                                       b64(was.value), 0))


class MemoryStore(Store):
    """A :class:`Store` answered by :class:`Memory` instead of an etcd cluster."""

    def __init__(self, memory: Memory | None = None, *, fence: Fence | None = None,
                 holds: Callable[[], bool] | None = None) -> None:
        super().__init__(EtcdConfig(), fence=fence, holds=holds)
        self.memory = memory if memory is not None else Memory()

    def call(self, path: str, body: dict[str, Any], context: str) -> dict[str, Any]:
        return self.memory.answer(path, body)

    def fenced(self, fence: Fence, holds: Callable[[], bool] | None = None) -> Store:
        if fence.term <= 0:
            raise ValueError(f"no term to fence with ({fence.key} at term {fence.term})")
        return MemoryStore(self.memory, fence=fence, holds=holds)

    def watch(self, prefix: Prefix | Key, start_revision: int, *, prev_kv: bool = False,
              idle_timeout: float = 30.0) -> Watch:
        return MemoryWatch(self, prefix, start_revision, prev_kv=prev_kv,
                           idle_timeout=idle_timeout)


class MemoryWatch(Watch):
    """The changes under a prefix from a revision on, read from Memory's history; a
    batch at every write that touches the prefix (and a quiet one, as etcd's progress
    notification, after ``idle_timeout`` without one)."""

    def __init__(self, store: MemoryStore, prefix: Prefix | Key, start_revision: int, *,
                 prev_kv: bool = False, idle_timeout: float = 30.0) -> None:
        super().__init__(store, prefix, start_revision, prev_kv=prev_kv,
                         idle_timeout=idle_timeout)
        self.memory = store.memory

    def close(self) -> None:
        self._closed.set()
        with self.memory.changed:
            self.memory.changed.notify_all()

    def __iter__(self) -> Iterator[WatchBatch]:
        memory, seen = self.memory, 0
        while not self.closed:
            with memory.changed:
                events = [ev for ev in memory.history[seen:]
                          if ev.mod_revision >= self.next_revision
                          and ev.key.startswith(self.prefix)]
                seen = len(memory.history)
                if not events:
                    memory.changed.wait(self.idle_timeout)
                    if self.closed or len(memory.history) > seen:
                        continue
                revision = memory.revision
            if not self.prev_kv:
                events = [ev._replace(prev_encoded=None) for ev in events]
            self.next_revision = revision + 1
            yield WatchBatch(revision, events)


class FakeClock:
    """A clock that moves only when told (:meth:`advance`), for the processes' ``clock``."""

    def __init__(self, at: datetime | None = None) -> None:
        self._wall = (at or datetime(2026, 1, 1, tzinfo=UTC)).timestamp()
        self._mono = 1000.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def time(self) -> float:
        with self._lock:
            return self._wall

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time(), UTC)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._mono += seconds
            self._wall += seconds


__all__ = ["FakeClock", "Memory", "MemoryStore", "MemoryWatch"]
