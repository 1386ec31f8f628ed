"""The applier: put each placed application on the clusters its Binding names.

One reconcile per application key, level-based: it reads the application, its
Binding and its own status key into frozen facts (``facts.py``), then runs the
plan (``plan.py``: what to do, as a value) step by step through the executor
(``execute.py``) and the status writer (``status.py``): done, or retry later.

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

The applier wires the rooms and runs the loop: the event index (``concern.py``:
the applications an event concerns), the facts builder over the informers' view
(``facts.py``, ``reads.py``), the plan, the executor and the status writer.
"""

from __future__ import annotations

import logging
from typing import Any

from berth.controllers.propagator.authority import HANDED_OVER, Leased
from berth.controllers.propagator.concern import Applies, Concern
from berth.controllers.propagator.config import PropagatorConfig
from berth.controllers.propagator.credentials import AppSecrets, Kubeconfigs
from berth.controllers.propagator.execute import ClusterClient, Executor, OnApplied
from berth.controllers.propagator.facts import FactsBuilder
from berth.controllers.propagator.health import Health, judge
from berth.controllers.propagator.kube import OWNER, Connections, KubeObject, Unavailable, safe
from berth.controllers.propagator.manifests import Manifests
from berth.controllers.propagator.objects import NoPods, Pods, observed
from berth.controllers.propagator.plan import Finish, Progress
from berth.controllers.propagator.pull import PullClusters
from berth.controllers.propagator.reads import Informed, unreadable
from berth.controllers.propagator.reconcile import Router, run
from berth.controllers.propagator.shard import Shard
from berth.controllers.propagator.status import Doc, StatusWriter
from berth.controllers.propagator.views import AppView, ClusterView, cluster_key
from berth.controllers.runtime import Informer, Item, Retry, WorkQueue
from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.controllers.runtime.events import Recorder
from berth.controllers.runtime.transit import Transit
from berth.controllers.tenancy import Tenancy
from berth.store import Store, keys
from berth.store.documents import (
    ApplicationStatus,
    AppState,
    Binding,
    BindingState,
    ClusterStatus,
    HealthRule,
    KubeObjectRef,
)
from berth.store.documents.export import Verdicts
from berth.store.documents.overrides import GlobalOverride, Override
from berth.store.documents.pace import Pace
from berth.store.documents.rollouts import RolloutControl
from berth.store.documents.tenancy import ClusterSet, Identity, NamespacePolicy

log = logging.getLogger(__name__)

# the berth_applications gauge's states: every application state, and Unschedulable
# where the scheduler found no cluster and nothing runs
APPLICATION_STATES = (*AppState, BindingState.UNSCHEDULABLE)


def _tail(key: str) -> str:
    """``<namespace>/<name>`` of an application's resource, Binding or status key."""
    return "/".join(key.rsplit("/", 2)[-2:])


