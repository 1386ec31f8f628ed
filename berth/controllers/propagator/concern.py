"""Who is concerned: the propagator's event index.

Every event the propagator watches — an application, its Binding, its status, an
override, a rollout control, its Secrets, a Cluster and the observer's word on it,
what a cluster's watch shows of berth's objects, what a pull cluster's agent
reports — comes to :class:`Concern`, which finds the applications it concerns
and queues them: urgent when a copy's state turned (available now, failed, a Job
complete), which is recorded ahead of the applies that wait.

:class:`Applies` is the memory a reconcile's facts call *stale* from: the drift
seen per application and cluster since it was last applied, and the resync epoch
each copy was last applied in. Each class owns its state under its own lock.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Histogram

from berth.controllers.propagator.drift import OwnWrites
from berth.controllers.propagator.facts import Since
from berth.controllers.propagator.health import UNKNOWN, Copy
from berth.controllers.propagator.kube import OWNER, Connections, KubeObject
from berth.controllers.propagator.objects import Book, Pods, judge_copy
from berth.controllers.propagator.plan import Progress
from berth.controllers.propagator.status import StatusWriter
from berth.controllers.propagator.views import AppView, ClusterView, cluster_id, dependencies
from berth.controllers.runtime import Event, EventType, Informer, WorkQueue
from berth.controllers.runtime.clock import Clock
from berth.controllers.runtime.observe import LATENCY_BUCKETS, Stopwatch
from berth.controllers.runtime.transit import Transit, transit_id
from berth.store import keys
from berth.store.dependencies import Dependencies
from berth.store.documents import (
    ApplicationState,
    ApplicationStatus,
    AppState,
    Binding,
    ClusterApplied,
    ClusterStatus,
    HealthRule,
    KubeObjectRef,
)
from berth.store.documents.overrides import Override
from berth.store.documents.pace import steady
from berth.store.documents.render import selects_application
from berth.store.documents.work import Report

log = logging.getLogger(__name__)

DRIFTS = Counter("berth_propagator_drift_total", "Objects changed on a cluster by others")
TO_AVAILABLE = Histogram(
    "berth_propagator_binding_to_available_seconds",
    "From the propagator seeing a Binding (generation and targets) to seeing the application "
    "RUNNING there: available on every target", buckets=LATENCY_BUCKETS)
GAINED_SPREAD = 30.0  # seconds over which a gained cluster's settled applications re-apply

# (cluster id, owner, what is recorded there, health rules, now): a push copy judged
Judge = Callable[[str, str, ClusterApplied, tuple[HealthRule, ...], datetime], Copy]


class Applies:
    """Per application, the drift seen since its copies were applied, and the resync
    epoch each was last applied in. One lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._epoch = 0  # bumped by every resync: everything is applied again once
        self._seen = 0  # drift's sequence
        self._drifted: dict[str, dict[str, int]] = {}  # app key → cluster → drift seen
        self._applied: dict[str, dict[str, int]] = {}  # app key → cluster → epoch

    def resync(self) -> None:
        with self._lock:
            self._epoch += 1

    def drifted(self, key: str, cid: str) -> None:
        with self._lock:
            self._seen += 1
            self._drifted.setdefault(key, {})[cid] = self._seen

    def since(self, key: str) -> Since:
        with self._lock:
            return Since(self._epoch, dict(self._drifted.get(key, {})),
                         dict(self._applied.get(key, {})))

    def done(self, key: str, since: Since, progress: Progress) -> None:
        """What a reconcile that started at ``since`` did: drift seen after it began is
        still to do; a copy applied without error (and nothing refused) is fresh."""
        with self._lock:
            mine = self._drifted.get(key, {})
            applied = self._applied.setdefault(key, {})
            for cid in progress.tried:
                if cid in since.drifted and mine.get(cid) == since.drifted[cid]:
                    del mine[cid]
                if (cid in progress.applied and cid not in progress.errors
                        and progress.refused is None):
                    applied[cid] = since.epoch
            if not mine:
                self._drifted.pop(key, None)
            if not applied:
                del self._applied[key]

    def forget(self, key: str) -> None:
        """The application is gone from every cluster."""
        with self._lock:
            self._applied.pop(key, None)


