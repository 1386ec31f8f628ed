"""A cluster's watches in one place, and every cluster's watches on one thread.

Kubernetes serves one kind per watch request, and the propagator needs
several per cluster: the drift watches (each kind berth applied there) and
the capacity watches (Nodes, Pods). A cluster's :class:`ClusterWatches` holds
those of one sort, each once, through one asynchronous client of the cluster's
own (the cluster's requests to apply go through another); every cluster's
watches of that sort run as tasks of one asyncio loop, on one thread, in
:class:`Hub`. Before, each watch had a thread of its own: four per cluster,
400 threads for 100 clusters.

Each watch still holds an HTTP/1.1 connection of its own. HTTP/2 would carry
a cluster's watches as streams of one connection, but with httpcore's
HTTP/2 a stream's events arrive only when another stream is read: measured
against a kube-apiserver with four watches open, five ConfigMaps created half
a second apart were seen 0, 4, 0, 0 and 3 at a time (over HTTP/1.1: 1 each).

The propagator has two hubs: one for the drift watches, whose events say when
a copy is available, and one for the capacity watches (Nodes and Pods), whose
events come many times as fast (each Pod of a Deployment changes several
times); on one loop, an object's availability waited behind every Pod event
before it (measured: the lag from a Deployment available to its application
RUNNING, p99 4.9 s with both on one loop, 0.19 s without the Pod watches).

Clusters that are namespaces of one API server, reached as one user, see the
same objects: their watches are the server's, shared (:class:`Sharing`), and
each event is handed to the clusters it concerns. Watching once per cluster
read and decoded every event once per cluster on that server (25 times in
``propagator_scale_bench.py``).

A watch is a coroutine that runs until its cluster's watches close; one that
raises is logged and started again after a backoff (0.5 s doubling to 30 s),
as a supervised loop would. The hub's health fails when its thread died or
its loop is wedged (a heartbeat older than 30 s). Closing a cluster's watches
(its connection replaced or dropped, the cluster handed over) cancels them at
once. Callbacks run on the loop's thread: they must be quick and not block.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

import httpx2 as httpx
from lightkube.config.client_adapter import AsyncClient, ConnectionParams

from berth.controllers.propagator.kube import Connection, Unavailable, WatchRefused, safe
from berth.kubeexec import ExecAuth

log = logging.getLogger(__name__)

T = TypeVar("T")
Run = Callable[["ClusterWatches"], Awaitable[None]]
WEDGED = 30.0  # seconds without a heartbeat: the loop is stuck in a callback


class ClusterWatches:
    """The watches of one cluster, through one asynchronous client."""

    def __init__(self, hub: Hub, key: str, conn: Connection) -> None:
        self.hub, self.key, self.conn = hub, key, conn
        self.closed = False
        self._client: httpx.AsyncClient | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}  # the loop's thread only
        self._back: asyncio.Event | None = None  # set by ``back``; the loop's thread only

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:  # made on the loop's thread, where it is used
            self._client = AsyncClient(self.conn.config, ConnectionParams(
                timeout=httpx.Timeout(self.conn.timeout, read=None), trust_env=False))
            if self.conn.exec is not None:  # berth's own flow, the calls' token shared
                self._client.auth = ExecAuth(self.conn.exec)
        return self._client

    def add(self, name: str, run: Run) -> None:
        """Run ``run(self)`` as the watch ``name``, unless one by that name runs."""
        self.hub.loop.call_soon_threadsafe(self._add, name, run)

    def cancel(self, name: str) -> None:
        self.hub.loop.call_soon_threadsafe(self._cancel, name)

    def _add(self, name: str, run: Run) -> None:
        if self.closed or name in self._tasks:
            return
        self._tasks[name] = self.hub.loop.create_task(self._supervised(name, run))

    def _cancel(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()

    async def _supervised(self, name: str, run: Run) -> None:
        delay = 0.5
        try:
            while not self.closed:
                began = time.monotonic()
                try:
                    await run(self)
                    return  # it ended on its own (e.g. the cluster forbids watching)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("watch %s of %s failed; again in %.1f s", name, self.key,
                                  delay)
                if time.monotonic() - began > 60:
                    delay = 0.5
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)
        finally:
            if self._tasks.get(name) is asyncio.current_task():
                del self._tasks[name]

    async def _close(self) -> None:
        self.closed = True
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    # -- for the watches -----------------------------------------------------------

    async def get(self, path: str, timeout: float | None = None,
                  params: dict[str, str] | None = None) -> httpx.Response:
        try:
            return await self.client.get(path, params=params,
                                         timeout=timeout or self.conn.timeout)
        except Exception as exc:
            raise Unavailable(f"GET {path}: {safe(exc)}") from exc

    async def lines(self, path: str, params: dict[str, str]) -> AsyncIterator[bytes]:
        """The lines of one watch request; WatchRefused (403, 405) or Unavailable."""
        try:
            async with self.client.stream("GET", path, params=params) as resp:
                if resp.status_code in (403, 405):
                    raise WatchRefused(f"HTTP {resp.status_code}")
                if resp.status_code != 200:
                    raise Unavailable(f"watch {path}: HTTP {resp.status_code}")
                async for line in _lines(resp.aiter_bytes()):
                    yield line
        except (WatchRefused, Unavailable):
            raise
        except Exception as exc:
            raise Unavailable(f"watch {path}: {safe(exc)}") from exc

    def back(self) -> None:
        """The cluster answers again (its observer says so): a watch waiting for that
        asks at once, not when its back-off would (from any thread)."""
        self.hub.loop.call_soon_threadsafe(lambda: self._woken().set())

    def _woken(self) -> asyncio.Event:
        if self._back is None:
            self._back = asyncio.Event()
        return self._back

    async def until_back(self, delay: float, timeout: float, max_delay: float = 30.0) -> None:
        """Wait until the cluster answers again (``/readyz``, else ``/version``): asked
        after ``delay``, then twice as long each time up to ``max_delay`` — or at once
        when told it is :meth:`back` (a cluster down a while would otherwise go unwatched
        for up to ``max_delay`` after it was back: a Job's completion there unseen, and
        the Job run again elsewhere — the robustness run, seed 29)."""
        woken = self._woken()
        while not self.closed:
            try:
                await asyncio.wait_for(woken.wait(), delay)
                woken.clear()
            except TimeoutError:
                pass
            try:
                resp = await self.get("/readyz", timeout)
                if resp.status_code == 404:
                    resp = await self.get("/version", timeout)
                if resp.status_code == 200:
                    return
            except Unavailable:
                pass
            delay = min(max_delay, delay * 2)

    def names(self) -> set[str]:
        """The watches running (for tests and health)."""
        return self.hub.call(lambda: set(self._tasks))


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The non-empty lines of a stream of bytes, as bytes (a watch sends an event a line:
    read as bytes, not decoded to text and encoded again)."""
    pending: list[bytes] = []  # the start of a line split over chunks
    async for chunk in chunks:
        if b"\n" not in chunk:
            pending.append(chunk)
            continue
        if pending:
            pending.append(chunk)
            chunk, pending = b"".join(pending), []
        *lines, rest = chunk.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
        if rest:
            pending.append(rest)
    last = b"".join(pending)
    if last.strip():
        yield last