class Applier:
    """The propagator's reconciler: the informers, the rooms over them, and the loop."""

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
        self.controls: Informer[RolloutControl] = Informer(
            store, keys.rollout_prefix(), RolloutControl, idle_timeout=idle)
        # the fleet's pace (docs/pace.md): its document, and the copies in transition
        self.paces: Informer[Pace] = Informer(
            store, keys.resource_prefix("Pace"), Pace, idle_timeout=idle)
        # where each namespace may run (docs/teams.md): a change judges them all again
        self.tenancy = Tenancy(
            Informer(store, keys.resource_prefix("NamespacePolicy"), NamespacePolicy,
                     idle_timeout=idle),
            Informer(store, keys.resource_prefix("ClusterSet"), ClusterSet, idle_timeout=idle))
        self.transit = Transit()
        # what the tool deploying a placement-only application says of its copies (the
        # exporter's reading of Argo CD): a change judges that application again
        self.verdicts: Informer[Verdicts] = Informer(
            store, keys.verdicts_prefix(), Verdicts, idle_timeout=idle)
        self.queue: WorkQueue[keys.Key] = WorkQueue(base_delay=config.retry_base_delay,
                                               max_delay=config.retry_max_delay)
        # what the statuses say, as events (docs/events.md): started and stopped with the
        # propagator
        self.events = Recorder(store, "propagator", ttl=config.event_ttl, clock=clock) if (
            config.events) else None
        self.writer = StatusWriter(store, self.statuses, ledger=config.ledger,
                                   events=self.events, clock=clock,
                                   identity=shard.identity if shard is not None else "")
        self.applies = Applies()
        self.concern = concern = Concern(
            self.queue, self.applies, apps=self.apps, bindings=self.bindings,
            statuses=self.statuses, writer=self.writer, transit=self.transit,
            connections=connections, pods=self.pods,
            untracked_after=config.untracked_after, clock=clock, sharded=shard is not None)
        self.book = concern.book  # what the clusters showed of berth's objects
        # Called after each object applied (cluster id, kind, the resourceVersion
        # stored): the drift watches start there.
        self.on_applied: list[OnApplied] = [concern.seen_applied]
        gate = {"gate": shard.serving} if shard is not None else {}
        # pull clusters: their work written, their agents' reports read (pull.py)
        self.pull = PullClusters(store, is_pull=self.is_pull,
                                 exists=lambda cid: cluster_key(cid) in self.clusters,
                                 fence=shard.fence if shard is not None else lambda _c: None,
                                 idle_timeout=idle, **gate)
        self.pull.on_report.append(concern.on_report)
        self.pull.on_garbage.append(self.queue.add)  # a work written over by hand
        reads = Informed(store, self.bindings, clusters, cluster_statuses, self.overrides,
                         self.global_overrides, self.controls, self.paces, self.transit,
                         self.secrets, Manifests(store), self.pull, self.book, concern.seen,
                         shard, concern.claimable, self.tenancy, self.apps, self.statuses,
                         concern.dependencies, self.verdicts)
        self.facts = FactsBuilder(reads, clock, move_timeout=config.move_timeout)
        authority = shard if shard is not None else Leased(store.holds)
        self.executor = Router(Executor(self, concern.own_writes, self.on_applied, authority),
                               self.pull, self.is_pull)
        self.apps.add_handler(concern.on_app)
        self.bindings.add_handler(concern.on_binding)
        self.statuses.add_handler(concern.on_status)
        self.statuses.add_invalid_handler(concern.on_garbage_status)
        self.secrets.informer.add_handler(concern.on_named)
        self.overrides.add_handler(concern.on_override)
        self.global_overrides.add_handler(concern.on_override)
        self.controls.add_handler(concern.on_named)
        self.verdicts.add_handler(concern.on_named)
        clusters.add_handler(concern.on_cluster)
        cluster_statuses.add_handler(concern.on_cluster_status)
        self.tenancy.listeners.append(concern.on_tenancy)
        # what the process and its watches call
        self.on_drift, self.on_pods = concern.on_drift, concern.on_pods
        self.gained, self.requeue_cluster = concern.gained, concern.requeue_cluster
        self.members_changed = concern.members_changed
        self.claimable = concern.claimable

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return (self.apps, self.bindings, self.statuses, self.secrets.informer,
                self.overrides, self.global_overrides, self.controls, self.paces, self.verdicts,
                *self.tenancy.informers, *self.pull.informers)

    def is_pull(self, cid: str) -> bool:
        """Whether cluster ``cid`` is reached by its agent alone (``spec.mode: Pull``)."""
        view = self.clusters.get(cluster_key(cid))
        return view is not None and view.pull

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

    def resync(self) -> None:
        """Re-apply every application once (and clean up after vanished ones)."""
        self.applies.resync()
        apps, statuses = self.apps.list_keys(), self.statuses.list_keys()  # copies
        for key in {*apps, *map(keys.resource_key_of, statuses)}:
            self.queue.add(key)

    # -- clusters, for the executor (execute.Clients) -------------------------------

    def client(self, cid: str, identity: Identity | None = None) -> ClusterClient | None:
        """The cluster's connection, its calls made as ``identity`` (None: berth's own
        credential); None if the Cluster is gone; Unavailable if unusable."""
        ckey = cluster_key(cid)
        view = self.clusters.get(ckey)
        if view is None:
            return None
        try:
            kubeconfig = self.kubeconfigs.of(ckey, view)
        except ValueError as exc:
            raise Unavailable(f"cluster {cid}: {exc}") from exc
        if not kubeconfig:
            raise Unavailable(f"cluster {cid} has no kubeconfig")
        try:
            conn = self.connections.get(ckey, kubeconfig)
        except Exception as exc:
            raise Unavailable(f"cluster {cid}: unusable kubeconfig: {safe(exc)}") from exc
        return conn.acting_as(identity)

    def unreadable(self, cid: str) -> bool:
        return unreadable(self.store, cluster_key(cid))

    def judge(self, cid: str, ref: KubeObjectRef, obj: KubeObject,
              rules: tuple[HealthRule, ...]) -> Health:
        """The health of an object a cluster just returned (applied a moment ago)."""
        owner = obj.metadata.annotations.get(OWNER, "")
        return judge(observed(obj), age=0.0, pods=self.pods.trouble(cid, owner), rules=rules,
                     untracked_after=self.config.untracked_after,
                     lost=self.pods.lost(cid, owner))

    def seen_owner(self, cid: str, ref: KubeObjectRef) -> str | None:
        return self.book.owner(cid, ref)

    # -- reconcile -------------------------------------------------------------

    def reconcile(self, key: keys.Key) -> Retry | None:
        """facts → plan → execute → write, until the plan finishes; a Retry if not done."""
        ref = keys.parse_key(key)
        doc = self.writer.read(ref.namespace or "", ref.name)
        item = self.apps.item(key)
        since = self.applies.since(key)
        try:
            facts = self.facts.facts(key, doc.namespace, doc.name, doc.state,
                                     item.obj if item else None, since)
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
        self.applies.done(key, since, progress)
        for cid in progress.drifted:  # changed by someone right after our apply
            self.applies.drifted(key, cid)
            self.queue.add(key)
        if isinstance(outcome, Retry):
            return outcome
        return self._finish(key, doc, item, outcome)

    def _finish(self, key: keys.Key, doc: Doc, item: Item[AppView] | None, end: Finish
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
            self.applies.forget(key)
            if had:
                log.info("application %s/%s removed from every cluster%s", doc.namespace,
                         doc.name, " and deleted" if item is not None else "")
        if end.recheck is not None and not end.retry:
            self.queue.add_after(key, end.recheck)  # a copy not yet available: judge again
        return Retry(end.retry) if end.retry else None
