"""Drift watches: one Kubernetes watch per (cluster, kind) berth has applied there.

Each watch selects the objects labelled ``app.kubernetes.io/managed-by:
berth`` in every namespace and hands every event to ``on_event``, which
decides whether someone other than berth changed the object. When a watch
breaks (the cluster went away), it waits until the cluster answers a probe
again, then calls ``on_back`` — changes made while nobody watched, or a
cluster that came back empty, are found by re-applying everything on it.
Otherwise a watch resumes from the last resourceVersion it saw (bookmarks
keep it fresh), so renewing the request misses nothing. A
cluster that does not allow watching is left to the periodic resync.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from controllers.propagator.kube import (
    Connection,
    Connections,
    Kind,
    KubeObject,
    Unavailable,
    WatchRefused,
    safe,
)

log = logging.getLogger(__name__)

OnEvent = Callable[[str, str, KubeObject], None]  # (cluster id, event type, object)


class DriftWatches:
    def __init__(self, connections: Connections, on_event: OnEvent,
                 on_back: Callable[[str], None], *, server_timeout: int,
                 probe_timeout: float, max_delay: float = 30.0) -> None:
        self.connections = connections
        self.on_event = on_event
        self.on_back = on_back
        self.server_timeout = server_timeout
        self.probe_timeout = probe_timeout
        self.max_delay = max_delay
        self._lock = threading.Lock()
        self._watches: dict[tuple[str, Connection, Kind], threading.Thread] = {}
        self._stop = threading.Event()

    def ensure(self, cid: str, ckey: str, conn: Connection, kind: Kind, since: str) -> None:
        """Watch ``kind`` on the cluster (once per connection and kind), from the
        resourceVersion ``since`` — the apply that asked for it — so that no change
        made after that apply is missed while the watch connects."""
        ident = (cid, conn, kind)
        with self._lock:
            if ident in self._watches or self._stop.is_set():
                return
            thread = threading.Thread(target=self._run, args=(cid, ckey, conn, kind, since),
                                      name=f"drift-{cid}-{kind.plural}", daemon=True)
            self._watches[ident] = thread
        thread.start()

    def stop(self) -> None:
        self._stop.set()  # the connections' close ends the open requests

    def _alive(self, ckey: str, conn: Connection) -> bool:
        return (not self._stop.is_set() and not conn.closed
                and self.connections.current(ckey) is conn)

    def _run(self, cid: str, ckey: str, conn: Connection, kind: Kind, since: str) -> None:
        delay = 0.5
        try:
            while self._alive(ckey, conn):
                try:
                    for event in conn.watch(kind, self.server_timeout, since):
                        if not self._alive(ckey, conn):
                            return
                        if event.type == "ERROR":  # e.g. 410: ``since`` is too old
                            raise Unavailable(f"watch error: {event.object}")
                        since = event.object.metadata.resourceVersion or since
                        if event.type != "BOOKMARK":
                            self.on_event(cid, event.type, event.object)
                        delay = 0.5
                    continue  # the server ended the request: resume from ``since``
                except WatchRefused as exc:
                    log.warning("cluster %s does not allow watching %s (%s): drift is found "
                                "by the periodic resync only", cid, kind.plural, exc)
                    return
                except Exception as exc:
                    if not self._alive(ckey, conn):
                        return
                    log.info("watch of %s on cluster %s broke (%s); re-applying when it is "
                             "back", kind.plural, cid, safe(exc))
                self._wait_until_back(ckey, conn, delay)
                delay = min(self.max_delay, delay * 2)
                since = ""  # what happened meanwhile is found by re-applying everything
                if self._alive(ckey, conn):
                    self.on_back(cid)
        finally:
            with self._lock:
                self._watches.pop((cid, conn, kind), None)

    def _wait_until_back(self, ckey: str, conn: Connection, delay: float) -> None:
        while self._alive(ckey, conn):
            self._stop.wait(delay)
            if conn.probe(self.probe_timeout).state == "ONLINE":
                return
            delay = min(self.max_delay, delay * 2)