class Hub:
    """One asyncio loop on one thread, for every cluster's watches (of one sort)."""

    def __init__(self, name: str = "watches") -> None:
        self.loop = asyncio.new_event_loop()  # closed by its thread, or by stop()
        self._lock = threading.Lock()
        self._sets: dict[str, ClusterWatches] = {}  # cluster key → its watches
        self._beat = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def start(self) -> Hub:
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.create_task(self._heartbeat())
        try:
            self.loop.run_forever()
        finally:  # what still runs (the heartbeat) ends before the loop closes
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(1.0)

    def alive(self) -> bool:
        """Its thread runs and its loop is not stuck (or it never started)."""
        return not self._started or (self._thread.is_alive()
                                     and time.monotonic() - self._beat < WEDGED)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """``fn()`` on the loop's thread; its result."""
        async def run() -> T:
            return fn()
        future: Future[T] = asyncio.run_coroutine_threadsafe(run(), self.loop)
        return future.result(timeout)

    def of(self, key: str, conn: Connection) -> ClusterWatches:
        """The watches of cluster ``key`` through ``conn``: a connection that replaced
        another gets new ones (the old ones close)."""
        self.start()
        with self._lock:
            current = self._sets.get(key)
            if current is not None and current.conn is conn and not current.closed:
                return current
            fresh = self._sets[key] = ClusterWatches(self, key, conn)
        if current is not None:
            self._close(current)
        return fresh

    def get(self, key: str) -> ClusterWatches | None:
        with self._lock:
            return self._sets.get(key)

    def drop(self, key: str) -> None:
        """Close the watches of cluster ``key`` now (handed over, or gone)."""
        with self._lock:
            current = self._sets.pop(key, None)
        if current is not None:
            self._close(current)

    def _close(self, watches: ClusterWatches) -> None:
        watches.closed = True  # seen at once by the watches' loops
        if self._started and not self.loop.is_closed():
            asyncio.run_coroutine_threadsafe(watches._close(), self.loop)

    def stop(self) -> None:
        with self._lock:
            sets, self._sets = list(self._sets.values()), {}
            started, self._started = self._started, True  # no start after a stop
        if not started:
            self.loop.close()
            return
        if self.loop.is_closed():
            return
        closing: list[Future[Any]] = [asyncio.run_coroutine_threadsafe(s._close(), self.loop)
                                      for s in sets]
        for f in closing:
            try:
                f.result(5.0)
            except Exception as exc:  # a client that will not close: the loop stops anyway
                log.debug("closing watches: %s", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)


