"""The cluster observer: is each cluster's API reachable, and what does it serve?

Every ``probe_interval`` seconds each Cluster with a kubeconfig is probed
(``/readyz``, else ``/version`` for API servers that do not serve it) and its
CustomResourceDefinitions are listed; the result goes to the cluster's status
key, ``/berth/v1/status/clusters/<ns>/<name>``, which only this process
writes: ``state`` ONLINE, UNHEALTHY (reachable but not ready) or OFFLINE
(unreachable), ``reason``, and ``custom_resources`` as ``<plural>.<group>``
(so seed 000's custom-resource constraint also matches CRDs nobody declared).
A failing cluster keeps its state until ``grace`` probes in a row have failed:
one blip does not make the scheduler move everything away. A status is
rewritten only when it changes. Kubeconfigs and tokens are never logged.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from berth.controllers.propagator.config import PropagatorConfig
from berth.controllers.propagator.credentials import Kubeconfigs
from berth.controllers.propagator.kube import Connections, Probe, safe
from berth.controllers.propagator.views import ClusterView
from berth.controllers.runtime import Event, EventType, Informer
from berth.controllers.runtime.supervise import Loop
from berth.store import Conflict, Delete, Put, Store, StoreError, encode, keys
from berth.store.documents import ClusterState, ClusterStatus, StatusMeta

log = logging.getLogger(__name__)


class Observer:
    def __init__(self, store: Store, config: PropagatorConfig, *,
                 clusters: Informer[ClusterView], statuses: Informer[ClusterStatus],
                 connections: Connections, kubeconfigs: Kubeconfigs) -> None:
        self.store = store
        self.config = config
        self.clusters = clusters
        self.statuses = statuses
        self.connections = connections
        self.kubeconfigs = kubeconfigs
        self._failures: dict[str, int] = {}  # cluster key → failed probes in a row
        self._failures_lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(config.probe_concurrency, thread_name_prefix="probe")
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._loop = Loop("observer", self._step, deadline=config.probe_interval + 60.0)
        self.clusters.add_handler(self._on_cluster)

    def start(self) -> None:
        """Start probing (the informers are started and synced by the caller)."""
        self._loop.start()

    def alive(self) -> bool:
        return self._loop.alive()

    def stop(self) -> None:
        self._stop.set()
        self._loop.halt()
        self._wake.set()
        self._loop.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _on_cluster(self, event: Event[ClusterView]) -> None:
        if event.type is not EventType.DELETED:
            self._wake.set()  # probe a new or changed cluster at once

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
            if item.obj.spec.kubeconfig and item.obj.metadata.deleted is None:
                with self._lock:
                    if item.key in self._in_flight:
                        continue  # a slow cluster is probed once at a time
                    self._in_flight.add(item.key)
                self._pool.submit(self._probe_one, item.key, item.obj)
        for key in self.statuses.list_keys():
            if keys.resource_key_of(key) not in live:
                self._remove(key)  # the cluster is gone: so is what we observed of it

    def _probe_one(self, key: str, view: ClusterView) -> None:
        try:
            if not self._stop.is_set():
                self._observe(key, view)
        finally:
            with self._lock:
                self._in_flight.discard(key)

    def _observe(self, key: str, view: ClusterView) -> None:
        try:
            conn = self.connections.get(key, self.kubeconfigs.of(key, view) or {})
        except Exception as exc:  # a kubeconfig lightkube cannot use
            probe = Probe("OFFLINE", f"unusable kubeconfig: {safe(exc)}")
        else:
            probe = conn.probe(self.config.probe_timeout)
        skey = keys.status_key("Cluster", view.metadata.namespace or "", view.metadata.name)
        current = self.statuses.get(skey)
        if probe.state != "ONLINE":
            with self._failures_lock:  # probes run on the pool's threads
                failures = self._failures[key] = self._failures.get(key, 0) + 1
            if failures < self.config.grace:
                was = current.status if current else None
                probe = Probe(was.state if was else "", f"{probe.reason} "
                              f"({failures}/{self.config.grace} failed probes)",
                              tuple(was.custom_resources) if was else ())
        else:
            with self._failures_lock:
                self._failures.pop(key, None)
        self._write(skey, view, probe, current)

    def _write(self, skey: str, view: ClusterView, probe: Probe,
               current: ClusterStatus | None) -> None:
        if current is not None and (current.status.state, current.status.reason,
                                    tuple(current.status.custom_resources)) == (
                probe.state, probe.reason, probe.custom_resources):
            return
        if not probe.state:
            return  # never probed successfully and still within the grace: nothing to say
        doc = ClusterStatus(
            StatusMeta(view.metadata.name, view.metadata.namespace),
            ClusterState(probe.state, probe.reason, list(probe.custom_resources),
                         datetime.now(UTC)))
        item = self.statuses.item(skey)
        try:
            self.store.commit([Put(skey, encode(doc), item.mod_revision if item else 0)])
        except Conflict:
            log.info("%s changed meanwhile; the next probe writes again", skey)
        except StoreError as exc:
            log.warning("%s: not written: %s", skey, exc)
        else:
            if current is None or current.status.state != probe.state:
                log.log(logging.INFO if probe.state == "ONLINE" else logging.WARNING,
                        "cluster %s/%s is %s%s", view.metadata.namespace, view.metadata.name,
                        probe.state, f" ({probe.reason})" if probe.reason else "")

    def _remove(self, skey: str) -> None:
        item = self.statuses.item(skey)
        if item is None:
            return  # nothing of ours there
        try:
            self.store.commit([Delete(skey, item.mod_revision)])
        except StoreError as exc:
            log.info("%s: not removed: %s", skey, exc)
