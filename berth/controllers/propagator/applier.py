"""The applier: put each placed application on the clusters its Binding names.

One reconcile per application key, level-based: it reads the application, its
Binding and its own status key into frozen :class:`~controllers.propagator.plan.Facts`,
then runs the plan (``plan.py``: what to do, as a value) step by step through
the executor (``execute.py``: doing it on clusters) and the status writer
(``status.py``), and ends with a result: done, or retry after a while.

* **Apply** generation G only when the Binding was decided for G
  (docs/architecture.md "Store contract"), with server-side apply (field
  manager ``berth``) of every manifest object on every target cluster, each
  cluster's copy rendered through the overrides that select it; objects a new
  generation dropped are pruned.
* **Roll out** a new generation as ``spec.rollout`` says (``rollout.py``
  decides which generation each target gets, from the history when it is an
  earlier one), at the pace the fleet and the application allow
  (docs/rollouts.md, docs/pace.md).
* **Health**: each copy is judged per kind (``health.py``) from what the
  cluster answered to the apply and showed since through the drift watches
  (``objects.py``), with its Pods' reasons from the observer; RUNNING means
  available on every target. A copy whose state turned as its cluster shows
  it (available now, or failed, or a Job complete) queues its application
  urgent: recorded ahead of the applies that wait, not behind them.
* **Move** without downtime: once every target's copy is available (and its
  objects checked with a GET), they are deleted from the clusters the
  application left; a target that is not available within ``move_timeout``
  keeps the old copy, and is recorded as failed for the scheduler.
* **Delete**: an application marked deleted has its objects removed from every
  cluster, then its key (and its status) deleted — a finalizer. One whose key
  vanished is cleaned up from the clusters its status lists.
* **Drift**: a periodic resync re-applies everything (server-side apply of an
  unchanged object changes nothing), and watches re-apply an application as
  soon as someone else changes or deletes one of its objects.

A cluster that fails is retried with backoff and recorded; a manifest the
cluster refuses as invalid is FAILED and left until its generation changes.

Over 600 lines, on purpose: this is the propagator's one reconciler, and what
is left here is what shares its indexes under its one lock (the event
handlers that requeue, the facts a reconcile gathers, the ending it records).
Each part that decides or acts on its own is a module of its own: the plan,
the executor, the status writer, rollouts, health, drift, manifests.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
from collections.abc import Collection
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Histogram

from berth.controllers.propagator.config import PropagatorConfig
from berth.controllers.propagator.credentials import AppSecrets, Kubeconfigs
from berth.controllers.propagator.drift import OwnWrites
from berth.controllers.propagator.execute import (
    HANDED_OVER,
    ClusterClient,
    Executor,
    Leased,
    OnApplied,
    Router,
    run,
)
from berth.controllers.propagator.health import UNKNOWN, Copy, Health, judge
from berth.controllers.propagator.kube import OWNER, Connections, KubeObject, Unavailable, safe
from berth.controllers.propagator.manifest import ManifestError, objects, remark
from berth.controllers.propagator.manifests import Manifests
from berth.controllers.propagator.objects import Book, NoPods, Pods, judge_copy, observed
from berth.controllers.propagator.plan import CONFIRM, App, Facts, Finish, Progress
from berth.controllers.propagator.pull import PullClusters
from berth.controllers.propagator.rollout import Inputs, Version, rolls, stable_of
from berth.controllers.propagator.shard import Shard
from berth.controllers.propagator.status import Doc, StatusWriter
from berth.controllers.propagator.views import AppView, ClusterView, cluster_id, cluster_key
from berth.controllers.runtime import Event, EventType, Informer, Item, Retry, WorkQueue
from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.controllers.runtime.events import Recorder
from berth.controllers.runtime.observe import LATENCY_BUCKETS, Stopwatch
from berth.controllers.runtime.transit import Transit, transit_id
from berth.store import Invalid, Store, StoreError, decode, keys
from berth.store.credentials import with_current_secrets
from berth.store.documents import (
    ApplicationState,
    ApplicationStatus,
    AppState,
    Binding,
    BindingState,
    ClusterApplied,
    ClusterStatus,
    HealthRule,
    KubeObjectRef,
)
from berth.store.documents.overrides import GlobalOverride, Override
from berth.store.documents.pace import FLEET, Pace, PaceOverride, effective, steady
from berth.store.documents.render import (
    Rendered,
    RenderError,
    Where,
    render,
    selects_application,
)
from berth.store.documents.rollouts import RolloutControl, RolloutPolicy, RolloutStrategy
from berth.store.documents.work import Report

log = logging.getLogger(__name__)

DRIFTS = Counter("berth_propagator_drift_total", "Objects changed on a cluster by others")
TO_AVAILABLE = Histogram(
    "berth_propagator_binding_to_available_seconds",
    "From the propagator seeing a Binding (generation and targets) to seeing the application "
    "RUNNING there: available on every target", buckets=LATENCY_BUCKETS)
# the berth_applications gauge's states: every application state, and Unschedulable
# where the scheduler found no cluster and nothing runs
APPLICATION_STATES = (*AppState, BindingState.UNSCHEDULABLE)

FINALIZER = "berth.dev/propagator"
GAINED_SPREAD = 30.0  # seconds over which a gained cluster's settled applications re-apply


def _tail(key: str) -> str:
    """``<namespace>/<name>`` of an application's resource, Binding or status key."""
    return "/".join(key.rsplit("/", 2)[-2:])


