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

import hashlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx2 as httpx
import msgspec
from lightkube import Client, KubeConfig
from lightkube.config.client_adapter import Client as HttpClient
from lightkube.config.client_adapter import ConnectionParams
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from controllers.propagator.config import PropagatorConfig
from controllers.runtime import EventType, Informer
from store import Conflict, Delete, Put, Store, StoreError, encode, keys
from store.documents import ClusterState, ClusterStatus, StatusMeta

log = logging.getLogger(__name__)


class _Meta(msgspec.Struct):
    name: str
    namespace: str | None = None
    deleted: Any = None


class _Spec(msgspec.Struct):
    kubeconfig: dict[str, Any] | None = None


class ClusterView(msgspec.Struct):
    metadata: _Meta
    spec: _Spec = msgspec.field(default_factory=_Spec)


@dataclass(frozen=True, slots=True)
class Probe:
    state: str  # ONLINE, UNHEALTHY, OFFLINE
    reason: str = ""
    custom_resources: tuple[str, ...] = ()


def _safe(exc: BaseException) -> str:
    """An error message fit for a status key: the class and text, never credentials."""
    text = str(exc).split("\n", 1)[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Connection:
    """A cluster's API, from its kubeconfig: a lightkube client and a raw HTTP one."""

    def __init__(self, kubeconfig: dict[str, Any], timeout: float) -> None:
        config = KubeConfig.from_dict(kubeconfig)
        single = config.get()
        if single is None:
            raise ValueError("the kubeconfig names no current context")
        limit = httpx.Timeout(timeout)
        self.http = HttpClient(single, ConnectionParams(timeout=limit, trust_env=False))
        self.client = Client(single, trust_env=False, timeout=limit, field_manager="berth")

    def probe(self) -> Probe:
        try:
            resp = self.http.get("/readyz")
            if resp.status_code == 404:  # older API servers: /version answers if it is up
                resp = self.http.get("/version")
        except Exception as exc:
            return Probe("OFFLINE", f"unreachable: {_safe(exc)}")
        if resp.status_code in (401, 403):
            return Probe("UNHEALTHY", f"credentials refused (HTTP {resp.status_code})")
        if resp.status_code != 200:
            return Probe("UNHEALTHY", f"not ready (HTTP {resp.status_code})")
        try:
            crds = sorted(c.metadata.name for c in self.client.list(CustomResourceDefinition)
                          if c.metadata is not None and c.metadata.name)
        except Exception as exc:
            return Probe("ONLINE", f"custom resources unknown: {_safe(exc)}")
        return Probe("ONLINE", "", tuple(crds))

    def close(self) -> None:
        self.http.close()
        self.client.close()


class Observer:
    def __init__(self, store: Store, config: PropagatorConfig) -> None:
        self.store = store
        self.config = config
        self.clusters: Informer[ClusterView] = Informer(
            store, keys.resource_prefix("Cluster"), ClusterView,
            idle_timeout=config.watch_idle_timeout)
        self.statuses: Informer[ClusterStatus] = Informer(
            store, keys.status_prefix("Cluster"), ClusterStatus,
            idle_timeout=config.watch_idle_timeout)
        self._connections: dict[str, tuple[str, Connection]] = {}  # key → (kubeconfig hash, c)
        self._failures: dict[str, int] = {}
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(config.probe_concurrency, thread_name_prefix="probe")
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.clusters.add_handler(self._on_cluster)

    def start(self, sync_timeout: float = 60.0) -> None:
        for inf in (self.clusters, self.statuses):
            inf.start()
        if not (self.clusters.wait_synced(sync_timeout)
                and self.statuses.wait_synced(sync_timeout)):
            raise TimeoutError("the observer did not sync with etcd")
        self._thread = threading.Thread(target=self._loop, name="observer", daemon=True)
        self._thread.start()

    def ready(self) -> bool:
        return self.clusters.synced.is_set() and self.statuses.synced.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._pool.shutdown(wait=True, cancel_futures=True)
        for inf in (self.clusters, self.statuses):
            inf.stop(wait=False)
        for inf in (self.clusters, self.statuses):
            inf.join()
        for _, conn in self._connections.values():
            conn.close()

    def _on_cluster(self, event: Any) -> None:
        if event.type is not EventType.DELETED:
            self._wake.set()  # probe a new or changed cluster at once

    def _loop(self) -> None:
        while not self._stop.is_set():
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
        for key in list(self.statuses.cache):
            ref = keys.parse_key(key)
            if keys.resource_key("Cluster", ref.name, ref.namespace) not in live:
                self._remove(key)  # the cluster is gone: so is what we observed of it

    def _connection(self, key: str, kubeconfig: dict[str, Any]) -> Connection:
        digest = hashlib.sha256(msgspec.json.encode(kubeconfig)).hexdigest()
        hit = self._connections.get(key)
        if hit is not None and hit[0] == digest:
            return hit[1]
        if hit is not None:
            hit[1].close()
        conn = Connection(kubeconfig, self.config.probe_timeout)
        self._connections[key] = (digest, conn)
        return conn

    def _probe_one(self, key: str, view: ClusterView) -> None:
        try:
            if not self._stop.is_set():
                self._observe(key, view)
        finally:
            with self._lock:
                self._in_flight.discard(key)

    def _observe(self, key: str, view: ClusterView) -> None:
        try:
            probe = self._connection(key, view.spec.kubeconfig or {}).probe()
        except Exception as exc:  # a kubeconfig lightkube cannot use
            probe = Probe("OFFLINE", f"unusable kubeconfig: {_safe(exc)}")
        skey = keys.status_key("Cluster", view.metadata.namespace or "", view.metadata.name)
        current = self.statuses.get(skey)
        if probe.state != "ONLINE":
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            if failures < self.config.grace:
                was = current.status if current else None
                probe = Probe(was.state if was else "", f"{probe.reason} "
                              f"({failures}/{self.config.grace} failed probes)",
                              tuple(was.custom_resources) if was else ())
        else:
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
        item = self.statuses.cache.get(skey)
        try:
            self.store.commit([Put(skey, encode(doc), item.mod_revision if item else 0)])
        except Conflict:
            log.info("%s changed meanwhile; the next probe writes again", skey)
        except StoreError as exc:
            log.warning("%s: not written: %s", skey, exc)
        else:
            if current is None or current.status.state != probe.state:
                log.info("cluster %s/%s is %s%s", view.metadata.namespace, view.metadata.name,
                         probe.state, f" ({probe.reason})" if probe.reason else "")

    def _remove(self, skey: str) -> None:
        item = self.statuses.cache.get(skey)
        try:
            self.store.commit([Delete(skey, item.mod_revision if item else None)])
        except StoreError as exc:
            log.info("%s: not removed: %s", skey, exc)