class Concern:
    """The events → the applications they concern, queued on ``queue``."""

    def __init__(self, queue: WorkQueue[keys.Key], applies: Applies, *, apps: Informer[AppView],
                 bindings: Informer[Binding], statuses: Informer[ApplicationStatus],
                 writer: StatusWriter, transit: Transit, connections: Connections,
                 pods: Pods, untracked_after: float,
                 clock: Clock, sharded: bool) -> None:
        self.queue = queue
        self.applies = applies
        self.apps = apps
        self.bindings = bindings
        self.statuses = statuses
        self.writer = writer
        self.transit = transit
        self.connections = connections
        self.pods = pods
        self.untracked_after = untracked_after
        self.clock = clock
        self.sharded = sharded  # other replicas serve some clusters
        self.own_writes = OwnWrites()
        self.book = Book(self._on_seen)  # what the clusters showed of berth's objects
        self._to_available = Stopwatch(TO_AVAILABLE)
        self._lock = threading.Lock()
        self._claimable: set[str] = set()  # clusters a replica can serve (with a kubeconfig)
        self.dependencies = Dependencies()  # who depends on whom, as the applications say

    def claimable(self) -> list[str]:
        """The clusters some replica can serve: with a kubeconfig or an agent (Pull), not
        deleted."""
        with self._lock:
            return list(self._claimable)

    # -- what etcd says ----------------------------------------------------------

    def on_app(self, event: Event[AppView]) -> None:
        """An application changed: it is reconciled, and so are the dependencies it had
        or has (a removal held for it may go) and its dependents (one waiting for it to
        exist, or to be deleted)."""
        self.queue.add(event.key)
        gone = event.type is EventType.DELETED
        if gone and keys.under(keys.STATUS, event.key) in self.statuses:
            # its key vanished while copies are recorded: what it depends on stays
            # known until they are removed (its status goes), for the removals it holds
            concerned = self.dependencies.of(event.key)
        else:
            concerned = self.dependencies.put(event.key, () if gone else dependencies(
                event.obj)) | self.dependencies.of(event.key)
        for key in sorted(concerned):
            self.queue.add(key)

    def on_override(self, event: Event[Any]) -> None:
        """An override changed: reconcile what it selects (or selected); a cluster whose
        copy it does not change is not applied again (its fingerprint is the same)."""
        changed: list[Override] = [o for o in (event.obj, event.old) if o is not None]
        for item in self.apps.items():
            meta = item.obj.metadata
            if any(selects_application(o, meta.namespace or "", meta.name, meta.labels)
                   for o in changed):
                self.queue.add(item.key)

    def on_tenancy(self, key: keys.Key, namespace: str | None) -> None:
        """A namespace's policy (``namespace``) or a cluster set (None: it may be bound to
        any) changed: reconcile the applications it may concern — where they may run."""
        for item in self.apps.items():
            if namespace is None or item.obj.metadata.namespace == namespace:
                self.queue.add(item.key)

    def on_named(self, event: Event[Any]) -> None:
        """An application's rollout control (paused, resumed, approved) or its Secrets'
        data (with a new generation) changed: reconcile it."""
        meta = event.obj.metadata
        if meta.namespace:
            self.queue.add(keys.resource_key("Application", meta.name, meta.namespace))

    def on_binding(self, event: Event[Binding]) -> None:
        key = keys.resource_key_of(event.key)
        ns = keys.parse_key(key).namespace or ""
        self.transit.targets(transit_id(event.key), None if event.type is EventType.DELETED
                             else [cluster_id(t.namespace or ns, t.name)
                                   for t in event.obj.spec.targets if t.kind == "Cluster"])
        if event.type is EventType.DELETED or not event.obj.spec.targets:
            self._to_available.cancel(key)
        elif self.bindings.synced.is_set():  # changes while running only
            spec = event.obj.spec
            self._to_available.start(key, (spec.generation, frozenset(
                cluster_id(t.namespace, t.name) for t in spec.targets)))
        self.queue.add(key)

    def on_status(self, event: Event[ApplicationStatus]) -> None:
        key = keys.resource_key_of(event.key)
        if event.type is EventType.DELETED:
            self.transit.status(transit_id(event.key), None)
        else:
            st, r = event.obj.status, event.obj.status.rollout
            self.transit.status(transit_id(event.key), steady(
                st.applied, r.generation if r else 0, r.phase if r else None))
        if event.type is EventType.ADDED:  # at start: also applications whose key vanished
            self.queue.add(key)
        elif (self.sharded and event.type is EventType.MODIFIED
              and not self.writer.ours(event.key, event.obj)):
            self.queue.add(key)  # another replica's progress: a move or a lower may go on
        # where it runs, and how, changed: its dependents may go on there, and its
        # dependencies may leave where it no longer runs (most have neither: no compare)
        others = self.dependencies.of(key) | set(self.dependencies.on(key))
        if others and (event.type is EventType.DELETED or event.old is None
                       or event.old.status.applied != event.obj.status.applied):
            for other in sorted(others):
                self.queue.add(other)
        if event.type is EventType.DELETED and key not in self.apps:
            self.dependencies.put(key, ())  # gone, copies and all
        st = event.obj.status
        if event.type is not EventType.DELETED and st.state == AppState.RUNNING:
            self._to_available.stop(key, (st.generation, frozenset(
                cluster_id(r.namespace, r.name) for r in st.running_on)))

    def on_garbage_status(self, key: str, revision: int) -> None:
        """Someone wrote a value that is not a status into our key: our status goes back."""
        self.writer.garbage_seen(key, revision)
        self.queue.add(keys.resource_key_of(key))

    def on_cluster(self, event: Event[ClusterView]) -> None:
        meta = event.obj.metadata
        cid = cluster_id(meta.namespace, meta.name)
        with self._lock:
            if event.type is not EventType.DELETED and event.obj.servable:
                self._claimable.add(cid)
            else:
                self._claimable.discard(cid)
        if event.type is EventType.DELETED:
            self.connections.drop(event.key)
        if event.type is not EventType.ADDED:  # e.g. a new kubeconfig: apply through it
            self.requeue_cluster(cid, drifted=True)

    def on_cluster_status(self, event: Event[ClusterStatus]) -> None:
        was = event.old.status.state if event.old else ""
        now = event.obj.status.state if event.type is not EventType.DELETED else ""
        if now == was:
            return
        meta = event.obj.metadata
        cid = cluster_id(meta.namespace, meta.name)
        # Either way, every application on it is judged again: gone OFFLINE, it says
        # so; back ONLINE, it stops saying so and what failed there is retried. A copy
        # recorded as applied is not applied again for it: a push cluster's drift
        # watches re-apply what changed while it was away. (Only what failed was
        # requeued once: a finished Job, which no watch event wakes, then said "not
        # observed: cluster … is UNHEALTHY" for good — the robustness run, seed 29.)
        self.requeue_cluster(cid)

    def requeue_cluster(self, cid: str, *, drifted: bool = False) -> None:
        """Reconcile now every application that is on, or failed on, cluster ``cid``."""
        for item in self.statuses.items():
            st = item.obj.status
            if cid in st.errors or cid in st.applied:
                self._requeue(keys.resource_key_of(item.key), cid if drifted else None)

    def members_changed(self) -> None:
        """The propagator's replicas changed: what no replica serves a cluster of — an
        application on no cluster, or only on clusters nobody can serve — belongs to its
        home replica, which may be another now, so it is reconciled again here (a
        replica that is not its home drops it at once). Without this, such work dropped
        while no replica saw itself its home — a replica's own member key gone as it
        registers anew after etcd missed its lease — waited for the next resync (a
        robustness run, seed 14: a team's deleted application on no cluster, not
        removed 240 s later, the one path found that leaves it so)."""
        claimable = set(self.claimable())
        served: set[keys.Key] = set()
        for item in self.statuses.items():
            st = item.obj.status
            if any(c in claimable for c in (*st.applied, *st.errors)):
                served.add(keys.resource_key_of(item.key))
        for b in self.bindings.items():
            ns = b.obj.spec.resource.namespace
            if any(cluster_id(t.namespace or ns, t.name) in claimable
                   for t in b.obj.spec.targets):
                served.add(keys.resource_key_of(b.key))
        for key in {*self.apps.list_keys(), *map(keys.resource_key_of,
                                                  self.statuses.list_keys())} - served:
            self.queue.add(key)

    def gained(self, cid: str) -> None:
        """A cluster this replica now serves: what has work to do there is reconciled
        at once; what runs there as recorded is applied again too (drift while nobody
        watched; it starts the drift watches), spread over the next ``GAINED_SPREAD``
        seconds, so that a hand-over of a full cluster does not queue the work that
        matters behind thousands of re-applies."""
        urgent: set[keys.Key] = set()
        routine: set[keys.Key] = set()
        for item in self.statuses.items():
            st = item.obj.status
            if cid in st.errors or cid in st.applied:
                key = keys.resource_key_of(item.key)
                (routine if self._settled(key, st) else urgent).add(key)
        for b in self.bindings.items():
            if any(cluster_id(t.namespace or b.obj.spec.resource.namespace, t.name) == cid
                   for t in b.obj.spec.targets):
                key = keys.resource_key_of(b.key)
                if key not in routine:
                    urgent.add(key)
        for key in urgent:
            self.queue.add(key)
        for key in routine - urgent:
            self.queue.add_after(key, random.uniform(1.0, GAINED_SPREAD))

    def _settled(self, key: str, st: ApplicationState) -> bool:
        """RUNNING the application's generation where its Binding (for that generation)
        says, without errors."""
        app = self.apps.get(key)
        ref = keys.parse_key(key)
        binding = self.bindings.get(keys.binding_key("Application", ref.namespace or "",
                                                     ref.name))
        if app is None or binding is None or st.state != AppState.RUNNING or st.errors:
            return False
        gen = app.metadata.generation
        on = {cluster_id(r.namespace, r.name) for r in st.running_on}
        want = {cluster_id(t.namespace or ref.namespace, t.name) for t in binding.spec.targets}
        return st.generation == gen == binding.spec.generation and on == want

    def _requeue(self, key: keys.Key, drifted: str | None = None) -> None:
        if drifted is not None:
            self.applies.drifted(key, drifted)
        self.queue.add(key)

    # -- what the clusters show --------------------------------------------------

    def seen(self, cid: str, owner: str, have: ClusterApplied, rules: tuple[HealthRule, ...],
             now: datetime) -> Copy:
        """A push cluster's copy as the book shows it now."""
        return judge_copy(self.book, self.pods, cid, owner, have, rules, now,
                          self.untracked_after)

    def on_drift(self, cids: Collection[str], event_type: str, obj: KubeObject) -> None:
        """A watch of a server saw an object berth manages there: for each of the clusters
        ``cids`` on that server it concerns, note what it shows (its health), and
        re-apply it if someone other than berth changed or deleted it."""
        meta = obj.metadata
        owner = meta.annotations.get(OWNER, "")
        ref = KubeObjectRef(obj.apiVersion, obj.kind, meta.name, meta.namespace)
        for cid in self._concerned(cids, ref, owner):
            self._drift(cid, ref, owner, event_type, obj)

    def _concerned(self, cids: Collection[str], ref: KubeObjectRef, owner: str) -> list[str]:
        """The clusters among ``cids`` (all on one server) where ``ref`` is berth's: the
        book holds it there, an apply of it there is recorded or running, or its owner's
        status lists it there. Not the others: it is another namespace's of that server,
        a cluster's that another replica serves, or no application's any more."""
        ours = [cid for cid in cids
                if self.book.holds(cid, ref) or self.own_writes.knows(cid, ref)]
        if len(ours) == len(cids):
            return ours
        applied = self._recorded(owner)
        return ours + [cid for cid in cids if cid not in ours and cid in applied
                       and ref in applied[cid].objects]

    def _recorded(self, owner: str) -> dict[str, ClusterApplied]:
        """What the status of application ``owner`` ("<namespace>/<name>") records applied."""
        namespace, _, name = owner.partition("/")
        item = self.statuses.get(keys.status_key("Application", namespace, name)) \
            if namespace and name else None
        return item.status.applied if item is not None else {}

    def _drift(self, cid: str, ref: KubeObjectRef, owner: str, event_type: str,
               obj: KubeObject) -> None:
        """What cluster ``cid`` shows of ``ref`` now: into the book, and a re-apply if
        someone other than berth changed or deleted it."""
        meta = obj.metadata
        deleted = event_type == "DELETED"
        if deleted:
            self.book.drop(cid, ref)
            lost = None
        else:
            lost = self.book.put(cid, ref, obj)
        if lost:
            log.warning("%s on cluster %s is managed by application %s now: application %s "
                        "lost it", ref, cid, owner or "(none)", lost)
        if "/" not in owner:
            return
        if not self.own_writes.someone_else(cid, ref, meta.resourceVersion, meta.generation,
                                            deleted=deleted):
            return
        namespace, _, name = owner.partition("/")
        key = keys.resource_key("Application", name, namespace)
        have = self._recorded(owner).get(cid)
        if deleted and have is not None and ref in have.done:
            log.info("%s on cluster %s was deleted after it completed (as "
                     "ttlSecondsAfterFinished does): not run again", ref, cid)
            return
        DRIFTS.inc()
        log.info("%s on cluster %s was %s by someone else: re-applying %s", ref, cid,
                 "deleted" if deleted else "changed", owner)
        self._requeue(key, cid)

    def seen_applied(self, cid: str, _kind: object, ref: KubeObjectRef,
                     stored: KubeObject) -> None:
        """An apply's answer: what the cluster stored (its own reconcile judges it)."""
        self.book.put(cid, ref, stored, answer=True)

    def _on_seen(self, cid: str, owner: str) -> None:
        """What a cluster shows of an application's objects changed: judge its copies
        again — before any apply that waits when the copy's state turned."""
        namespace, _, name = owner.partition("/")
        if namespace and name:
            key = keys.resource_key("Application", name, namespace)
            self.queue.add(key, urgent=self._turned(key, cid, owner))

    def on_pods(self, owner: str) -> None:
        """An application's Pods on a cluster became (not) Ready: judge its copies again,
        in turn. Not judged here: Pods change many times for each change of their
        workload's status, which says when the copy is available (``_on_seen``)."""
        namespace, _, name = owner.partition("/")
        if namespace and name:
            self.queue.add(keys.resource_key("Application", name, namespace))

    def on_report(self, key: keys.Key, cid: str, report: Report, old: Report | None) -> None:
        """A pull cluster's agent reported on the application's work: what it says is
        progress — recorded at once when the copy's state turned, as a push cluster's
        is when its watch shows it (:meth:`_on_seen`)."""
        got = report.status.applied
        was = old.status.applied if old is not None else None
        turned = (got is not None and (was is None or (got.generation, got.health) != (
            was.generation, was.health) or not set(got.done) <= set(was.done))) or (
            report.status.cleared or bool(report.status.error or report.status.refused))
        self.queue.add(key, urgent=turned)

    def _turned(self, key: str, cid: str, owner: str) -> bool:
        """Whether the copy on ``cid``, judged as the cluster shows it now, is in another
        state than its status records (available now, or failed) or has a Job complete
        that it does not record done: what its user and a move wait for, and what keeps
        a Job from running again, recorded at once. Any other change (one replica more
        available) waits its turn, and many such changes make one reconcile."""
        have = self._recorded(owner).get(cid)
        if have is None or have.generation <= 0:
            return False
        app = self.apps.get(key)
        rules = tuple(app.spec.health) if app is not None else ()
        judged = self.seen(cid, owner, have, rules, self.clock.now())
        return judged.health.state != (have.health or UNKNOWN) or not (
            set(judged.complete) <= set(have.done))