class Applier:
    def __init__(self, store: Store, config: PropagatorConfig, *,
                 clusters: Informer[ClusterView], cluster_statuses: Informer[ClusterStatus],
                 connections: Connections, kubeconfigs: Kubeconfigs,
                 shard: Shard | None = None, pods: Pods | None = None,
                 clock: Clock = SYSTEM) -> None:
        self.store = store
        self.clock = clock  # what a reconcile's facts are dated by (moves' and rollouts' times)
        self.pods = pods or NoPods()  # what the observer's Pod watch says
        self.shard = shard  # None: this replica serves every cluster
        self.config = config
        self.clusters = clusters
        self.cluster_statuses = cluster_statuses  # the observer's: ONLINE or not
        self.connections = connections
        self.kubeconfigs = kubeconfigs
        idle = config.watch_idle_timeout
        self.apps: Informer[AppView] = Informer(
            store, keys.resource_prefix("Application"), AppView, idle_timeout=idle)
        self.bindings: Informer[Binding] = Informer(
            store, keys.binding_prefix("Application"), Binding, idle_timeout=idle)
        self.statuses: Informer[ApplicationStatus] = Informer(
            store, keys.status_prefix("Application"), ApplicationStatus, idle_timeout=idle)
        self.secrets = AppSecrets(store, idle_timeout=idle)
        # what overrides make of each cluster's copy (berth.store.documents.render)
        self.overrides: Informer[Override] = Informer(
            store, keys.resource_prefix("Override"), Override, idle_timeout=idle)
        self.global_overrides: Informer[GlobalOverride] = Informer(
            store, keys.resource_prefix("GlobalOverride"), GlobalOverride, idle_timeout=idle)
        # rollouts: what operators said (earlier manifests are read when a rollout needs
        # one: a history holds up to ten, which no informer should keep for every app)
        self.manifests = Manifests(store)
        # the fleet's pace (docs/pace.md): its document, and the copies in transition
        self.paces: Informer[Pace] = Informer(
            store, keys.resource_prefix("Pace"), Pace, idle_timeout=idle)
        self.transit = Transit()
        self.controls: Informer[RolloutControl] = Informer(
            store, keys.ROLLOUTS + "applications/", RolloutControl, idle_timeout=idle)
        self.queue: WorkQueue[str] = WorkQueue(base_delay=config.retry_base_delay,
                                               max_delay=config.retry_max_delay)
        # what the statuses say, as events (docs/events.md): started and stopped with the
        # propagator
        self.events = Recorder(store, "propagator", ttl=config.event_ttl, clock=clock) if (
            config.events) else None
        self.writer = StatusWriter(store, self.statuses, ledger=config.ledger,
                                   events=self.events, clock=clock,
                                   identity=shard.identity if shard is not None else "")
        self.own_writes = OwnWrites()
        self.book = Book(self._on_seen)  # what the clusters showed of berth's objects
        # Called after each object applied (cluster id, kind, the resourceVersion
        # stored): the drift watches start there.
        self.on_applied: list[OnApplied] = [
            lambda cid, _kind, ref, stored: self._seen_applied(cid, ref, stored)]
        gate = {"gate": shard.serving} if shard is not None else {}
        # pull clusters: their work written, their agents' reports read (pull.py)
        self.pull = PullClusters(store, is_pull=self.is_pull,
                                 exists=lambda cid: cluster_key(cid) in self.clusters,
                                 fence=shard.fence if shard is not None else lambda _c: None,
                                 idle_timeout=idle, **gate)
        self.pull.on_report.append(self._on_report)
        self.pull.on_garbage.append(self.queue.add)  # a work written over by hand
        authority = shard if shard is not None else Leased(store.holds)
        self.executor = Router(Executor(self, self.own_writes, self.on_applied, authority),
                               self.pull, self.is_pull)
        self._claimable: set[str] = set()  # clusters a replica can serve (with a kubeconfig)
        self._lock = threading.Lock()
        # application key → cluster id → when drift was last seen there (a sequence)
        self._drifted: dict[str, dict[str, int]] = {}
        self._seen = 0
        self._epoch = 0  # bumped by every resync: everything is applied again once
        self._applied_epoch: dict[tuple[str, str], int] = {}
        self._to_available = Stopwatch(TO_AVAILABLE)
        self.apps.add_handler(self._on_app)
        self.bindings.add_handler(self._on_binding)
        self.statuses.add_handler(self._on_status)
        self.statuses.add_invalid_handler(self._on_garbage_status)
        self.secrets.informer.add_handler(self._on_secrets)
        self.overrides.add_handler(self._on_override)
        self.global_overrides.add_handler(self._on_override)
        self.controls.add_handler(self._on_control)
        self.clusters.add_handler(self._on_cluster)
        cluster_statuses.add_handler(self._on_cluster_status)

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return (self.apps, self.bindings, self.statuses, self.secrets.informer,
                self.overrides, self.global_overrides, self.controls, self.paces,
                *self.pull.informers)

    def is_pull(self, cid: str) -> bool:
        """Whether cluster ``cid`` is reached by its agent alone (``spec.mode: Pull``)."""
        view = self.clusters.get(cluster_key(cid))
        return view is not None and view.pull

    # -- events ----------------------------------------------------------------

    def _on_app(self, event: Event[AppView]) -> None:
        self.queue.add(event.key)

    def _on_override(self, event: Event[Any]) -> None:
        """An override changed: reconcile what it selects (or selected); a cluster whose
        copy it does not change is not applied again (its fingerprint is the same)."""
        changed = [o for o in (event.obj, event.old) if o is not None]
        for item in self.apps.items():
            meta = item.obj.metadata
            if any(selects_application(o, meta.namespace or "", meta.name, meta.labels)
                   for o in changed):
                self.queue.add(item.key)

    def _on_control(self, event: Event[RolloutControl]) -> None:
        """An operator paused, resumed or approved a rollout: reconcile it."""
        meta = event.obj.metadata
        if meta.namespace:
            self.queue.add(keys.resource_key("Application", meta.name, meta.namespace))

    def _selecting(self, namespace: str, name: str, labels: dict[str, str]
                   ) -> list[Override]:
        """The overrides that select the application (in no order: render orders them)."""
        every: list[Override] = [i.obj for i in self.global_overrides.items()]
        every += [i.obj for i in self.overrides.items()]
        return [o for o in every if selects_application(o, namespace, name, labels)]

    def _rendered(self, targets: tuple[str, ...], bodies: tuple[dict[str, Any], ...],
                  selecting: list[Override], namespace: str, name: str, generation: int,
                  decision: str = "") -> tuple[dict[str, Rendered], dict[str, str]]:
        """Each target's copy as the overrides make it, and the targets whose copy cannot
        be rendered (why, naming the rule)."""
        rendered: dict[str, Rendered] = {}
        unrendered: dict[str, str] = {}
        if not selecting or not bodies:
            return rendered, unrendered
        for cid in targets:
            view = self.clusters.get(cluster_key(cid))
            if view is None:
                continue
            meta = view.metadata
            try:
                made = render(bodies, selecting, Where(meta.name, meta.namespace, meta.labels))
            except RenderError as exc:
                unrendered[cid] = f"not rendered: {exc}"
                continue
            if made.fingerprint:
                made = dataclasses.replace(made, bodies=remark(made.bodies, namespace, name,
                                                               generation, decision))
            rendered[cid] = made
        return rendered, unrendered

    def _on_secrets(self, event: Event[Any]) -> None:
        """An application's Secrets' data changed (with a new generation): reconcile it."""
        meta = event.obj.metadata
        if meta.namespace:
            self.queue.add(keys.resource_key("Application", meta.name, meta.namespace))

    def _on_binding(self, event: Event[Binding]) -> None:
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

    def _on_status(self, event: Event[ApplicationStatus]) -> None:
        key = keys.resource_key_of(event.key)
        if event.type is EventType.DELETED:
            self.transit.status(transit_id(event.key), None)
        else:
            st, r = event.obj.status, event.obj.status.rollout
            self.transit.status(transit_id(event.key), steady(
                st.applied, r.generation if r else 0, r.phase if r else None))
        if event.type is EventType.ADDED:  # at start: also applications whose key vanished
            self.queue.add(key)
        elif (self.shard is not None and event.type is EventType.MODIFIED
              and not self.writer.ours(event.key, event.obj)):
            self.queue.add(key)  # another replica's progress: a move or a lower may go on
        st = event.obj.status
        if event.type is not EventType.DELETED and st.state == AppState.RUNNING:
            self._to_available.stop(key, (st.generation, frozenset(
                cluster_id(r.namespace, r.name) for r in st.running_on)))

    def states(self) -> dict[str, int]:
        """How many applications are in each state: their status's, Unschedulable when
        the scheduler found no cluster and nothing runs, PENDING before any status."""
        statuses = {_tail(item.key): item.obj.status.state for item in self.statuses.items()}
        unschedulable = {_tail(item.key) for item in self.bindings.items()
                         if item.obj.status.state == BindingState.UNSCHEDULABLE}
        out: dict[str, int] = {}
        for key in map(_tail, self.apps.list_keys()):
            state: str = statuses.get(key) or AppState.PENDING
            if key in unschedulable and state == AppState.PENDING:
                state = BindingState.UNSCHEDULABLE
            out[state] = out.get(state, 0) + 1
        return out

    def _on_garbage_status(self, key: str, revision: int) -> None:
        """Someone wrote a value that is not a status into our key: our status goes back."""
        self.writer.garbage_seen(key, revision)
        self.queue.add(keys.resource_key_of(key))

    def claimable(self) -> list[str]:
        """The clusters some replica can serve: with a kubeconfig or an agent (Pull), not
        deleted."""
        with self._lock:
            return list(self._claimable)

    def _on_cluster(self, event: Event[ClusterView]) -> None:
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
            meta = event.obj.metadata
            self.requeue_cluster(cluster_id(meta.namespace, meta.name), drifted=True)

    def _on_cluster_status(self, event: Event[ClusterStatus]) -> None:
        was = event.old.status.state if event.old else ""
        now = event.obj.status.state if event.type is not EventType.DELETED else ""
        if now == was:
            return
        meta = event.obj.metadata
        cid = cluster_id(meta.namespace, meta.name)
        # Back ONLINE: retry what failed there (a push cluster's drift watches re-apply
        # the rest when they are back; a pull cluster's applications are judged again
        # from its agent's reports). Gone OFFLINE: the applications on it say so.
        self.requeue_cluster(cid, only_failed=now == "ONLINE" and not self.is_pull(cid))

    def requeue_cluster(self, cid: str, *, only_failed: bool = False, drifted: bool = False
                        ) -> None:
        """Reconcile now every application that is on, or failed on, cluster ``cid``."""
        for item in self.statuses.items():
            st = item.obj.status
            if cid in st.errors or (not only_failed and cid in st.applied):
                self._requeue(keys.resource_key_of(item.key), cid if drifted else None)

    def gained(self, cid: str) -> None:
        """A cluster this replica now serves: what has work to do there is reconciled
        at once; what runs there as recorded is applied again too (drift while nobody
        watched; it starts the drift watches), spread over the next ``GAINED_SPREAD``
        seconds, so that a hand-over of a full cluster does not queue the work that
        matters behind thousands of re-applies."""
        urgent: set[str] = set()
        routine: set[str] = set()
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

    def _requeue(self, app_key: str, drifted: str | None = None) -> None:
        if drifted is not None:
            with self._lock:
                self._seen += 1
                self._drifted.setdefault(app_key, {})[drifted] = self._seen
        self.queue.add(app_key)

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
        namespace, _, name = owner.partition("/")  # the others: as the status says
        item = self.statuses.get(keys.status_key("Application", namespace, name)) \
            if namespace and name else None
        applied: dict[str, ClusterApplied] = item.status.applied if item is not None else {}
        return ours + [cid for cid in cids if cid not in ours and cid in applied
                       and ref in applied[cid].objects]

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
        if deleted and self._complete(key, cid, ref):
            log.info("%s on cluster %s was deleted after it completed (as "
                     "ttlSecondsAfterFinished does): not run again", ref, cid)
            return
        DRIFTS.inc()
        log.info("%s on cluster %s was %s by someone else: re-applying %s", ref, cid,
                 "deleted" if deleted else "changed", owner)
        self._requeue(key, cid)

    def _complete(self, key: str, cid: str, ref: KubeObjectRef) -> bool:
        """Whether ``ref`` is a Job recorded complete on ``cid`` at the generation there."""
        ref_app = keys.parse_key(key)
        item = self.statuses.get(keys.status_key("Application", ref_app.namespace or "",
                                                 ref_app.name))
        have = item.status.applied.get(cid) if item is not None else None
        return have is not None and ref in have.done

    def _seen_applied(self, cid: str, ref: KubeObjectRef, stored: KubeObject) -> None:
        self.book.put(cid, ref, stored, notify=False)

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

    def _on_report(self, key: str, cid: str, report: Report, old: Report | None) -> None:
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
        namespace, _, name = owner.partition("/")
        recorded = self.statuses.get(keys.status_key("Application", namespace, name))
        have = recorded.status.applied.get(cid) if recorded is not None else None
        if have is None or have.generation <= 0:
            return False
        app = self.apps.get(key)
        rules = tuple(app.spec.health) if app is not None else ()
        judged = self._copy(cid, owner, have, rules, self.clock.now())
        return judged.health.state != (have.health or UNKNOWN) or not (
            set(judged.complete) <= set(have.done))

    # -- health, for the executor and the reconcile ---------------------------------

    def judge(self, cid: str, ref: KubeObjectRef, obj: KubeObject,
              rules: tuple[HealthRule, ...]) -> Health:
        """The health of an object a cluster just returned (applied a moment ago)."""
        owner = obj.metadata.annotations.get(OWNER, "")
        return judge(observed(obj), age=0.0, pods=self.pods.trouble(cid, owner), rules=rules,
                     untracked_after=self.config.untracked_after,
                     lost=self.pods.lost(cid, owner))

    def seen_owner(self, cid: str, ref: KubeObjectRef) -> str | None:
        return self.book.owner(cid, ref)

    def _unobserved(self, cid: str, have: ClusterApplied | None) -> bool:
        """Whether an object recorded on ``cid`` is not in the book (its cluster was handed
        over and back, say): applying it again observes it, and starts its watch."""
        return have is not None and have.generation > 0 and any(
            ref not in have.done and self.book.get(cid, ref) is None for ref in have.objects)

    def _judged(self, cid: str, owner: str, have: ClusterApplied,
                rules: tuple[HealthRule, ...], now: datetime) -> Copy:
        """A served cluster's copy: as the book shows it, or as its agent reported it."""
        if not self.is_pull(cid):
            return self._copy(cid, owner, have, rules, now)
        namespace, _, name = owner.partition("/")
        return self.pull.copy(cid, namespace, name, have) or Copy(
            Health(UNKNOWN, "not reported by its agent yet"))

    def _copy(self, cid: str, owner: str, have: ClusterApplied, rules: tuple[HealthRule, ...],
              now: datetime) -> Copy:
        """A served cluster's copy as the book shows it now."""
        return judge_copy(self.book, self.pods, cid, owner, have, rules, now,
                          self.config.untracked_after)

    def resync(self) -> None:
        """Re-apply every application once (and clean up after vanished ones)."""
        with self._lock:
            self._epoch += 1
        apps, statuses = self.apps.list_keys(), self.statuses.list_keys()  # copies
        for key in {*apps, *map(keys.resource_key_of, statuses)}:
            self.queue.add(key)

    def forget_written(self, upto: int) -> None:
        self.writer.forget_written(upto)

    # -- clusters, for the executor ----------------------------------------------

    def client(self, cid: str) -> ClusterClient | None:
        """The cluster's connection; None if the Cluster is gone; Unavailable if unusable."""
        ckey = cluster_key(cid)
        view = self.clusters.get(ckey)
        if view is None:
            return None
        kubeconfig = self.kubeconfigs.of(ckey, view)
        if not kubeconfig:
            raise Unavailable(f"cluster {cid} has no kubeconfig")
        try:
            return self.connections.get(ckey, kubeconfig)
        except Exception as exc:
            raise Unavailable(f"cluster {cid}: unusable kubeconfig: {safe(exc)}") from exc

    def unreadable(self, cid: str) -> bool:
        return self._unreadable(cluster_key(cid))

    def _unreadable(self, key: str) -> bool:
        """Whether ``key`` holds a value the informer skipped (it did not decode)."""
        try:
            return self.store.get(key) is not None
        except StoreError as exc:
            raise Unavailable(f"{key}: {exc}") from exc

    # -- reconcile -------------------------------------------------------------

    def reconcile(self, key: str) -> Retry | None:
        """plan → execute → write, until the plan finishes; a Retry if not done."""
        ref = keys.parse_key(key)
        doc = self.writer.read(ref.namespace or "", ref.name)
        item = self.apps.item(key)
        with self._lock:
            epoch = self._epoch
            drifted = dict(self._drifted.get(key, {}))
        try:
            facts = self._facts(key, doc, item, epoch, drifted)
        except Unavailable as exc:
            return Retry(str(exc))
        if facts is None:
            return None  # none of its clusters is served here
        if self.shard is not None and facts.owned:
            fences = {cid: self.shard.fence(cid) for cid in sorted(facts.owned)}
            lost = [cid for cid, fence in fences.items() if fence is None]
            if lost:  # handed over since the facts were read: never write unfenced
                return Retry(f"{', '.join(lost)}: {HANDED_OVER}")
            doc.fences = tuple(f for f in fences.values() if f is not None)
        progress = Progress.start(doc.state, facts.owned)
        outcome = run(facts, progress, self.executor, doc)
        with self._lock:
            mine = self._drifted.get(key, {})
            for cid in progress.tried:  # drift seen since the snapshot is still to do
                if cid in drifted and mine.get(cid) == drifted[cid]:
                    del mine[cid]
                done = cid in progress.applied and cid not in progress.errors
                if done and progress.refused is None:
                    self._applied_epoch[(key, cid)] = epoch
            if not mine:
                self._drifted.pop(key, None)
        for cid in progress.drifted:
            self._requeue(key, cid)
        if isinstance(outcome, Retry):
            return outcome
        return self._finish(key, doc, item, outcome)

    def _owned(self, key: str, cids: set[str]) -> frozenset[str] | None:
        """Of an application's clusters, those this replica serves (None: all). A
        cluster nobody can serve (no such Cluster, no kubeconfig) goes with the
        application's own share: its replica reports it."""
        if self.shard is None:
            return None
        with self._lock:
            claimable = set(self._claimable)
        home = self.shard.mine(key)
        return frozenset(c for c in cids if self.shard.owns(c) or (
            home and c not in claimable))

    def _involved(self, key: str, recorded: ApplicationState, targets: tuple[str, ...]
                  ) -> frozenset[str] | bool | None:
        """This replica's clusters of the application (None: all); False when it has
        nothing to do with it. One on no cluster at all is its home replica's."""
        cids = {*recorded.applied, *(c for c in recorded.errors if c != CONFIRM), *targets}
        owned = self._owned(key, cids)
        if owned is None or owned:
            return owned
        return frozenset() if not cids and self.shard is not None and self.shard.mine(
            key) else False

    def _facts(self, key: str, doc: Doc, item: Item[AppView] | None, epoch: int,
               drifted: dict[str, int]) -> Facts | None:
        """The frozen snapshot a reconcile decides on; None when it is not this
        replica's to reconcile."""
        ns, name = doc.namespace, doc.name
        recorded = doc.state
        binding = self.bindings.get(keys.binding_key("Application", ns, name))
        placed = [t for t in binding.spec.targets if t.kind == "Cluster"] if binding else []
        targets = tuple(cluster_id(t.namespace or ns, t.name) for t in placed)
        owned = self._involved(key, recorded, targets)
        if owned is False:
            return None
        assert owned is not True
        if item is None:
            unreadable = bool(recorded.applied) and self._unreadable(key)
            return Facts(None, recorded, app_unreadable=unreadable, owned=owned,
                         owner=f"{ns}/{name}")
        meta = item.obj.metadata
        spec = item.obj.spec
        manifest = (spec.manifest if meta.deleted is not None  # removal needs no data
                    else self.secrets.manifest(ns, name, meta.generation, spec.manifest))
        try:
            bodies, error = tuple(objects(manifest, ns, name, meta.generation,
                                          binding.spec.decision if binding else "")), ""
        except ManifestError as exc:
            bodies, error = (), str(exc)
        rules = tuple(spec.health)
        app = App(meta.generation, meta.deleted is not None,
                  tuple(f for f in meta.finalizers if f != FINALIZER), bodies, error,
                  rules, spec.conflictResolution == "Overwrite", spec.deletionPropagation)
        now = self.clock.now()
        owner = f"{ns}/{name}"
        health = {cid: self._judged(cid, owner, have, rules, now)
                  for cid, have in recorded.applied.items()
                  if have.generation > 0 and (owned is None or cid in owned)}
        if binding is None:
            return Facts(app, recorded, owned=owned, health=health, now=now,
                         move_timeout=self.config.move_timeout, owner=owner)
        served = tuple(c for c in targets if owned is None or c in owned)
        selecting = self._selecting(ns, name, meta.labels) if not error else []
        rendered, unrendered = self._rendered(served, bodies, selecting, ns, name,
                                              meta.generation, binding.spec.decision)
        rollout = self._rollout(spec.rollout, spec.pace, recorded, meta.generation, targets,
                                served, selecting, manifest, ns, name) if not error else Inputs()
        shares = {cluster_id(t.namespace or ns, t.name): t.replicas for t in placed
                  if t.replicas is not None}
        with self._lock:
            # an agent keeps its own cluster as its work says: a pull cluster's copy is
            # sent again only when its work no longer says to apply it
            stale = frozenset(c for c in targets if (owned is None or c in owned) and (
                self.pull.resend(c, ns, name) if self.is_pull(c) else (
                    c in drifted or self._applied_epoch.get((key, c)) != epoch
                    or self._unobserved(c, recorded.applied.get(c)))))
        return Facts(app, recorded, binding.spec.generation, targets,
                     binding.status.reason, stale=stale, unseen=self._unseen(targets),
                     shares=shares, owned=owned, health=health, now=now,
                     move_timeout=self.config.move_timeout, owner=owner, rendered=rendered,
                     unrendered=unrendered, rollout=rollout)

    def _rollout(self, policy: RolloutPolicy | None, own: PaceOverride | None,
                 recorded: ApplicationState, gen: int, targets: tuple[str, ...],
                 served: tuple[str, ...], selecting: list[Override], manifest: list[Any],
                 ns: str, name: str) -> Inputs:
        """What the application's rollout is decided from: its policy, what operators
        said, its targets' labels, the generation it rolls from ready to apply, and the
        pace it keeps (the fleet's with its ``own`` over it)."""
        if not rolls(policy):
            return Inputs()
        # A target joining a staged rollout takes its stage by its labels as they are
        # now, read from etcd: the informer may not yet have the change that made the
        # scheduler choose it, and a stale stage could apply a generation too soon.
        stable = stable_of(recorded.rollout, recorded.applied, gen)
        joining = (policy is not None and policy.strategy == RolloutStrategy.STAGED
                   and 0 < stable < gen)
        labels = {}
        for cid in targets:
            view = (self._read_cluster(cid) if joining and cid not in recorded.applied
                    else None) or self.clusters.get(cluster_key(cid))
            labels[cid] = view.metadata.labels if view is not None else {}
        control = self.controls.get(keys.rollout_key(ns, name))
        prior = self._prior(stable, served, selecting, manifest, ns, name) \
            if 0 < stable < gen else None
        fleet = self.paces.get(keys.resource_key("Pace", FLEET))
        return Inputs(policy, control, labels, prior,
                      effective(fleet.spec if fleet is not None else None, own),
                      self.transit.count())

    def _read_cluster(self, cid: str) -> ClusterView | None:
        """The Cluster ``cid`` as etcd has it now (None: absent, unreadable, or etcd not
        answering: the informer's view serves)."""
        key = cluster_key(cid)
        try:
            kv = self.store.get(key)
            return decode(kv.value, ClusterView, key) if kv is not None else None
        except (StoreError, Invalid):
            return None

    def _prior(self, gen: int, served: tuple[str, ...], selecting: list[Override],
               current: list[Any], ns: str, name: str) -> Version | None:
        """Generation ``gen`` of the application from its history, its Secrets with their
        current data (None: not kept, or a Secret of it is no longer in the manifest)."""
        kept = self.manifests.of(ns, name, gen)
        if kept is None:
            return None
        manifest = with_current_secrets(kept, current)
        if manifest is None:
            return None
        try:
            bodies = tuple(objects(manifest, ns, name, gen))
        except ManifestError:
            return None
        rendered, unrendered = self._rendered(served, bodies, selecting, ns, name, gen)
        return Version(gen, bodies, rendered, unrendered)

    def _unseen(self, clusters: tuple[str, ...]) -> dict[str, str]:
        """Of ``clusters``, those the observer does not see ONLINE, and why."""
        out: dict[str, str] = {}
        for cid in clusters:
            ns, _, name = cid.partition("/")
            st = self.cluster_statuses.get(keys.status_key("Cluster", ns, name))
            if st is not None and st.status.state not in ("ONLINE", ""):
                reason = f" ({st.status.reason})" if st.status.reason else ""
                out[cid] = f"{st.status.state}{reason}"
        return out

    def _finish(self, key: str, doc: Doc, item: Item[AppView] | None, end: Finish
                ) -> Retry | None:
        if end.warning:
            log.warning("%s: %s", key, end.warning)
        if end.state is not None:
            failed = doc.write(end.state)
            if failed is not None:
                return failed
        if end.remove:
            had = doc.old is not None or item is not None
            failed = self.writer.remove(doc, (key, item.mod_revision) if item else None)
            if failed is not None:
                return failed
            with self._lock:
                for k in [k for k in self._applied_epoch if k[0] == key]:
                    del self._applied_epoch[k]
            if had:
                log.info("application %s/%s removed from every cluster%s", doc.namespace,
                         doc.name, " and deleted" if item is not None else "")
        if end.recheck is not None and not end.retry:
            self.queue.add_after(key, end.recheck)  # a copy not yet available: judge again
        return Retry(end.retry) if end.retry else None
