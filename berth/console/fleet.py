"""What the console keeps: the fleet as etcd has it, kept current by informers.

One :class:`Fleet` owns everything the pages read:

- an informer per prefix (the same informers as the processes'), each holding
  the console's small views (:mod:`berth.console.views`);
- a bounded history of each metric's values (``points`` per metric, at most
  ``series`` metrics), appended by the values' informer as the metrics-cache
  writes them, and the moves seen (the last ``moves``), appended by the
  Bindings' informer when an application's targets change;
- ``version``, raised by every change: the server's stream tells pages when it
  moved, at most every ``coalesce`` seconds;
- whether etcd answers (a supervised probe every ``probe_every`` seconds), and
  since when it does not: every page says so, with the age of what it shows.

The informers' threads write; the pages read a :class:`Snapshot`, copied under
the fleet's one lock (and the informers' own), never the structures themselves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from berth.console import views as V
from berth.controllers.runtime.informer import Event, EventType, Informer, Item
from berth.controllers.runtime.supervise import Loop
from berth.controllers.tenancy import Tenancy
from berth.store import Store, StoreError, keys
from berth.store.documents.tenancy import ClusterSet, NamespacePolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Move:
    """An application's targets changing, as the console saw its Binding change."""

    at: float  # the Binding's ``scheduled`` time (epoch seconds), else when seen
    application: str  # <namespace>/<name>
    source: tuple[str, ...]
    targets: tuple[str, ...]
    decision: str  # the ledger record's id


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The fleet at one version: what a page is built from."""

    version: int
    taken: float  # time.time()
    etcd_lost: float | None  # since when etcd does not answer (None: it does)
    synced: bool
    clusters: list[Item[V.ClusterView]]
    cluster_status: dict[str, V.ClusterStatusView]  # by the status key's <ns>/<name>
    apps: list[Item[V.AppRow]]
    bindings: dict[str, V.BindingView]  # by <ns>/<name>
    app_status: dict[str, V.AppStatusView]  # by <ns>/<name>
    metrics: dict[keys.Key, V.MetricDef]  # by the metric's key
    values: dict[str, V.MetricValueView]  # by the metric's key (under metricvalues/)
    history: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    moves: list[Move] = field(default_factory=list)


def _tail(key: str) -> str:
    """``<ns>/<name>`` of a binding or status key (its last two segments)."""
    return "/".join(key.rsplit("/", 2)[-2:])


class Fleet:
    def __init__(self, store: Store, *, points: int = 720, series: int = 5000,
                 moves: int = 2000, probe_every: float = 2.0) -> None:
        self.store = store
        self.points, self.series = points, series
        self.probe_every = probe_every
        self.clusters: Informer[V.ClusterView] = Informer(
            store, keys.resource_prefix("Cluster"), V.ClusterView)
        self.cluster_status: Informer[V.ClusterStatusView] = Informer(
            store, keys.status_prefix("Cluster"), V.ClusterStatusView)
        self.apps: Informer[V.AppRow] = Informer(
            store, keys.resource_prefix("Application"), V.AppDoc, convert=V.app_row)
        self.bindings: Informer[V.BindingView] = Informer(
            store, keys.binding_prefix("Application"), V.BindingView)
        self.app_status: Informer[V.AppStatusView] = Informer(
            store, keys.status_prefix("Application"), V.AppStatusView)
        self.metric_defs: Informer[V.MetricDef] = Informer(
            store, keys.resource_prefix("Metric"), V.MetricDef)
        self.global_metric_defs: Informer[V.MetricDef] = Informer(
            store, keys.resource_prefix("GlobalMetric"), V.MetricDef)
        self.values: Informer[V.MetricValueView] = Informer(
            store, keys.METRIC_VALUES, V.MetricValueView)
        # the namespaces' policies and the cluster sets: which clusters a team's
        # credential sees (berth.console.scope)
        self.tenancy = Tenancy(
            Informer(store, keys.resource_prefix("NamespacePolicy"), NamespacePolicy),
            Informer(store, keys.resource_prefix("ClusterSet"), ClusterSet))
        self._informers: list[Informer[Any]] = [
            self.clusters, self.cluster_status, self.apps, self.bindings, self.app_status,
            self.metric_defs, self.global_metric_defs, self.values, *self.tenancy.informers]
        self._lock = threading.Lock()  # guards everything below
        self._version = 0
        self._history: dict[str, deque[tuple[float, float]]] = {}
        self._full_said = False
        self._moves: deque[Move] = deque(maxlen=moves)
        self._lost: float | None = None
        for informer in self._informers:
            informer.add_handler(self._changed)
        self.values.add_handler(self._value)
        self.bindings.add_handler(self._binding)
        self._probe = Loop("console-etcd-probe", self._check, deadline=60.0)

    # -- the informers' side ---------------------------------------------------------

    def _changed(self, _event: Event[Any]) -> None:
        with self._lock:
            self._version += 1

    def _value(self, event: Event[V.MetricValueView]) -> None:
        if event.type is EventType.DELETED or event.key == keys.METRIC_PICTURE:
            return
        st = event.obj.status
        if st.value is None:
            return
        at = st.observed.timestamp() if st.observed is not None else time.time()
        with self._lock:
            points = self._history.get(event.key)
            if points is None:
                if len(self._history) >= self.series:
                    if not self._full_said:
                        log.warning("console: keeping the history of %d metrics, no more "
                                    "(%s and later ones are shown without one)", self.series,
                                    event.key)
                        self._full_said = True
                    return
                points = self._history[event.key] = deque(maxlen=self.points)
            if not points or points[-1][0] < at:
                points.append((at, st.value))

    def _binding(self, event: Event[V.BindingView]) -> None:
        old = tuple(t.name for t in event.old.spec.targets) if event.old is not None else ()
        new = (tuple(t.name for t in event.obj.spec.targets)
               if event.type is not EventType.DELETED else ())
        if event.old is None or not old or not new or set(old) == set(new):
            return  # a first placement, an application gone or nowhere: not a move
        spec = event.obj.spec
        at = spec.scheduled.timestamp() if spec.scheduled is not None else time.time()
        with self._lock:
            self._moves.append(Move(at, _tail(event.key), old, new, spec.decision))

    def _check(self) -> None:
        """One probe of etcd: is it answering?"""
        try:
            self.store.get(keys.METRIC_PICTURE)
        except StoreError as exc:
            with self._lock:
                if self._lost is None:
                    log.warning("console: etcd does not answer (%s); the pages show the last "
                                "view with its age", exc)
                    self._lost = time.time()
                    self._version += 1
        else:
            with self._lock:
                if self._lost is not None:
                    log.info("console: etcd answers again")
                    self._lost = None
                    self._version += 1
        time.sleep(self.probe_every)

    # -- running ---------------------------------------------------------------------

    def start(self) -> None:
        for informer in self._informers:
            informer.start()
        self._probe.start()

    def stop(self) -> None:
        self._probe.stop()
        for informer in self._informers:
            informer.stop()

    def wait_synced(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        return all(i.wait_synced(max(0.0, end - time.monotonic())) for i in self._informers)

    def alive(self) -> bool:
        return self._probe.alive() and all(i.alive() for i in self._informers)

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    @property
    def etcd_lost(self) -> float | None:
        with self._lock:
            return self._lost

    # -- reading ---------------------------------------------------------------------

    def admits(self, namespace: str, cluster: V.Meta) -> bool:
        """Whether ``namespace``'s applications may use ``cluster`` (its own namespace's,
        or one of a set its policy binds), as the scheduler judges it."""
        return self.tenancy.admits(namespace, f"{cluster.namespace}/{cluster.name}", cluster)

    def snapshot(self, *, history: Callable[[str], bool] | None = None) -> Snapshot:
        """The fleet now; with ``history``, the metric histories whose key it accepts."""
        with self._lock:
            version, lost = self._version, self._lost
            kept = {k: list(v) for k, v in self._history.items()
                    if history is not None and history(k)}
            moves = list(self._moves) if history is not None else []
        defs = {i.key: i.obj for i in self.metric_defs.items()}
        defs.update({i.key: i.obj for i in self.global_metric_defs.items()})
        return Snapshot(
            version=version, taken=time.time(), etcd_lost=lost,
            synced=all(i.synced.is_set() for i in self._informers),
            clusters=self.clusters.items(),
            cluster_status={_tail(i.key): i.obj for i in self.cluster_status.items()},
            apps=self.apps.items(),
            bindings={_tail(i.key): i.obj for i in self.bindings.items()},
            app_status={_tail(i.key): i.obj for i in self.app_status.items()},
            metrics=defs,
            values={i.key: i.obj for i in self.values.items() if i.key != keys.METRIC_PICTURE},
            history=kept, moves=moves)
