"""A session with etcd over its JSON gateway: reads, guarded writes, leases.

Every write is a transaction. A Put or Delete compares the key's revision with the one
the writer read (``create_revision == 0`` for a create) — unguarded only where the
operation says so (``mod_revision=None``: what no one else writes, as events) — so a
lost race raises :class:`~store.errors.Conflict` naming the key, never overwrites. A
transaction holds at most etcd's per-transaction limit (:attr:`Store.room`, 128
operations by default): :meth:`Store.commit` refuses more, :meth:`Store.commit_chunks`
splits a larger batch into transactions, each atomic.

Calls go to the gateway endpoints through berth's own HTTP/1.1 client
(``berth/http.py``) and watches through a requests session, both built with
exactly the configured TLS settings; what fails is translated at one boundary
(:func:`~store.errors.translate`).
The gateway sends every int64 as a JSON string and omits false booleans.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import msgspec
import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from berth.http import Member, NotConnected
from berth.store.config import EtcdConfig
from berth.store.errors import (
    Answered,
    Conflict,
    Deposed,
    Invalid,
    StoreError,
    Unauthorized,
    Unavailable,
    Unreached,
    translate,
)
from berth.store.keys import ROOT, Key, Prefix
from berth.store.link import Link
from berth.store.ops import KV, Delete, Fence, Op, Put, b64, key_text, prefix_end, unb64
from berth.store.watch import Watch

log = logging.getLogger(__name__)

MAX_TXN_OPS = 128  # etcd's default --max-txn-ops (``EtcdConfig.max_txn_ops``: another)
PAGE = 1000  # keys per range request when listing

T = TypeVar("T")


_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder().decode
_JSON = {"Content-Type": "application/json"}
_UNREACHED = (503, 408, 504)  # the gateway's own statuses for an etcd it did not reach


def _is_json(content_type: str, body: bytes) -> bool:
    return "json" in content_type or body.lstrip()[:1] == b"{"


def _title(text: str) -> str:
    """An HTML page's title (or first words), to name what answered instead of etcd."""
    found = re.search(r"<title>(.*?)</title>", text, re.S | re.I)
    words = found.group(1) if found else re.sub(r"<[^>]+>", " ", text)
    words = " ".join(words.split())[:80]
    return f" ({words})" if words else ""


def _read_only(path: str, body: dict[str, Any]) -> bool:
    """Whether the request only reads (a range, or a transaction of ranges alone, as
    :meth:`Store.get_many` sends): repeating it on another member changes nothing, even
    when the first member may have run it before its answer was lost."""
    if path == "kv/range":
        return True
    if path != "kv/txn" or body.get("compare"):
        return False
    ops = [*(body.get("success") or ()), *(body.get("failure") or ())]
    return all(isinstance(op, dict) and set(op) == {"request_range"} for op in ops)