class Sharing(Generic[T]):
    """One ``T`` per API server (and user), shared by the clusters whose connections
    reach it (``Connection.server``).

    A cluster joins the server its connection reaches now, leaving the one it read
    before (its credentials or server changed); the last to leave a server closes
    its ``T`` (``close(server, thing)``, under the lock: something made for that
    server next never shares what is closing). One lock; ``make`` and ``close`` run
    under it and must not block.
    """

    def __init__(self, close: Callable[[str, T], None]) -> None:
        self._close = close
        self._lock = threading.Lock()
        self._things: dict[str, T] = {}  # server → its T
        self._server_of: dict[str, str] = {}  # cluster → the server it reads
        self._members: dict[str, frozenset[str]] = {}  # server → the clusters reading it

    def join(self, cluster: str, server: str, make: Callable[[], T],
             alive: Callable[[T], bool]) -> tuple[T, bool]:
        """``server``'s T, for ``cluster`` too (made, when there is none or it is no longer
        ``alive``); and whether it is new (its caller starts it)."""
        with self._lock:
            left = self._server_of.get(cluster)
            if left != server:
                self._server_of[cluster] = server
                self._members[server] = self._members.get(server, frozenset()) | {cluster}
                if left is not None:
                    self._leave(cluster, left)
            thing = self._things.get(server)
            if thing is not None and alive(thing):
                return thing, False
            if thing is not None:
                self._close(server, thing)
            thing = self._things[server] = make()
            return thing, True

    def server_of(self, cluster: str) -> str | None:
        """The server ``cluster`` reads (None: none)."""
        with self._lock:
            return self._server_of.get(cluster)

    def leave(self, cluster: str) -> None:
        """``cluster`` reads nothing any more (handed over, or gone)."""
        with self._lock:
            server = self._server_of.pop(cluster, None)
            if server is not None:
                self._leave(cluster, server)

    def _leave(self, cluster: str, server: str) -> None:
        members = self._members.get(server, frozenset()) - {cluster}
        if members:
            self._members[server] = members
            return
        self._members.pop(server, None)
        thing = self._things.pop(server, None)
        if thing is not None:
            self._close(server, thing)

    def of(self, cluster: str) -> T | None:
        """What ``cluster`` reads (None: it joined nothing)."""
        with self._lock:
            server = self._server_of.get(cluster)
            return self._things.get(server) if server is not None else None

    def members(self, server: str) -> frozenset[str]:
        """The clusters reading ``server``'s T now."""
        with self._lock:
            return self._members.get(server, frozenset())

    def clusters(self) -> list[str]:
        with self._lock:
            return list(self._server_of)

    def clear(self) -> list[T]:
        """Forget every cluster; what was shared, for its owner to stop."""
        with self._lock:
            things, self._things = list(self._things.values()), {}
            self._server_of, self._members = {}, {}
        return things


__all__ = ["ClusterWatches", "Hub", "Sharing"]
