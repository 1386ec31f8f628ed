"""``berth propagator``: the cluster observer and the applier in one process.

Both share the Cluster informer and one connection per cluster. The
observer writes cluster status keys; the applier's workers reconcile
applications (and one more worker only those whose copy's state just turned:
available now, or failed); a resync loop re-applies everything every
``resync_interval``;
drift watches re-apply an application as soon as someone else changes one of
its objects on a cluster.

Every replica works, on the clusters it claims (``shard.py``): it probes and
watches those only, applies to and removes from those only, and writes the
status of the applications on them (guarded by revisions: several replicas
write one application's status when it runs on clusters of several). A
cluster it loses has its requests ended first, then its connection closed,
which ends its watches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import Metric

from berth.controllers.propagator.applier import APPLICATION_STATES, Applier
from berth.controllers.propagator.config import PropagatorConfig
from berth.controllers.propagator.credentials import Kubeconfigs
from berth.controllers.propagator.drift import DriftWatches
from berth.controllers.propagator.kube import Connections
from berth.controllers.propagator.observer import Observer
from berth.controllers.propagator.shard import Shard
from berth.controllers.propagator.views import ClusterView, cluster_id, cluster_key
from berth.controllers.propagator.watches import Hub
from berth.controllers.runtime import Event, EventType, Informer, start_workers
from berth.controllers.runtime.election import default_identity
from berth.controllers.runtime.observe import counts, states
from berth.controllers.runtime.supervise import Loop
from berth.store import Store, keys
from berth.store.credentials import Credentials
from berth.store.documents import ClusterStatus, Reachability

log = logging.getLogger(__name__)

# a cluster's reachability, and UNKNOWN for one not probed yet (the gauge's word only)
CLUSTER_STATES = (*(r.value for r in Reachability), "UNKNOWN")
APPLICATIONS_METRIC = "berth_applications"


class Propagator:
    def __init__(self, store: Store, config: PropagatorConfig, *, lease_ttl: int = 10,
                 identity: str | None = None) -> None:
        self.store = store
        self.config = config
        idle = config.watch_idle_timeout
        self.clusters: Informer[ClusterView] = Informer(
            store, keys.resource_prefix("Cluster"), ClusterView, idle_timeout=idle)
        self.cluster_statuses: Informer[ClusterStatus] = Informer(
            store, keys.status_prefix("Cluster"), ClusterStatus, idle_timeout=idle)
        self.connections = Connections(config.request_timeout)
        self.kubeconfigs = Kubeconfigs(store, idle_timeout=idle)
        self.shard = Shard(store, identity or default_identity(), ttl=lease_ttl,
                           clusters=lambda: self.applier.claimable(), on_gain=self._gain,
                           on_lose=self._lose,
                           on_members=lambda: self.applier.members_changed(),
                           idle_timeout=idle)
        # every cluster's watches, one thread each sort: Nodes and Pods (the observer's),
        # and the drift watches, whose news (available now) never waits behind a Pod's
        self.hub = Hub("capacity-watches")
        self.drift_hub = Hub("drift-watches")
        self.observer = Observer(store, config, clusters=self.clusters,
                                 statuses=self.cluster_statuses, connections=self.connections,
                                 kubeconfigs=self.kubeconfigs, hub=self.hub, shard=self.shard)
        self.applier = Applier(store, config, clusters=self.clusters,
                               cluster_statuses=self.cluster_statuses,
                               connections=self.connections, kubeconfigs=self.kubeconfigs,
                               shard=self.shard, pods=self.observer)
        self.observer.on_pods = self.applier.on_pods
        self.observer.heartbeat = self.applier.pull.heartbeat  # pull clusters' state
        self.observer.events = self.applier.events
        self.applier.pull.on_heartbeat.append(lambda _cid: self.observer.wake())
        self.kubeconfigs.informer.add_handler(self._on_credentials)
        self.drift: DriftWatches | None = None
        if config.drift_watch:
            drift = DriftWatches(
                self.connections, self.drift_hub, self.applier.on_drift,
                lambda cid: self.applier.requeue_cluster(cid, drifted=True),
                known=self.applier.book.held, server_timeout=config.drift_watch_timeout,
                probe_timeout=config.probe_timeout)
            self.applier.on_applied.append(
                lambda cid, kind, _ref, _stored: drift.ensure(cid, cluster_key(cid), kind))
            self.cluster_statuses.add_handler(self._on_cluster_status)
            self.drift = drift
        self._informers: tuple[Informer[Any], ...] = (
            self.clusters, self.cluster_statuses, self.kubeconfigs.informer,
            *self.applier.informers)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._resync = Loop("resync", self._resync_step,
                            deadline=config.resync_interval + 60.0)
        self._started = False

    def _on_credentials(self, event: Event[Credentials]) -> None:
        """New credentials: apply through them at once (the next probe uses them too)."""
        meta = event.obj.metadata
        if event.type is not EventType.ADDED and meta.namespace:
            self.kubeconfigs.forget(keys.resource_key("Cluster", meta.name, meta.namespace))
            self.applier.requeue_cluster(cluster_id(meta.namespace, meta.name), drifted=True)

    def _on_cluster_status(self, event: Event[ClusterStatus]) -> None:
        """A cluster the observer sees back ONLINE: its drift watches list again now."""
        was = event.old.status.state if event.old is not None else None
        if (self.drift is not None and event.type is not EventType.DELETED
                and event.obj.status.state == Reachability.ONLINE and was is not None
                and was != Reachability.ONLINE):
            meta = event.obj.metadata
            self.drift.back(cluster_id(meta.namespace, meta.name))

    def _gain(self, cid: str) -> None:
        """A cluster claimed: probe it now, and reconcile what is (to be) on it."""
        self.observer.wake()
        self.applier.gained(cid)

    def _lose(self, cid: str) -> None:
        """A cluster handed over (its requests have ended): stop watching it."""
        key = cluster_key(cid)
        self.observer.forget(key)  # and its server's capacity watches, if it was the last
        if self.drift is not None:
            self.drift.leave(cid)  # its server's watches end with the last cluster there
        self.connections.drop(key)
        self.applier.book.forget_cluster(cid)

    def start(self, sync_timeout: float = 60.0) -> None:
        for inf in self._informers:
            inf.start()
        for inf in self._informers:
            if not inf.wait_synced(sync_timeout):
                raise TimeoutError(f"the propagator did not sync {inf.prefix} with etcd")
        self.shard.start(sync_timeout)
        self._started = True
        self.observer.start()
        self._threads = [
            *start_workers(self.applier.queue, self.applier.reconcile, self.config.workers,
                           name="apply"),
            # judges and records a copy whose state turned while every worker applies
            *start_workers(self.applier.queue, self.applier.reconcile, 1, name="judge",
                           urgent_only=True)]
        self._resync.start()
        if self.applier.events is not None:
            self.applier.events.start()
        log.info("propagator: %d clusters, %d applications; %d workers",
                 len(self.clusters), len(self.applier.apps), self.config.workers)

    def collect(self) -> Iterator[Metric]:
        """Each cluster's state and the applications by state, as this leader sees them."""
        known = {cluster_id(item.obj.metadata.namespace, item.obj.metadata.name):
                 item.obj.status.state for item in self.cluster_statuses.items()}
        clusters: dict[str, str] = {}
        owned = self.shard.owned()
        for item in self.clusters.items():  # each replica those it serves
            cid = cluster_id(item.obj.metadata.namespace, item.obj.metadata.name)
            if cid in owned:
                clusters[cid] = known.get(cid) or "UNKNOWN"
        yield states("berth_cluster_state", "1 for the cluster's state as last observed "
                     "(UNKNOWN: not yet probed), 0 for the others", "cluster", clusters,
                     CLUSTER_STATES)
        # Counted by one replica (the one this name hashes to), not once per replica.
        states_now = self.applier.states() if self.shard.mine(APPLICATIONS_METRIC) else {}
        yield counts("berth_applications", "Applications by state: the propagator's status, "
                     "or Unschedulable while the scheduler finds no cluster",
                     "state", states_now, APPLICATION_STATES if states_now else ())

    def ready(self) -> bool:
        return self._started and all(inf.synced.is_set() for inf in self._informers)

    def alive(self) -> bool:
        """The resync and the observer loops run, every apply worker and every informer."""
        return (not self._started) or (self._resync.alive() and self.observer.alive()
                                       and self.shard.alive() and self.hub.alive()
                                       and self.drift_hub.alive()
                                       and all(t.is_alive() for t in self._threads)
                                       and all(inf.alive() for inf in self._informers)
                                       and (self.applier.events is None
                                            or self.applier.events.alive()))

    def stop(self) -> None:
        self._stop.set()
        if self._started:
            self.shard.stop()  # requests end, then the clusters go to the others at once
        self.hub.stop()
        self.drift_hub.stop()
        self.applier.queue.shutdown()
        self.observer.stop()
        self._resync.stop()
        if self.applier.events is not None:
            self.applier.events.stop()
        for t in self._threads:
            t.join(timeout=self.config.request_timeout + 5)
        for inf in self._informers:
            inf.stop(wait=False)
        for inf in self._informers:
            inf.join()
        self.connections.close()

    def _resync_step(self) -> None:
        if self._stop.wait(self.config.resync_interval):
            return
        self.applier.writer.forget_written(self.applier.statuses.revision)
        self.applier.resync()
