"""Drift watches: one Kubernetes watch per API server (as one user) and kind berth
has applied there, shared by the clusters that reach that server (``watches.py``:
every watch of the propagator's drift hub on one thread).

Each watch selects the objects labelled ``app.kubernetes.io/managed-by:
berth`` in every namespace and hands every event to ``on_event`` with the
clusters this replica serves on that server; the applier keeps those the
object concerns (applied there, or being applied) and decides whether someone
other than berth changed it. Clusters that are namespaces of one server used
to watch it each, every event read and decoded once per cluster. A watch begins
with a list of those objects (in pages), each handed on as ``ADDED``, and an
object the book (``known``) holds there that the list lacks is handed on as
``DELETED``: what the book knows of the cluster is then what the cluster says,
whatever happened while no watch ran (an object applied through an earlier
connection, whose Pods became Ready before this watch began, is seen available
now — not when the periodic resync applies it again). Then it watches from the
list's resourceVersion. When a watch breaks (the cluster went away), it waits
until the cluster answers a probe again, then calls ``on_back`` — changes made
while nobody watched, or a cluster that came back empty, are also found by
re-applying everything on it, for every cluster on it — and lists again. Otherwise a watch resumes
from the last resourceVersion it saw (bookmarks keep it fresh), so renewing
the request misses nothing; one the server says is too old (410) lists again.
A cluster that does not allow listing or watching is left to the periodic
resync.

The :class:`OwnWrites` tells berth's own writes from someone else's: it holds the
resourceVersion each of berth's applies stored, and the newest one a watch
showed while an apply was still in flight (that event may be ours, or a
change made right after ours: only the versions can tell).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Collection

import msgspec

from berth.controllers.propagator.kube import (
    FIELD_MANAGER,
    MANAGED_BY,
    OWNER,
    Connections,
    Kind,
    KubeObject,
    ObjectMeta,
    Unavailable,
    WatchEvent,
    WatchRefused,
    safe,
)
from berth.controllers.propagator.watches import ClusterWatches, Hub, Sharing
from berth.store.codec import decoder
from berth.store.documents import KubeObjectRef

log = logging.getLogger(__name__)

# (the clusters on the watch's server, event type, object)
OnEvent = Callable[[Collection[str], str, KubeObject], None]
# (cluster id, apiVersion, kind) → the objects of that kind the book holds there, by owner
Known = Callable[[str, str, str], list[tuple[KubeObjectRef, str]]]
LIST_PAGE = 500  # objects a list asks for at a time


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # ``continue`` is a Python keyword: the field is renamed
    next: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct):
    """A page of a LIST: its items carry no apiVersion or kind (the list's own do)."""

    apiVersion: str = ""
    kind: str = ""
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[KubeObject] = []

_Where = tuple[str, KubeObjectRef]  # (cluster id, object)


def newer(version: str, than: str) -> bool:
    """Whether resourceVersion ``version`` was stored after ``than``.

    The API server stores etcd's revisions there, which grow; a version that
    is not a number is only known to differ (taken as newer: one apply more).
    """
    if version.isdigit() and than.isdigit():
        return int(version) > int(than)
    return version != than


class OwnWrites:
    """The resourceVersion and generation berth's last apply stored, per (cluster, object).

    A change made by someone else is a newer resourceVersion — but for kinds
    with a ``metadata.generation`` (Deployments, Jobs, custom resources with a
    status subresource) only a newer generation: their controllers write status
    and annotations all the time, and only a change of the spec is drift.
    Deletion always is.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stored: dict[_Where, tuple[str, int]] = {}  # → (resourceVersion, generation)
        # → the newest (resourceVersion, generation) a watch showed while an apply ran
        self._in_flight: dict[_Where, tuple[str, int] | None] = {}

    def begin(self, cid: str, ref: KubeObjectRef) -> None:
        """An apply of ``ref`` on ``cid`` starts."""
        with self._lock:
            self._in_flight[(cid, ref)] = None

    def end(self, cid: str, ref: KubeObjectRef, stored: str | None, generation: int = 0
            ) -> bool:
        """The apply ended, having stored version ``stored`` at ``generation`` (None: it
        failed).

        True if a watch meanwhile showed a change newer than ours: someone
        changed or deleted the object right after berth applied it.
        """
        with self._lock:
            seen = self._in_flight.pop((cid, ref), None)
            if stored is None:
                return False
            self._stored[(cid, ref)] = (stored, generation)
            return seen is not None and _changed(seen, (stored, generation), deleted=False)

    def knows(self, cid: str, ref: KubeObjectRef) -> bool:
        """Whether berth applies ``ref`` on ``cid`` now, or recorded what its apply
        stored there."""
        where = (cid, ref)
        with self._lock:
            return where in self._in_flight or where in self._stored

    def forget(self, cid: str, ref: KubeObjectRef) -> None:
        """berth deletes the object: whatever a watch shows next is not drift."""
        with self._lock:
            self._stored.pop((cid, ref), None)

    def someone_else(self, cid: str, ref: KubeObjectRef, version: str, generation: int = 0,
                     *, deleted: bool = False) -> bool:
        """Whether a watch event at ``version`` (``generation``) is a change berth did
        not make."""
        where = (cid, ref)
        with self._lock:
            if where in self._in_flight:  # told apart when the apply returns
                was = self._in_flight[where]
                if deleted:
                    generation = -1  # whatever the generation, a deletion is a change
                if was is None or newer(version, was[0]):
                    self._in_flight[where] = (version, generation)
                return False
            stored = self._stored.get(where)
            if stored is None or not _changed((version, generation), stored, deleted=deleted):
                return False  # not ours to watch, from before our apply, or status only
            del self._stored[where]  # reported once: the apply that follows records anew
            return True


def _changed(seen: tuple[str, int], stored: tuple[str, int], *, deleted: bool) -> bool:
    """Whether ``seen`` (resourceVersion, generation) is a change made after ``stored``."""
    if not newer(seen[0], stored[0]):
        return False
    if deleted or seen[1] < 0:
        return True
    return stored[1] <= 0 or seen[1] != stored[1]


class DriftWatches:
    """The drift watches, one per (API server and user, kind), shared by the clusters on
    that server (watches.py)."""

    def __init__(self, connections: Connections, hub: Hub, on_event: OnEvent,
                 on_back: Callable[[str], None], *, known: Known, server_timeout: int,
                 probe_timeout: float, max_delay: float = 30.0) -> None:
        self.connections = connections
        self.hub = hub
        self.on_event = on_event
        self.on_back = on_back
        self.known = known
        self.server_timeout = server_timeout
        self.probe_timeout = probe_timeout
        self.max_delay = max_delay
        self._decoder = decoder(WatchEvent)
        self._list_decoder = decoder(_List)
        # server → its watches, read by the clusters (ids) that reach it
        self._shared: Sharing[ClusterWatches] = Sharing(lambda server, _w: hub.drop(server))

    def ensure(self, cid: str, ckey: str, kind: Kind) -> None:
        """Watch ``kind`` on the server cluster ``cid`` (key ``ckey``) reaches through its
        current connection (once per server and kind), beginning with a list."""
        conn = self.connections.current(ckey)
        if conn is None:
            return
        server = conn.server
        watches, _ = self._shared.join(cid, server, lambda: self.hub.of(server, conn),
                                       lambda w: not w.closed)
        watches.add(f"drift {kind.plural} {kind.base}",
                    lambda w: self._run(w, server, kind))

    def back(self, cid: str) -> None:
        """Cluster ``cid`` answers again: its server's watches waiting for that list
        again now."""
        server = self._shared.server_of(cid)
        watches = self.hub.get(server) if server is not None else None
        if watches is not None:
            watches.back()

    def leave(self, cid: str) -> None:
        """Cluster ``cid`` is no longer watched here (handed over, or gone); the last on
        its server ends the server's watches."""
        self._shared.leave(cid)

    def clusters(self, server: str) -> frozenset[str]:
        """The clusters (ids) reading ``server``'s watches."""
        return self._shared.members(server)

    async def _list(self, w: ClusterWatches, server: str, kind: Kind) -> str:
        """Hand on every object of ``kind`` berth manages on the server as ADDED, and
        each the book holds on a cluster there that is gone as DELETED; the list's
        resourceVersion."""
        params = {"labelSelector": f"{MANAGED_BY}={FIELD_MANAGER}", "limit": str(LIST_PAGE)}
        listed: set[tuple[str, str]] = set()
        api_version = kind_name = version = ""
        while True:
            resp = await w.get(kind.path(), params=params)
            if resp.status_code in (403, 405):
                raise WatchRefused(f"list: HTTP {resp.status_code}")
            if resp.status_code != 200:
                raise Unavailable(f"list {kind.path()}: HTTP {resp.status_code}")
            try:
                page = self._list_decoder.decode(resp.content)
            except msgspec.DecodeError as exc:
                raise Unavailable(f"list {kind.path()}: an answer berth cannot read "
                                  f"({exc})") from exc
            api_version = page.apiVersion
            kind_name = page.kind.removesuffix("List")
            version = page.metadata.resourceVersion or version
            for obj in page.items:
                obj.apiVersion, obj.kind = obj.apiVersion or api_version, obj.kind or kind_name
                listed.add((obj.metadata.namespace or "", obj.metadata.name))
                self.on_event(self.clusters(server), "ADDED", obj)
            if not page.metadata.next:
                break
            params["continue"] = page.metadata.next
        for cid in self.clusters(server):
            for ref, owner in self.known(cid, api_version, kind_name):
                if (ref.namespace or "", ref.name) not in listed:  # gone while unwatched
                    self.on_event((cid,), "DELETED", KubeObject(
                        ref.api_version, ref.kind, ObjectMeta(
                            ref.name, ref.namespace, resourceVersion=version,
                            annotations={OWNER: owner} if owner else {})))
        return version

    async def _run(self, w: ClusterWatches, server: str, kind: Kind) -> None:
        delay = 0.5
        since = ""  # "": list first
        while not w.closed:
            try:
                if not since:
                    since = await self._list(w, server, kind)
                params = {"watch": "true", "labelSelector": f"{MANAGED_BY}={FIELD_MANAGER}",
                          "timeoutSeconds": str(self.server_timeout),
                          "allowWatchBookmarks": "true", "resourceVersion": since}
                async for line in w.lines(kind.path(), params):
                    try:
                        event = self._decoder.decode(line)
                    except msgspec.DecodeError:
                        log.info("watch %s: an event berth cannot read: %.200s", kind.plural,
                                 line)
                        continue
                    if event.type == "ERROR":  # 410: ``since`` is too old; list again
                        log.info("watch of %s on %s: %.200s; listing again",
                                 kind.plural, w.conn.config.cluster.server, line)
                        since = ""
                        break
                    since = event.object.metadata.resourceVersion or since
                    if event.type != "BOOKMARK":
                        self.on_event(self.clusters(server), event.type, event.object)
                    delay = 0.5
                else:
                    continue  # the server ended the request: resume from ``since``
                await asyncio.sleep(delay)  # an error, again and again, never spins
                delay = min(self.max_delay, delay * 2)
                continue
            except WatchRefused as exc:
                log.warning("%s does not allow listing or watching %s (%s): drift is "
                            "found by the periodic resync only", w.conn.config.cluster.server,
                            kind.plural, exc)
                return
            except Unavailable as exc:
                if w.closed:
                    return
                log.info("watch of %s on %s broke (%s); re-applying when it is back",
                         kind.plural, w.conn.config.cluster.server, safe(exc))
            await w.until_back(delay, self.probe_timeout, self.max_delay)
            delay = min(self.max_delay, delay * 2)
            since = ""  # listed again, and everything re-applied
            if not w.closed:
                for cid in self.clusters(server):
                    self.on_back(cid)
