"""The scheduler's cache: informers over everything it reads, as a Snapshot.

It never calls a metrics provider or a cluster: metric values come from the
metrics-cache's keys, cluster health from the propagator's status keys.
``epoch`` changes whenever a candidate, its status, a metric definition or the
published metric values change. :meth:`Cache.fleet` freezes the candidates of a kind and
namespace into a :class:`Fleet` once per change; when only metric values
changed, the new Fleet keeps the old one's structural indexes (:mod:`fleets`).

Metric values are read as of the metrics-cache's last complete picture
(``MetricPicture``): values written since are held back until the marker that
completes them, so no decision sees a picture half written — a restarted
metrics-cache filling its values in, a lease expiring, or one poll's values
spread over several transactions.

The scheduler's own Bindings, seen or assumed (written, not yet seen), are
:class:`Decisions`; the room each cluster has, its report less what berth
placed there, is the :class:`RoomBook`'s. The fleet's pace and the copies in
transition, counted from the Bindings and the propagator's statuses as they
change, are kept here too (docs/pace.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from berth.controllers.runtime import Event, EventType, Informer, Item
from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.controllers.runtime.transit import Transit, transit_id
from berth.controllers.scheduler.decisions import Decisions
from berth.controllers.scheduler.demands import Demands, where
from berth.controllers.scheduler.fleets import Fleets
from berth.controllers.scheduler.framework import (
    Candidate,
    Fleet,
    MetricReading,
    Placed,
    Quota,
    Ref,
    Room,
    Subject,
)
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.priorities import Priorities
from berth.controllers.scheduler.quotas import quota_of
from berth.controllers.scheduler.readings import reading
from berth.controllers.scheduler.roombook import RoomBook
from berth.controllers.scheduler.subjects import (
    NO_FAILURES,
    Failures,
    ValueView,
    compact_binding,
    compact_cluster,
    compact_failures,
    compact_value,
    subject_from_application,
    subject_from_cluster,
    subject_from_magnum,
)
from berth.controllers.scheduler.views import (
    AppView,
    BindingView,
    CloudView,
    ClusterView,
    FailuresView,
    MagnumView,
    MetricDefView,
)
from berth.controllers.tenancy import Tenancy
from berth.store import Store, keys
from berth.store.dependencies import Dependencies
from berth.store.documents import (
    ClusterState,
    ClusterStatus,
    MetricPicture,
    MetricRef,
    MetricValue,
    Reachability,
    Target,
)
from berth.store.documents.overrides import GlobalOverride, Override
from berth.store.documents.pace import FLEET, Pace, PaceSpec
from berth.store.documents.priority import PriorityClass
from berth.store.documents.render import Where
from berth.store.documents.resources import Demand
from berth.store.documents.tenancy import ClusterSet, NamespacePolicy

log = logging.getLogger(__name__)


class Cache:
    def __init__(self, store: Store, *, idle_timeout: float = 30.0,
                 assume_ttl: float = 300.0, picture_grace: float = 60.0,
                 clock: Clock = SYSTEM) -> None:
        self.clock = clock
        self.dependencies = Dependencies()  # who depends on whom (the subjects' handler's)
        def informer(prefix: keys.Prefix, type_: type) -> Informer:  # type: ignore[type-arg]
            return Informer(store, prefix, type_, idle_timeout=idle_timeout)

        r = keys.resource_prefix
        # Applications are kept as Subjects only: built once per stored revision.
        self.applications: Informer[Subject] = Informer(
            store, r("Application"), AppView, convert=subject_from_application,
            idle_timeout=idle_timeout)
        self.clusters: Informer[ClusterView] = Informer(
            store, r("Cluster"), ClusterView, convert=compact_cluster,
            idle_timeout=idle_timeout)
        self.globalclouds: Informer[CloudView] = informer(r("GlobalCloud"), CloudView)
        self.clouds: Informer[CloudView] = informer(r("Cloud"), CloudView)
        self.projects: Informer[CloudView] = informer(r("Project"), CloudView)
        self.magnumclusters: Informer[MagnumView] = informer(r("MagnumCluster"), MagnumView)
        self.status: Informer[ClusterStatus] = informer(keys.status_prefix("Cluster"),
                                                        ClusterStatus)
        self.globalmetrics: Informer[MetricDefView] = informer(r("GlobalMetric"), MetricDefView)
        self.metrics: Informer[MetricDefView] = informer(r("Metric"), MetricDefView)
        self.values: Informer[ValueView | MetricPicture] = Informer(
            store, keys.METRIC_VALUES, MetricValue | MetricPicture,
            convert=compact_value, idle_timeout=idle_timeout)
        self._published: dict[keys.Key, ValueView] = {}  # the values of the last whole picture
        self._picture: tuple[int, int] | None = None  # its (revision, generation)
        # Since when (monotonic) no whole picture has been in etcd while one is published;
        # past picture_grace the published values are no longer used.
        self._unwhole_since: float | None = None
        self.picture_grace = picture_grace
        self._expired = ""  # why the published values were dropped, while they are
        self._metric_listeners: list[Callable[[Event[Any]], None]] = []
        self.bindings: Informer[BindingView] = Informer(
            store, keys.BINDINGS, BindingView, convert=compact_binding, idle_timeout=idle_timeout,
            known=lambda key, revision, read: self.decisions.echo(key, revision, read))
        # Of the propagator's application statuses, the clusters each could not become
        # available on (the FailedTargets filter).
        self.failures: Informer[Failures] = Informer(
            store, keys.status_prefix("Application"), FailuresView, convert=compact_failures,
            idle_timeout=idle_timeout)
        # The pace (docs/pace.md): its document, and the copies in transition,
        # counted from the Bindings and the statuses as they change.
        self.paces: Informer[Pace] = informer(r("Pace"), Pace)
        self.priorityclasses: Informer[PriorityClass] = informer(r("PriorityClass"),
                                                                 PriorityClass)
        # Where each namespace may place, what priority it may take (docs/teams.md).
        self.tenancy = Tenancy(informer(r("NamespacePolicy"), NamespacePolicy),
                               informer(r("ClusterSet"), ClusterSet))
        self.priorities = Priorities(self.priorityclasses, self.tenancy)
        # What each application asks of each cluster, as the overrides make it.
        self.overrides: Informer[Override] = informer(r("Override"), Override)
        self.globaloverrides: Informer[GlobalOverride] = informer(r("GlobalOverride"),
                                                                  GlobalOverride)
        self.demands = Demands(self.overrides, self.globaloverrides,
                               on_change=lambda: self.decisions.recount())
        self.transit = Transit()
        self.bindings.add_handler(self._binding_transit)
        self.failures.add_handler(self._status_transit)
        self.informers: list[Informer] = [  # type: ignore[type-arg]
            self.applications, self.clusters, self.globalclouds, self.clouds, self.status,
            self.globalmetrics, self.metrics, self.values, self.bindings, self.projects,
            self.magnumclusters, self.failures, self.paces, self.priorityclasses,
            self.overrides, self.globaloverrides, *self.tenancy.informers,
        ]
        self._cand_epoch = 0  # candidates and their status
        self._metric_epoch = 0  # metric definitions and values
        # metric readings of the current metric epoch (the deciding thread's: replaced whole)
        self._readings: tuple[int, dict[tuple[str, str | None, bool, float], MetricReading]] = (
            -1, {})
        self._lock = threading.Lock()
        self.fleets = Fleets(self._build_candidates, self._epochs)
        self._by_key: dict[str, Candidate] = {}
        # each Cluster's candidate (with the view it was made of), of one candidate epoch
        self._made: tuple[int, dict[str, tuple[ClusterView, Candidate]]] = (-1, {})
        self._by_key_epoch = -1
        self._subjects: dict[str, tuple[int, Subject]] = {}
        self.decisions = Decisions(self.bindings, self.applications,
                                   lambda key: self.room_book.changed(key), clock=clock.time,
                                   demand_on=self._demand_at)
        self.room_book = RoomBook(self.status, self.decisions, assume_ttl, clock=clock.time)
        candidates: tuple[Informer[Any], ...] = (
            self.clusters, self.globalclouds, self.clouds, self.projects)
        for inf in candidates:
            inf.add_handler(self._bump_candidates)
        self.tenancy.listeners.append(lambda _key, _ns: self._bump_candidates(None))
        self.clusters.add_handler(self._relabelled)
        self.status.add_handler(self._bump_unless_capacity)
        self._returned: dict[str, float] = {}  # status key → when it came back ONLINE
        self.status.add_handler(self._on_cluster_status)
        for inf in (self.globalmetrics, self.metrics):
            inf.add_handler(self._bump_metrics)
        self.values.add_handler(self._on_value)

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        for inf in self.informers:
            inf.start()

    def wait_synced(self, timeout: float) -> bool:
        synced = all(inf.wait_synced(timeout) for inf in self.informers)
        if synced:
            self._publish_if_whole()
            if self.demands.any():  # placements indexed before the overrides were listed
                self.decisions.recount()
        return synced

    def stop(self) -> None:
        """Stop every informer and wait for their threads: no event comes after this."""
        for inf in self.informers:
            inf.stop(wait=False)
        for inf in self.informers:
            inf.join()

    def overlay(self, key: keys.Key, value: bytes) -> bool:
        """What-if: see ``value`` at ``key`` as if stored (the cache stopped first); False
        for a key the scheduler does not read (a metrics provider, say)."""
        informer = next((inf for inf in self.informers if key.startswith(inf.prefix)), None)
        if informer is None:
            return False
        informer.overlay(key, value)
        return True

    def on_candidates_changed(self, callback: Callable[[Event[Any]], None]) -> None:
        for inf in (self.clusters, self.globalclouds, self.clouds, self.status, self.projects,
                    self.globalmetrics, self.metrics, self.overrides, self.globaloverrides):
            inf.add_handler(callback)
        self.tenancy.listeners.append(  # garbage at a policy's key, too: no event says so
            lambda key, _ns: callback(Event(EventType.MODIFIED, key, None, None, 0)))
        self._metric_listeners.append(callback)

    def _bump_candidates(self, event: Event[Any] | None) -> None:
        with self._lock:
            self._cand_epoch += 1

    def _bump_unless_capacity(self, event: Event[ClusterStatus]) -> None:
        """A cluster's status changed: new candidates, unless only its capacity did (that
        is read when asked, by ``capacity``, and costs no rebuilt fleet)."""
        meta = event.obj.metadata
        self.room_book.changed(candidate_key("Cluster", meta.namespace, meta.name))
        old = event.old.status if event.old is not None else None
        if (event.type is EventType.MODIFIED and old is not None
                and _without_capacity(old) == _without_capacity(event.obj.status)):
            return
        self._bump_candidates(event)

    def _on_cluster_status(self, event: Event[ClusterStatus]) -> None:
        """When a cluster came back ONLINE: as its status says (the observer records it,
        so a scheduler that starts leading later knows too), or as this process saw it."""
        was = event.old.status.state if event.old is not None else None
        status = event.obj.status if event.type is not EventType.DELETED else None
        if status is None or status.state != Reachability.ONLINE:
            with self._lock:
                self._returned.pop(event.key, None)
            return
        at: float | None = None
        if status.returned is not None:  # wall clock to this process's monotonic clock
            ago = (self.clock.now() - status.returned).total_seconds()
            at = self.clock.monotonic() - max(0.0, ago)
        elif status.joined is None and was not in (None, Reachability.ONLINE):
            at = self.clock.monotonic()  # an observer that records neither: as seen here
        if at is not None:
            with self._lock:
                self._returned[event.key] = at

    def returned(self, kind: str, namespace: str | None, name: str) -> float | None:
        """When (``time.monotonic``) the target came back ONLINE after it was not; None if
        it never did, as far as its status and this process know."""
        if namespace is None:
            return None
        with self._lock:
            return self._returned.get(keys.status_key(kind, namespace, name))

    def _bump_metrics(self, event: Event[Any]) -> None:
        with self._lock:
            self._metric_epoch += 1

    def _on_value(self, event: Event[ValueView | MetricPicture]) -> None:
        """Values wait for their picture; a complete picture publishes them all."""
        if event.key == keys.METRIC_PICTURE and self._publish_if_whole():
            for listener in self._metric_listeners:
                listener(event)

    def _publish_if_whole(self) -> bool:
        """Take the values as of a complete picture not yet taken; True if taken."""
        item = self.values.item(keys.METRIC_PICTURE)
        if item is None or not isinstance(item.obj, MetricPicture) or not item.obj.complete:
            with self._lock:  # none, or incomplete: the last whole one stands in, a while
                if self._unwhole_since is None:
                    self._unwhole_since = self.clock.monotonic()
            return False
        seen = (item.mod_revision, item.obj.generation)
        with self._lock:
            self._unwhole_since = None
            if seen == self._picture and not self._expired:
                return False
        published = {k: it.obj for k, it in ((it.key, it) for it in self.values.items())
                     if isinstance(it.obj, ValueView)}
        with self._lock:
            self._published, self._picture, self._expired = published, seen, ""
            self._metric_epoch += 1
        return True

    def expire_picture(self) -> bool:
        """Drop the last whole picture once no whole one has been in etcd for
        ``picture_grace`` seconds (the metrics-cache dead or never complete again):
        its values count as missing, as after a provider error, rather than being used
        for ever. True when it dropped them (the caller decides everything again)."""
        with self._lock:
            since = self._unwhole_since
            if (since is None or self._expired or not self._published
                    or self.clock.monotonic() - since < self.picture_grace):
                return False
            self._published = {}
            self._expired = (f"no whole picture of the metric values for "
                             f"{self.picture_grace:g} s (metrics-cache down?): the last one "
                             "is no longer used")
            self._metric_epoch += 1
        log.warning("metric values: %s", self._expired)
        return True

    def gathering_first_picture(self) -> bool:
        """No whole picture taken yet, and the metrics-cache's marker says one is coming."""
        item = self.values.item(keys.METRIC_PICTURE) if self._picture is None else None
        return item is not None and isinstance(item.obj, MetricPicture) and not item.obj.complete

    @property
    def picture(self) -> tuple[int, int] | None:
        """The (revision, generation) of the metric picture decided on; None before one."""
        return self._picture

    # -- subjects --------------------------------------------------------------

    def subject(self, key: str) -> Subject | None:
        """The subject stored at ``key`` (an application or a cluster), or None.

        Built once per stored revision: attempts and sweeps read it many times.
        """
        if key.startswith(self.applications.prefix):
            return self.applications.get(key)
        magnum = key.startswith(self.magnumclusters.prefix)
        item: Item[Any] | None = (self.magnumclusters if magnum else self.clusters).item(key)
        if item is None:
            self._subjects.pop(key, None)
            return None
        hit = self._subjects.get(key)
        if hit is not None and hit[0] == item.mod_revision:
            return hit[1]
        subject = (subject_from_magnum(item.key, item.obj) if magnum
                   else subject_from_cluster(item.key, item.obj))
        self._subjects[key] = (item.mod_revision, subject)
        return subject

    def binding(self, subject: Subject) -> tuple[BindingView | None, int]:
        """The subject's Binding as last written (assumed) or seen, and its revision."""
        return self.decisions.get(subject.binding_key)

    # -- Snapshot ------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self._cand_epoch + self._metric_epoch

    def candidates(self, subject: Subject) -> list[Candidate]:
        return list(self.fleet(subject).candidates)

    def fleet(self, subject: Subject) -> Fleet:
        """The subject's candidates, frozen, as of now (rebuilt only after a change)."""
        return self.fleets.of(subject.candidate_kind, subject.ref.namespace)

    def fleets_changed(self) -> bool:
        return self.fleets.changed()

    def take_fleet_before(self, subject: Subject) -> Fleet | None:
        return self.fleets.take_before(subject.candidate_kind, subject.ref.namespace)

    def _epochs(self) -> tuple[int, int]:
        with self._lock:
            return self._cand_epoch, self._metric_epoch

    def _build_candidates(self, kind: str, ns: str | None) -> list[Candidate]:
        if kind == "Cluster":  # its namespace's, and those of the sets bound to it
            admits = self.tenancy.admitter(ns)
            found = [self._cluster_of(item) for item in self.clusters.items()
                     if admits(item.obj.metadata)]
        elif kind == "Project":
            found = [self._cloud("Project", item.obj) for item in self.projects.items()
                     if item.obj.metadata.namespace == ns]
        else:
            found = [self._cloud("GlobalCloud", item.obj) for item in self.globalclouds.items()]
            found += [self._cloud("Cloud", item.obj) for item in self.clouds.items()
                      if item.obj.metadata.namespace == ns]
        found.sort(key=lambda c: c.key)
        return found

    def namespaces(self, kind: str) -> list[str]:
        by_kind: dict[str, Informer[Any]] = {"Cluster": self.clusters, "Project": self.projects}
        informer = by_kind.get(kind, self.clouds)
        return sorted({item.obj.metadata.namespace for item in informer.items()} - {None, ""})

    def bound_sets(self, namespace: str | None) -> list[str]:
        policy = self.tenancy.policy(namespace)
        return list(policy.spec.cluster_sets) if policy is not None else []

    def quota(self, subject: Subject) -> Quota | None:
        return quota_of(subject, self.tenancy, self.decisions, self.clusters)

    def candidate_by_key(self, key: str) -> Candidate | None:
        if self._by_key_epoch != self.epoch:
            self._by_key = {}
            self._by_key_epoch = self.epoch
        found = self._by_key.get(key)
        if found is None:
            kind, _, rest = key.partition("/")
            ns, _, name = rest.rpartition("/")
            if kind == "Cluster":
                view = self.clusters.get(keys.resource_key("Cluster", name, ns))
                found = self._cluster(view) if view else None
            elif kind == "Project":
                project = self.projects.get(keys.resource_key("Project", name, ns))
                found = self._cloud("Project", project) if project else None
            else:
                cloud = self.clouds.get(keys.resource_key(kind, name, ns or None)) if (
                    kind == "Cloud") else self.globalclouds.get(keys.resource_key(kind, name))
                found = self._cloud(kind, cloud) if cloud else None
            if found is not None:
                self._by_key[key] = found
        return found

    def _cluster_of(self, item: Item[ClusterView]) -> Candidate:
        """:meth:`_cluster`, made once per candidate epoch (the teams' namespaces that
        share clusters list them each); under the cache's lock, made outside it."""
        with self._lock:
            if self._made[0] != self._cand_epoch:  # a change of status bumps the epoch
                self._made = (self._cand_epoch, {})
            made = self._made[1]
            found = made.get(item.key)
        if found is None or found[0] is not item.obj:
            found = (item.obj, self._cluster(item.obj))
            with self._lock:
                made[item.key] = found
        return found[1]

    def _cluster(self, view: ClusterView) -> Candidate:
        m = view.metadata
        status = self.status.get(keys.status_key("Cluster", m.namespace or "", m.name))
        state = status.status if status else None
        return Candidate(
            ref=Ref("Cluster", m.namespace, m.name),
            labels=m.labels,
            metrics=tuple(view.spec.metrics),
            custom_resources=frozenset(view.spec.custom_resources) | frozenset(
                state.custom_resources if state else ()),
            taints=tuple(view.spec.taints),
            state=state.state if state else None,
            deleted=m.deleted is not None,
        )

    def _cloud(self, kind: str, view: CloudView) -> Candidate:
        m = view.metadata
        return Candidate(ref=Ref(kind, m.namespace, m.name), labels=m.labels,
                         metrics=tuple(view.spec.metrics), state=Reachability.ONLINE,
                         deleted=m.deleted is not None)

    def metric(self, candidate: Candidate, ref: MetricRef) -> MetricReading:
        """How ``candidate`` reads metric ``ref``: the same for every candidate that names
        the metric with that weight (in its namespace), so read once per change of the
        metrics (a metric shared by a thousand clusters is read once, not a thousand
        times, when a new picture comes)."""
        ns = candidate.ref.namespace if ref.namespaced else None
        key = (ref.name, ns, ref.namespaced, ref.weight)
        epoch, readings = self._readings
        if epoch != self._metric_epoch:  # read before the values: a change meanwhile
            epoch, readings = self._metric_epoch, {}  # is read again at the next epoch
            self._readings = (epoch, readings)
        found = readings.get(key)
        if found is None:
            found = readings[key] = self._reading(ns, ref)
        return found

    def _reading(self, ns: str | None, ref: MetricRef) -> MetricReading:
        definition = (self.metrics.get(keys.resource_key("Metric", ref.name, ns)) if ns
                      else self.globalmetrics.get(keys.resource_key("GlobalMetric", ref.name)))
        value = self._published.get(keys.metric_value_key(ref.name, ns))
        return reading(ref, ns, definition, value, self._expired)

    def demand_on(self, subject: Subject, candidate: Candidate) -> Demand:
        return self.demands.on(subject, candidate.key, where(candidate))

    def demand_varies(self, subject: Subject) -> bool:
        return self.demands.varies(subject)

    def _demand_at(self, subject: Subject, candidate: str) -> Demand:
        """``demand_on`` for the placements' index, from any thread: the cluster as its
        informer has it (no candidate built)."""
        if not self.demands.varies(subject):  # the common case: no cluster lookup
            return subject.demand
        kind, _, rest = candidate.partition("/")
        ns, _, name = rest.rpartition("/")
        view = self.clusters.get(keys.resource_key("Cluster", name, ns)) if (
            kind == "Cluster") else None
        if view is None:
            return subject.demand
        return self.demands.on(subject, candidate, Where(name, ns, view.metadata.labels))

    def _relabelled(self, event: Event[ClusterView]) -> None:
        """A cluster's labels changed: what overrides make applications ask there may
        have (counted again only while an override could make any difference)."""
        if (event.type is EventType.MODIFIED and event.old is not None
                and event.old.metadata.labels != event.obj.metadata.labels
                and self.demands.any()):
            self.decisions.recount()

    def capacity(self, candidate: Candidate) -> Room | None:
        """The cluster's capacity as it last reported it, less what berth placed there
        that the report does not count yet (for ``assume_ttl`` seconds at most)."""
        return self.room_book.capacity(candidate)

    def rooms(self, fleet: Fleet) -> Rooms:
        """``capacity`` of every candidate of ``fleet``, indexed and brought up to date
        (see :meth:`RoomBook.rooms`). For the one thread that decides."""
        return self.room_book.rooms(fleet)

    def current_targets(self, subject: Subject) -> list[Target]:
        binding, _ = self.binding(subject)
        return list(binding.spec.targets) if binding else []

    def pace(self) -> PaceSpec | None:
        """The fleet's pace (None: none is set)."""
        doc = self.paces.get(keys.resource_key("Pace", FLEET))
        return doc.spec if doc is not None else None

    def _binding_transit(self, event: Event[BindingView]) -> None:
        gone = event.type is EventType.DELETED
        self.transit.targets(transit_id(event.key), None if gone else [
            f"{t.namespace or ''}/{t.name}" for t in event.obj.spec.targets])

    def _status_transit(self, event: Event[Failures]) -> None:
        gone = event.type is EventType.DELETED
        self.transit.status(transit_id(event.key), None if gone else event.obj.steady)

    def reported_pods(self, cluster: str, app: str) -> int:
        """How many pods of application ``app`` (namespace/name) cluster ``cluster``
        (namespace/name) last reported running."""
        ns, _, name = cluster.rpartition("/")
        item = self.status.item(keys.status_key("Cluster", ns, name))
        cap = item.obj.status.capacity if item is not None else None
        return cap.placed.get(app, 0) if cap is not None else 0

    def failures_of(self, subject: Subject) -> Failures:
        return (self.failures.get(subject.status_key) or NO_FAILURES
                if subject.ref.kind == "Application" else NO_FAILURES)

    def keeps(self, subject: Subject, decided_for: int | None) -> bool:
        """Whether the subject keeps the current targets that still fit (``decided_for``:
        the generation its Binding was decided for, None: no Binding):
        ``placement.ignoredDuringExecution`` until the spec changes, and a Job of this
        generation still running — moved only by force, as a move stops the work and
        starts it again."""
        return (subject.placement.ignored_during_execution
                and decided_for == subject.generation) or (
            self.failures_of(subject).working == subject.generation > 0)

    def failed(self, subject: Subject) -> Mapping[str, float]:
        return {key: at for key, (at, gen) in self.failures_of(subject).failed.items()
                if gen == subject.generation}

    def placed(self, namespace: str | None,
               labels: Mapping[str, str] | None = None) -> list[Placed]:
        """Applications of ``namespace`` with targets, as decided (assumed or seen)."""
        return self.decisions.placed(namespace, labels)

    def placed_on_since(self, namespace: str | None, label: str, value: str, since: int
                        ) -> tuple[int, list[tuple[Ref, int]], bool]:
        return self.decisions.placed_on_since(namespace, label, value, since)

    def placements_version(self, namespace: str | None, labels: Mapping[str, str]) -> int:
        return self.decisions.version(namespace, labels)

    def placed_as(self, key: str) -> list[Target] | None:
        binding, _ = self.decisions.get(keys.under(keys.BINDINGS, keys.Key(key)))
        return list(binding.spec.targets) if binding is not None else None

    def depends_on(self, key: str) -> tuple[str, ...]:
        return s.depends_on if (s := self.applications.get(key)) is not None else ()

    def dependents_of(self, key: str) -> list[str]:
        return sorted(self.dependencies.of(key))

    def may_depend(self, namespace: str | None, on: str | None) -> bool:
        return self.tenancy.may_depend(namespace, on)

    def follows(self, key: str) -> bool:
        subject = self.applications.get(key)
        return subject is not None and subject.placement.follow_dependents


def _without_capacity(s: ClusterState) -> tuple[Reachability | None, tuple[str, ...]]:
    return (s.state, tuple(s.custom_resources))


__all__ = ["Cache", "candidate_key"]