def _unsent(exc: BaseException) -> bool:
    """Whether a failed request surely never reached the server: no connection was made
    (refused, no route, connect timeout), so repeating it elsewhere cannot apply it twice."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, NotConnected | requests.exceptions.ConnectTimeout
                      | ConnectTimeoutError):
            return True
        reason = getattr(cause, "reason", None)  # urllib3's MaxRetryError
        if isinstance(reason, NewConnectionError | ConnectTimeoutError):
            return True
        cause = cause.__cause__ or (cause.args[0] if cause.args and
                                    isinstance(cause.args[0], BaseException) else None)
    return False


class _Members:
    """What the views of one session share: the connections, the member requests go
    to, the token, the link's record of outages. One per :class:`Store` made with a
    configuration; each lock guards what its comment says."""

    def __init__(self, config: EtcdConfig) -> None:
        self.session = config.session()  # watches (streamed); its headers hold the token
        self.endpoints = config.endpoints
        self.members = {e: Member(e, config.tls) for e in self.endpoints}  # every other call
        self.current = 0  # the member requests go to: changed under member_lock
        self.member_lock = threading.Lock()
        self.auth_lock = threading.Lock()  # one authentication at a time
        self.password = config.password  # changed by use_password, under auth_lock
        self.link = Link(self.endpoints)


class Store:
    """A thread-safe session with one etcd cluster, through any of its members.

    Requests go to one member until it fails; then to the next one given
    (round robin). A request that surely never reached the failed member
    (its connection was refused or never made) and every read are retried at
    once on the next member; a write that may have reached it is not (the
    caller's compare-and-swap decides, on its next attempt, whether it landed;
    :meth:`commit_surely` does that for a writer that cannot decide again).

    :meth:`fenced` gives a view of the same session whose every write also
    requires a term: the views share their connections and the member in use.
    """

    def __init__(self, config: EtcdConfig | None = None, *, fence: Fence | None = None,
                 holds: Callable[[], bool] | None = None,
                 _members: _Members | None = None) -> None:
        self.config = config or EtcdConfig()
        self.fence = fence  # required by every write transaction of this view
        # whether the fence's term surely lasts, by this process's clock: what etcd cannot
        # fence (a request to a cluster) goes out only while it does; None: no lease
        self.holds = holds
        self._m = _members if _members is not None else _Members(self.config)
        if _members is None and self.config.user:
            self.authenticate()

    @property
    def session(self) -> requests.Session:
        return self._m.session

    @property
    def members(self) -> dict[str, Member]:
        return self._m.members

    @property
    def link(self) -> Link:
        return self._m.link

    @property
    def room(self) -> int:
        """How many writes one transaction of this store may carry: etcd's limit, less
        the fence's compare."""
        return self.config.max_txn_ops - (1 if self.fence is not None else 0)

    def fenced(self, fence: Fence, holds: Callable[[], bool] | None = None) -> Store:
        """A view of this session whose every write also requires ``fence``: what a
        leader's controller is given. Connections, the member in use, the token and
        the link are the session's, shared with every other view. ``holds``: whether
        the term surely lasts by this process's own clock (its lease's tenure)."""
        if fence.term <= 0:
            raise ValueError(f"no term to fence with ({fence.key} at term {fence.term}): "
                             "only a leader's term fences")
        return Store(self.config, fence=fence, holds=holds, _members=self._m)

    # -- plumbing ---------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The member requests go to now."""
        return self._m.endpoints[self._m.current]

    def url(self, path: str, endpoint: str | None = None) -> str:
        return f"{endpoint or self.endpoint}/v3/{path}"

    def failover(self, endpoint: str) -> str | None:
        """``endpoint`` failed: move to the next member, unless another thread already
        did. Returns the member moved to (None with a single member or if already moved)."""
        m = self._m
        with m.member_lock:
            if len(m.endpoints) == 1 or m.endpoints[m.current] != endpoint:
                return None
            m.current = (m.current + 1) % len(m.endpoints)
            m.link.moved(endpoint, m.endpoints[m.current])
            return m.endpoints[m.current]

    def report(self, error: StoreError, endpoint: str, op: str) -> str | None:
        """Record a failed request to ``endpoint``; an unreachable member is left for the
        next one. Returns the member moved to, if any."""
        moved = self.failover(endpoint) if isinstance(error, Unavailable) else None
        self.link.failed(error, endpoint, op=op, next_endpoint=moved)
        return moved

    def authenticate(self) -> None:
        """Exchange user and password for a token; the stale token is dropped first."""
        with self._m.auth_lock:
            self.session.headers.pop("Authorization", None)
            body = {"name": self.config.user, "password": self._m.password}
            reply = self._request("auth/authenticate", body, f"authenticating as "
                                  f"{self.config.user!r}")
            token = reply.get("token")
            if not token:
                raise Unauthorized(f"authenticating as {self.config.user!r}: no token returned")
            self.session.headers["Authorization"] = token

    def use_password(self, password: str) -> None:
        """Authenticate from now on with ``password`` (an agent's renewed credential), for
        every view of this session; Unauthorized if etcd does not take it yet."""
        with self._m.auth_lock:
            self._m.password = password
        self.authenticate()

    def reload_tls(self) -> None:
        """Read the TLS files again at the next connection (an agent's renewed client
        certificate, written over the old one); open connections stay as they are."""
        for member in self._m.members.values():
            member.forget_tls()

    def call(self, path: str, body: dict[str, Any], context: str) -> dict[str, Any]:
        """POST ``body`` to a gateway endpoint; re-authenticate once on an expired token
        (tokens of etcd's ``simple`` kind are valid on one member only)."""
        try:
            return self._request(path, body, context)
        except Unauthorized as exc:
            if not self.config.user:
                raise
            log.info("etcd token rejected (%s); authenticating again", exc)
            self.authenticate()
            return self._request(path, body, context)

    def _request(self, path: str, body: dict[str, Any], context: str) -> dict[str, Any]:
        """One request, moved to the next member while it is safe to repeat it."""
        safe = _read_only(path, body)
        tries = len(self._m.endpoints)
        while True:
            endpoint = self.endpoint
            start = time.monotonic()
            try:
                reply = self._post(endpoint, path, body)
            except Exception as exc:
                err = translate(exc, context)
                moved = self.report(err, endpoint, path)
                tries -= 1
                if moved is None and self.endpoint != endpoint:
                    moved = self.endpoint  # another thread moved on already
                if moved is not None and tries > 0 and (safe or _unsent(exc)):
                    continue
                raise err from exc
            self.link.answered(path, start, endpoint)
            return reply

    def _post(self, endpoint: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One gateway call, JSON by msgspec (the stdlib's costs a core at scale); what
        fails raises :class:`Unreached` or :class:`Answered`, for :func:`translate`."""
        headers = _JSON
        token = self.session.headers.get("Authorization")
        if isinstance(token, str) and token:
            headers = {**_JSON, "Authorization": token}
        try:
            resp = self._m.members[endpoint].post(f"/v3/{path}", _ENCODE(body), headers,
                                                  self.config.timeout)
        except OSError as exc:  # refused, no route, reset, timed out, not HTTP
            raise Unreached(str(exc)) from exc
        content = resp.body
        if resp.status != 200:
            text = content.decode("utf-8", "replace")
            if not _is_json(resp.headers.get("content-type", ""), content):
                raise Invalid(f"{endpoint}/v3/{path} answered HTTP {resp.status} {resp.reason}"
                              f"{_title(text)}, not etcd's JSON: is it etcd's gateway?")
            if resp.status in _UNREACHED:
                raise Unreached(f"HTTP {resp.status} {resp.reason}: {text.strip()}")
            raise Answered(text, resp.status)
        try:
            reply = _DECODE(content)
        except msgspec.DecodeError as exc:
            raise ValueError(f"not JSON: {content[:80]!r}") from exc
        if not isinstance(reply, dict):
            raise ValueError(f"not a JSON object: {content[:80]!r}")
        return reply

    # -- reads --------------------------------------------------------------------

    def get(self, key: Key, *, revision: int = 0) -> KV | None:
        """The key's value and revisions (as of ``revision`` if given), or None."""
        body: dict[str, Any] = {"key": b64(key)}
        if revision:
            body["revision"] = revision
        reply = self.call("kv/range", body, key)
        kvs = reply.get("kvs") or []
        return KV.from_json(kvs[0]) if kvs else None

    def get_many(self, keys: Sequence[Key]) -> dict[str, KV]:
        """The current values of ``keys`` (missing ones left out), 128 per round trip."""
        found: dict[str, KV] = {}
        limit = self.config.max_txn_ops
        for start in range(0, len(keys), limit):
            chunk = keys[start : start + limit]
            reply = self.call(
                "kv/txn",
                {"success": [{"request_range": {"key": b64(k)}} for k in chunk]},
                f"{len(chunk)} keys from {chunk[0]}",
            )
            for resp in reply.get("responses") or []:
                for kv in resp.get("response_range", {}).get("kvs") or []:
                    item = KV.from_json(kv)
                    found[item.key] = item
        return found

    def revision(self) -> int:
        """The store's current revision (read through a key berth may always read)."""
        body = {"key": b64(ROOT), "count_only": True}  # every role may read it
        return int(self.call("kv/range", body, "revision")["header"]["revision"])

    def count_prefix(self, prefix: Prefix) -> int:
        """How many keys are under ``prefix`` now (no values read)."""
        body = {"key": b64(prefix), "range_end": b64(prefix_end(prefix)), "count_only": True}
        return int(self.call("kv/range", body, prefix).get("count") or 0)

    def list_prefix(self, prefix: Prefix | Key, *, revision: int = 0) -> tuple[list[KV], int]:
        """Every key under ``prefix`` as of one revision, and that revision.

        Large prefixes are read in pages, all at the revision of the first page,
        so the result is one consistent snapshot.
        """
        end = b64(prefix_end(prefix))
        out: list[KV] = []
        start: str = prefix
        while True:
            body: dict[str, Any] = {"key": b64(start), "range_end": end, "limit": PAGE}
            if revision:
                body["revision"] = revision
            reply = self.call("kv/range", body, prefix)
            if not revision:
                revision = int(reply["header"]["revision"])
            page = [KV.from_json(kv) for kv in reply.get("kvs") or []]
            out.extend(page)
            if not reply.get("more") or not page:
                return out, revision
            start = page[-1].key + "\0"

    def keys_under(self, prefix: Prefix, *, page: int = PAGE) -> Iterator[list[Key]]:
        """The keys under ``prefix`` (no values read), a page at a time, all as of the
        revision of the first page: what a sweep over many keys walks."""
        end = b64(prefix_end(prefix))
        start: str = prefix
        revision = 0
        while True:
            body: dict[str, Any] = {"key": b64(start), "range_end": end, "limit": page,
                                    "keys_only": True}
            if revision:
                body["revision"] = revision
            reply = self.call("kv/range", body, prefix)
            revision = revision or int(reply["header"]["revision"])
            found = [Key(key_text(unb64(kv.get("key")))) for kv in reply.get("kvs") or []]
            if found:
                yield found
            if not reply.get("more") or not found:
                return
            start = found[-1] + "\0"

    # -- writes -------------------------------------------------------------------

    def create(self, key: Key, value: bytes, *, lease: int = 0) -> int:
        """Create ``key``; Conflict if it exists. Returns the new revision."""
        return self.commit([Put(key, value, 0, lease)])

    def update(self, key: Key, value: bytes, mod_revision: int, *, lease: int = 0) -> int:
        """Replace ``key`` if still at ``mod_revision``; Conflict otherwise."""
        if mod_revision <= 0:
            raise ValueError("update needs the mod_revision the value was read at")
        return self.commit([Put(key, value, mod_revision, lease)])

    def delete(self, key: Key, mod_revision: int | None = None) -> int:
        """Delete ``key`` (if still at ``mod_revision`` when given)."""
        return self.commit([Delete(key, mod_revision)])

    def commit(self, ops: Sequence[Op]) -> int:
        """Apply ``ops`` in one transaction, all or nothing. Returns its revision.

        Raises Conflict naming every key whose guard failed.
        """
        if not ops:
            return self.revision()
        # the same term required by several writes is compared once
        fences = list(dict.fromkeys([*(op for op in ops if isinstance(op, Fence)),
                                     *([self.fence] if self.fence is not None else [])]))
        for fence in fences:
            if fence.term <= 0:  # etcd's compare would pass on an absent key: no term
                raise Deposed(fence.key, fence.term, 0)
        writes = [op for op in ops if not isinstance(op, Fence)]
        if len(writes) + len(fences) > self.config.max_txn_ops:
            raise ValueError(f"{len(writes)} writes and {len(fences)} fences exceed etcd's "
                             f"{self.config.max_txn_ops} operations per transaction")
        compare: list[dict[str, Any]] = []
        success: list[dict[str, Any]] = []
        for op in writes:
            key = b64(op.key)
            if isinstance(op, Put):
                if op.mod_revision is None:
                    pass  # unguarded
                elif op.mod_revision == 0:
                    compare.append(
                        {"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
                    )
                else:
                    compare.append(
                        {
                            "key": key,
                            "target": "MOD",
                            "result": "EQUAL",
                            "mod_revision": str(op.mod_revision),
                        }
                    )
                put: dict[str, Any] = {"key": key, "value": b64(op.value)}
                if op.keep_lease:
                    put["ignore_lease"] = True
                elif op.lease:
                    put["lease"] = str(op.lease)
                success.append({"request_put": put})
            else:
                if op.mod_revision is not None:
                    compare.append(
                        {
                            "key": key,
                            "target": "MOD",
                            "result": "EQUAL",
                            "mod_revision": str(op.mod_revision),
                        }
                    )
                success.append({"request_delete_range": {"key": key}})
        # On failure read the guarded keys back, to name the ones that moved.
        guarded = [op for op in writes if op.mod_revision is not None]
        failure = [{"request_range": {"key": b64(op.key)}} for op in guarded]
        for fence in fences:
            field = "mod_revision" if fence.mod else "create_revision"
            compare.append({"key": b64(fence.key), "target": fence.target, "result": "EQUAL",
                            field: str(fence.term)})
            failure.append({"request_range": {"key": b64(fence.key)}})
        context = (writes[0].key if len(writes) == 1
                   else f"{len(writes)} keys from {writes[0].key}" if writes else "fences")
        reply = self.call(
            "kv/txn", {"compare": compare, "success": success, "failure": failure}, context
        )
        if reply.get("succeeded"):
            return int(reply["header"]["revision"])
        responses = reply.get("responses") or []
        for fence, resp in zip(fences, responses[len(guarded):], strict=False):
            kvs = resp.get("response_range", {}).get("kvs") or []
            field = "mod_revision" if fence.mod else "create_revision"
            now = int(kvs[0].get(field, 0)) if kvs else 0
            if now != fence.term:
                raise Deposed(fence.key, fence.term, now)
        moved: list[str] = []
        for op, resp in zip(guarded, responses, strict=False):
            kvs = resp.get("response_range", {}).get("kvs") or []
            current = int(kvs[0].get("mod_revision", 0)) if kvs else 0
            expected = op.mod_revision or 0
            if current != expected:
                if expected == 0:
                    moved.append(f"{op.key} already exists")
                elif current == 0:
                    moved.append(f"{op.key} was deleted since it was read")
                else:
                    moved.append(f"{op.key} changed since it was read")
        first = moved[0].split(" ", 1)[0] if moved else writes[0].key
        if len(moved) > 1:
            raise Conflict(first, f"{len(moved)} conflicts: {'; '.join(moved[:5])}")
        raise Conflict(first, moved[0] if moved else f"{context}: changed since it was read")

    def commit_surely(self, ops: Sequence[Put | Delete], *, attempts: int = 0,
                      delay: float = 0.25) -> int:
        """:meth:`commit`, for a writer that cannot decide again (bootstrap, apply).

        A write whose answer was lost (its member died with it in flight) is sent
        again, to the next member, after a short wait, while any member may still
        answer (``attempts``: 3 rounds of the members by default). A guard that fails
        on a later try is read back: the write counts as landed, at the revision it
        landed at, when every key holds exactly what it put (a deleted key is gone):
        its values are its own, written by one transaction. Anything else is a
        Conflict as usual; Unavailable when no member answered in time."""
        tries = attempts or 3 * len(self._m.endpoints)
        lost: Unavailable | None = None
        for n in range(tries):
            try:
                return self.commit(ops)
            except Unavailable as exc:
                lost = exc
                if n + 1 < tries:
                    time.sleep(min(2.0, delay * 2 ** n))
            except Conflict:
                landed = self._landed(ops) if lost is not None else None
                if landed is None:
                    raise
                log.info("%s: the write whose answer was lost had landed (at revision %d)",
                         ops[0].key if len(ops) == 1 else f"{len(ops)} keys from {ops[0].key}",
                         landed)
                return landed
        assert lost is not None
        raise lost

    def _landed(self, ops: Sequence[Put | Delete]) -> int | None:
        """The revision ``ops`` landed at, if every key holds what they put (puts, all at
        one revision) or is gone (deletes); None if anything differs."""
        now = self.get_many([op.key for op in ops])
        revisions = set()
        for op in ops:
            kv = now.get(op.key)
            if isinstance(op, Delete):
                if kv is not None:
                    return None
            elif kv is None or kv.value != op.value or (
                    kv.lease != op.lease and not op.keep_lease):
                return None
            else:
                revisions.add(kv.mod_revision)
        if len(revisions) > 1:
            return None  # the same values, but not from one transaction
        return revisions.pop() if revisions else self.revision()

    def commit_chunks(
        self, ops: Sequence[Op], *, on_chunk: Callable[[int, int], None] | None = None
    ) -> list[int]:
        """Apply ``ops`` in transactions of at most ``room`` writes; each chunk is atomic.

        Returns the revision of each chunk; stops at the first failing chunk
        (the earlier ones stay written: callers that need all-or-nothing roll
        them back, as bootstrap does).
        """
        revisions = []
        room = self.room
        for start in range(0, len(ops), room):
            revisions.append(self.commit(ops[start : start + room]))
            if on_chunk:
                on_chunk(min(start + room, len(ops)), len(ops))
        return revisions

    def compact(self, revision: int) -> None:
        """Compact history up to ``revision`` (tests and operators)."""
        self.call("kv/compaction", {"revision": str(revision), "physical": True}, "compaction")

    # -- leases -------------------------------------------------------------------

    def grant(self, ttl: int) -> int:
        """A new lease of ``ttl`` seconds; returns its ID."""
        reply = self.call("lease/grant", {"TTL": str(ttl)}, f"lease of {ttl}s")
        return int(reply["ID"])

    def keep_alive(self, lease: int) -> int:
        """Refresh a lease once; returns its remaining TTL, or -1 if it expired."""
        reply = self.call("lease/keepalive", {"ID": str(lease)}, f"lease {lease:x}")
        return int(reply.get("result", {}).get("TTL", -1))

    def revoke(self, lease: int) -> None:
        """Revoke a lease: every key attached to it is deleted."""
        try:
            self.call("lease/revoke", {"ID": str(lease)}, f"lease {lease:x}")
        except StoreError as exc:
            if "not found" not in str(exc):
                raise

    def watch(self, prefix: Prefix | Key, start_revision: int, *, prev_kv: bool = False,
              idle_timeout: float = 30.0) -> Watch:
        """The changes under ``prefix`` from ``start_revision`` on (:class:`Watch`): how
        every watcher of this store watches it."""
        return Watch(self, prefix, start_revision, prev_kv=prev_kv, idle_timeout=idle_timeout)

    def close(self) -> None:
        self.session.close()
        for member in self.members.values():
            member.close()
