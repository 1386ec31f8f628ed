"""The cluster observer: is each cluster's API reachable, and what does it serve?

Every ``probe_interval`` seconds each Cluster with a kubeconfig is probed
(``/readyz``, else ``/version`` for API servers that do not serve it) and its
CustomResourceDefinitions are listed; the result goes to the cluster's status
key, ``/berth/v1/status/clusters/<ns>/<name>``, which only this process
writes: ``state`` ONLINE, UNHEALTHY (reachable but not ready) or OFFLINE
(unreachable), ``reason``, and ``custom_resources`` as ``<plural>.<group>``
(so Krake's custom-resource constraint also matches CRDs nobody declared).
A pull cluster is not probed: its agent does that, and its heartbeat (on the
agent's lease) says what it found; no heartbeat is a failed probe.
A failing cluster keeps its state until ``grace`` probes in a row have failed:
one blip does not make the scheduler move everything away. A status is
rewritten only when it changes. Kubeconfigs and tokens are never logged.

An ONLINE cluster's Nodes and Pods are watched (``capacity.py``; once per
API server and user, whatever the number of clusters that are namespaces of
it) and their summary — allocatable and requested CPU, memory, pods and every other resource
by name, and how many pods each application has — goes into the status as
``capacity``: with each probe, and between probes at most every
``capacity_interval`` seconds when it changed. A cluster turning ONLINE is
said so with its summary: the probe waits up to ``probe_timeout`` for the
first lists (an agent's heartbeat too).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from datetime import UTC, datetime

from berth.controllers.propagator.capacity import Tracker, same
from berth.controllers.propagator.config import PropagatorConfig
from berth.controllers.propagator.credentials import Kubeconfigs
from berth.controllers.propagator.kube import Connection, Connections, Probe, safe
from berth.controllers.propagator.shard import Shard
from berth.controllers.propagator.views import ClusterView, cluster_key
from berth.controllers.propagator.views import cluster_id as view_id
from berth.controllers.propagator.watches import Hub, Sharing
from berth.controllers.runtime import Event, EventType, Informer
from berth.controllers.runtime.events import Recorder
from berth.controllers.runtime.supervise import Loop
from berth.store import Conflict, Delete, Deposed, Put, Store, StoreError, encode, keys
from berth.store.documents import Capacity, ClusterState, ClusterStatus, Reachability, StatusMeta
from berth.store.documents.work import AgentState
from berth.store.events import InvolvedObject
from berth.store.group import GroupCommit

log = logging.getLogger(__name__)


def cluster_id(view: ClusterView) -> str:
    return view_id(view.metadata.namespace, view.metadata.name)


def _returned(current: ClusterStatus | None, state: Reachability | None,
              now: datetime) -> datetime | None:
    """``status.returned`` for a cluster found ``state``: now if it just came back ONLINE
    from another state it went to after it had been ONLINE, as it was while it stays
    ONLINE, else None (a cluster seen for the first time, or ONLINE for the first time
    after its agent joined, has not come back from anything)."""
    if state != Reachability.ONLINE or current is None:
        return None
    was = current.status
    if was.state == Reachability.ONLINE:
        return was.returned
    return now if was.state and was.joined is not None else None


def _joined(current: ClusterStatus | None, state: Reachability | None,
            now: datetime) -> datetime | None:
    """``status.joined``: when the cluster was first seen ONLINE (kept); for a status an
    older berth wrote while the cluster was ONLINE, when it was probed so."""
    was = current.status if current is not None else None
    if was is not None and was.joined is not None:
        return was.joined
    if was is not None and was.state == Reachability.ONLINE:
        return was.probed or now
    return now if state == Reachability.ONLINE else None


class Observer:
    def __init__(self, store: Store, config: PropagatorConfig, *,
                 clusters: Informer[ClusterView], statuses: Informer[ClusterStatus],
                 connections: Connections, kubeconfigs: Kubeconfigs, hub: Hub,
                 shard: Shard | None = None) -> None:
        self.store = store
        self.shard = shard  # None: every cluster is this replica's
        self.hub = hub  # where the capacity watches run, among each cluster's watches
        self.group = GroupCommit(store, "cluster-status")  # probes finish together
        self.config = config
        self.clusters = clusters
        self.statuses = statuses
        self.connections = connections
        self.kubeconfigs = kubeconfigs
        self._failures: dict[str, int] = {}  # cluster key → failed probes in a row
        self._missing: dict[str, float] = {}  # pull cluster key → since when no heartbeat
        self._failures_lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(config.probe_concurrency, thread_name_prefix="probe")
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._loop = Loop("observer", self._step, deadline=config.probe_interval + 60.0)
        self.clusters.add_handler(self._on_cluster)
        # status key → revision of a value there that is not a cluster status (garbage
        # written by hand, wrong types): the next write replaces it
        self._garbage: dict[str, int] = {}
        statuses.add_invalid_handler(self._garbage_seen)
        statuses.add_cleared_handler(self._garbage_gone)
        # server → its Nodes and Pods, read by the cluster keys that reach it
        self._trackers: Sharing[Tracker] = Sharing(self._close_tracker)
        self._dirty: set[str] = set()  # cluster keys whose capacity changed since written
        self._dirty_wake = threading.Event()
        self._capacity_loop = Loop("capacity", self._capacity_step,
                                   deadline=config.capacity_interval + 60.0)
        # (application): that application's pods became (not) Ready on a cluster
        self.on_pods: Callable[[str], None] | None = None
        # (cluster id) → what its agent's heartbeat says, for pull clusters (pull.py)
        self.heartbeat: Callable[[str], AgentState | None] | None = None
        self.events: Recorder | None = None  # where a pull cluster's held removals are said

    def start(self) -> None:
        """Start probing (the informers are started and synced by the caller)."""
        self._loop.start()
        if self.config.capacity:
            self._capacity_loop.start()

    def alive(self) -> bool:
        return self._loop.alive() and (not self.config.capacity or (
            self._capacity_loop.alive() and self.hub.alive()))

    def stop(self) -> None:
        self._stop.set()
        self._loop.halt()
        self._capacity_loop.halt()
        self._wake.set()
        self._dirty_wake.set()
        self._loop.stop()
        self._capacity_loop.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for t in self._trackers.clear():
            t.stop()

    # -- capacity ----------------------------------------------------------------

    def _track(self, key: str, conn: Connection) -> Tracker | None:
        """The tracker of the Nodes and Pods ``conn`` sees, shared by every cluster on
        the same server as the same user (a new one when it stopped: the connection
        that started it was replaced or dropped)."""
        if not self.config.capacity:
            return None
        server = conn.server
        tracker, fresh = self._trackers.join(
            key, server, lambda: Tracker(conn.config.cluster.server, self.hub.of(server, conn),
                                         lambda: self._changed(server), self._pods),
            Tracker.alive)
        return tracker.start() if fresh else tracker

    def _close_tracker(self, server: str, tracker: Tracker) -> None:
        """The last cluster left ``server`` (or its tracker stopped): its watches end."""
        tracker.stop()
        self.hub.drop(server)

    def _tracker_of(self, cid: str) -> Tracker | None:
        return self._trackers.of(cluster_key(cid))

    def trouble(self, cid: str, owner: str) -> str:
        """Why the application ``owner``'s pods on cluster ``cid`` are not Ready ("": all
        are, or the cluster's pods are not watched)."""
        tracker = self._tracker_of(cid)
        return tracker.trouble(owner) if tracker is not None else ""

    def lost(self, cid: str, owner: str) -> int:
        """How many of ``owner``'s pods on ``cid`` are bound to Nodes that are gone."""
        tracker = self._tracker_of(cid)
        return tracker.lost(owner) if tracker is not None else 0

    def _changed(self, server: str) -> None:
        """The summary of ``server`` changed: every cluster on it is to be written."""
        members = self._trackers.members(server)
        with self._lock:
            self._dirty.update(members)
        self._dirty_wake.set()

    def _pods(self, owner: str) -> None:
        if self.on_pods is not None:
            self.on_pods(owner)

    def _capacity_step(self) -> None:
        """Write the capacity of clusters whose Nodes or Pods changed (ONLINE ones)."""
        self._dirty_wake.wait(self.config.probe_interval)
        if self._stop.is_set():
            return
        self._stop.wait(self.config.capacity_interval)  # gather a burst into one write
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            self._dirty_wake.clear()
        trackers = {k: self._trackers.of(k) for k in dirty}
        for key, tracker in trackers.items():
            view = self.clusters.get(key)
            if tracker is None or view is None or (
                    self.shard is not None and not self.shard.owns(cluster_id(view))):
                continue
            skey = keys.status_key("Cluster", view.metadata.namespace or "", view.metadata.name)
            current = self.statuses.get(skey)
            if current is None or current.status.state != Reachability.ONLINE:
                continue
            was = current.status
            self._write(skey, view, Probe(was.state, was.reason, tuple(was.custom_resources)),
                        current, tracker.capacity())

    def _garbage_seen(self, key: str, revision: int) -> None:
        with self._lock:
            self._garbage[key] = revision
        self._wake.set()  # probe now: the probe writes the status over it

    def _garbage_gone(self, key: str, revision: int) -> None:
        with self._lock:
            if self._garbage.get(key, 0) <= revision:
                self._garbage.pop(key, None)

    def _on_cluster(self, event: Event[ClusterView]) -> None:
        if event.type is not EventType.DELETED:
            self._wake.set()  # probe a new or changed cluster at once

    def wake(self) -> None:
        """Probe now (a cluster was claimed)."""
        self._wake.set()

    def forget(self, key: str) -> None:
        """A cluster handed over: stop watching its Nodes and Pods."""
        self._trackers.leave(key)
        with self._failures_lock:
            self._failures.pop(key, None)
            self._missing.pop(key, None)

    def _step(self) -> None:
        if self._stop.is_set():
            return
        self.probe_all()
        self._wake.wait(self.config.probe_interval)
        self._wake.clear()

    def probe_all(self) -> None:
        items = self.clusters.items()
        live = {item.key for item in items}
        for item in items:
            if item.obj.servable and (
                    self.shard is None or self.shard.owns(cluster_id(item.obj))):
                with self._lock:
                    if item.key in self._in_flight:
                        continue  # a slow cluster is probed once at a time
                    self._in_flight.add(item.key)
                self._pool.submit(self._probe_one, item.key, item.obj)
        for skey in self.statuses.list_keys():
            if keys.resource_key_of(skey) not in live:
                self._remove(skey)  # the cluster is gone: so is what we observed of it
        for key in self._trackers.clusters():
            if key not in live:
                self._trackers.leave(key)

    def _probe_one(self, key: str, view: ClusterView) -> None:
        try:
            with (self.shard.serving(cluster_id(view)) if self.shard is not None
                  else nullcontext(True)) as serving:
                if serving and not self._stop.is_set():
                    if view.pull:
                        self._hear(key, view)
                    else:
                        self._observe(key, view)
        finally:
            with self._lock:
                self._in_flight.discard(key)

    def _observe(self, key: str, view: ClusterView) -> None:
        conn: Connection | None = None
        try:
            conn = self.connections.get(key, self.kubeconfigs.of(key, view) or {})
        except Exception as exc:  # a kubeconfig lightkube cannot use
            probe = Probe(Reachability.OFFLINE, f"unusable kubeconfig: {safe(exc)}")
        else:
            probe = conn.probe(self.config.probe_timeout)
        tracker = self._track(key, conn) if (
            conn is not None and probe.state == Reachability.ONLINE) else None
        self._settle(key, view, probe, tracker)

    def _hear(self, key: str, view: ClusterView) -> None:
        """A pull cluster is what its agent's heartbeat says: the agent probes it, and
        counts its Nodes and Pods. No heartbeat (its lease ended: the agent died, or
        cannot reach etcd) is a failed probe. A failure is written once it lasted
        ``grace`` probe intervals (not probes: a heartbeat is read without waiting on
        anything, and the observer wakes at every change of one — a standby taking
        over is a moment without any)."""
        beat = self.heartbeat(cluster_id(view)) if self.heartbeat is not None else None
        if beat is not None and not beat.state:
            return  # an agent began to lead, and has not probed yet: nothing to say
        if beat is None:
            probe = Probe(Reachability.OFFLINE, "no heartbeat from its agent (stopped, cut "
                          "off from etcd, or never joined)")
        else:
            probe = Probe(beat.state, f"its agent reports: {beat.reason}" if beat.reason
                          else "", tuple(beat.custom_resources),
                          beat.kubernetes[:64])  # (an agent's word: bounded as a probe's)
        now = time.monotonic()
        with self._failures_lock:
            if probe.state == Reachability.ONLINE:
                self._missing.pop(key, None)
                failing = 0.0
            else:
                failing = now - self._missing.setdefault(key, now)
        grace = self.config.grace * self.config.probe_interval
        if probe.state != Reachability.ONLINE and failing < grace:
            return  # failing for less than the grace: what is written stands
        held = beat.held if beat is not None else ""
        skey = keys.status_key("Cluster", view.metadata.namespace or "", view.metadata.name)
        current = self.statuses.get(skey)
        if held and self.events is not None and (current is None or not current.status.held):
            self.events.emit(InvolvedObject("Cluster", view.metadata.name,
                                            view.metadata.namespace), "Warning",
                             "RemovalsHeld", f"its agent holds removals back: {held}")
        self._write(skey, view, probe, current, beat.capacity if beat is not None else None,
                    held)

    def _settle(self, key: str, view: ClusterView, probe: Probe, tracker: Tracker | None
                ) -> None:
        """Write what a probe found, once ``grace`` probes in a row agree it failed; with
        the capacity ``tracker`` sums (turning ONLINE, said with it: Tracker.first)."""
        skey = keys.status_key("Cluster", view.metadata.namespace or "", view.metadata.name)
        current = self.statuses.get(skey)
        capacity = None
        if tracker is not None:
            turning = current is None or current.status.state != Reachability.ONLINE
            capacity = tracker.first(self.config.probe_timeout if turning else 0.0)
        if probe.state != Reachability.ONLINE:
            with self._failures_lock:  # probes run on the pool's threads
                failures = self._failures[key] = self._failures.get(key, 0) + 1
            if failures < self.config.grace:
                was = current.status if current else None
                probe = Probe(was.state if was else None, f"{probe.reason} "
                              f"({failures}/{self.config.grace} failed probes)",
                              tuple(was.custom_resources) if was else (),
                              was.version if was else "", probe.endpoint)
        else:
            with self._failures_lock:
                self._failures.pop(key, None)
        if capacity is None and current is not None and probe.state == current.status.state:
            capacity = current.status.capacity  # not listed yet, or failing: as it was
        self._write(skey, view, probe, current, capacity)

    def _write(self, skey: keys.Key, view: ClusterView, probe: Probe,
               current: ClusterStatus | None, capacity: Capacity | None, held: str = ""
               ) -> None:
        item = self.statuses.item(skey)
        with self._lock:
            garbage = self._garbage.get(skey, 0)
        if garbage <= (item.mod_revision if item else 0):
            garbage = 0  # replaced since (by us, or it was deleted and written anew)
        if not garbage and current is not None and (
                current.status.state, current.status.reason,
                tuple(current.status.custom_resources), current.status.held,
                current.status.version, current.status.endpoint) == (
                probe.state, probe.reason, probe.custom_resources, held,
                probe.version or current.status.version, probe.endpoint) and same(
                current.status.capacity, capacity):
            return
        if not probe.state:
            return  # never probed successfully and still within the grace: nothing to say
        now = datetime.now(UTC)
        doc = ClusterStatus(
            StatusMeta(view.metadata.name, view.metadata.namespace,
                       self.shard.identity if self.shard is not None else ""),
            ClusterState(probe.state, probe.reason, list(probe.custom_resources),
                         now, capacity, returned=_returned(current, probe.state, now),
                         joined=_joined(current, probe.state, now), held=held,
                         version=probe.version or (current.status.version if current else ""),
                         endpoint=probe.endpoint))
        guard = garbage or (item.mod_revision if item else 0)
        fence = self.shard.fence(cluster_id(view)) if self.shard is not None else None
        if self.shard is not None and fence is None:  # handed over since the probe
            log.info("%s not written: cluster %s is not this replica's any more", skey,
                     cluster_id(view))
            return
        try:
            self.group.commit([Put(skey, encode(doc), guard),
                               *([fence] if fence is not None else [])])
        except Deposed:
            log.info("%s not written: cluster %s is not this replica's any more", skey,
                     cluster_id(view))
        except Conflict:
            log.info("%s changed meanwhile; the next probe writes again", skey)
            if garbage:  # the watch tells what it holds now
                with self._lock:
                    if self._garbage.get(skey) == garbage:
                        del self._garbage[skey]
        except StoreError as exc:
            log.warning("%s: not written: %s", skey, exc)
        else:
            if garbage:
                log.error("%s held a value that is not a cluster status: replaced", skey)
                with self._lock:
                    if self._garbage.get(skey) == garbage:
                        del self._garbage[skey]
            if current is None or current.status.state != probe.state:
                log.log(logging.INFO if probe.state == Reachability.ONLINE else logging.WARNING,
                        "cluster %s/%s is %s%s", view.metadata.namespace, view.metadata.name,
                        probe.state, f" ({probe.reason})" if probe.reason else "")

    def _remove(self, skey: keys.Key) -> None:
        item = self.statuses.item(skey)
        if item is None:
            return  # nothing of ours there
        try:
            self.group.commit([Delete(skey, item.mod_revision)])
        except StoreError as exc:
            log.info("%s: not removed: %s", skey, exc)
