"""The agent of one pull cluster: its work carried out, reported, and its heartbeat.

Started by the leading agent replica (``berth agent``: the election key is the
heartbeat, on the leader's lease; every write is fenced by its term).

* **Work.** An informer of ``/berth/v1/work/<cluster>/`` queues each work; a
  worker carries it out with the propagator's :class:`~..execute.Executor` —
  the same owner checks, records before applies, prunes and deletes — on this
  cluster's API, and writes the work's :class:`Report`: the revision of the
  work acted on, what is there, its health, an error (retried with backoff)
  or a refusal (not retried until the work changes). Objects are recorded in
  the report before they are applied, so nothing is forgotten.
* **Health** is judged per kind from what the cluster answered and showed
  since through the drift watches (``objects.judge_copy``, the propagator's
  rule), with the Pods' reasons from the Pod tracker; a change is reported.
* **Drift**: the same drift watches re-apply a work whose objects someone
  else changed or deleted (a Job deleted after it completed is not run
  again); every ``resync_interval`` every work is applied again.
* **Delete** only what a work says to delete — what was decided before this
  agent began to lead (a backlog: it was away, or restarting), at most a bounded
  share of the cluster at once (``budget.py``); every removal is written down in
  etcd first, fenced, so a deposed agent begins none. A work that vanished
  without saying Delete deletes nothing: its objects stay, its report says so.
* **Heartbeat** (``beat.py``): the cluster probed and said, on the leader's
  lease, which is the agent's liveness.

Cut off from etcd, the agent stops when its lease ends (the election), and
its cluster keeps running what it has; when etcd answers again a new agent
lists the works as they are then and carries them out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

import msgspec

from berth.controllers.propagator.agent.beat import Beat
from berth.controllers.propagator.agent.budget import Budget, Kept
from berth.controllers.propagator.agent.config import AgentConfig
from berth.controllers.propagator.agent.join import Credentials, Keeper, Renewal
from berth.controllers.propagator.agent.reports import Reports
from berth.controllers.propagator.authority import Leased
from berth.controllers.propagator.capacity import Tracker
from berth.controllers.propagator.drift import DriftWatches, OwnWrites
from berth.controllers.propagator.execute import Executor
from berth.controllers.propagator.health import HEALTHY, Health, judge, with_copy
from berth.controllers.propagator.kube import (
    OWNER,
    Connection,
    Connections,
    KubeObject,
    Probe,
    Unavailable,
    safe,
)
from berth.controllers.propagator.objects import Book, judge_copy, observed
from berth.controllers.propagator.plan import (
    RECHECK,
    App,
    Apply,
    Clear,
    Progress,
)
from berth.controllers.propagator.watches import Hub
from berth.controllers.runtime import Event, Informer, Retry, WorkQueue, start_workers
from berth.controllers.runtime.election import default_identity
from berth.controllers.runtime.supervise import Loop
from berth.store import Store, keys
from berth.store.documents import (
    ApplicationState,
    ClusterApplied,
    HealthRule,
    KubeObjectRef,
    Reachability,
)
from berth.store.documents.tenancy import Identity
from berth.store.documents.work import (
    Intent,
    Report,
    ReportState,
    Work,
    WorkMeta,
)

log = logging.getLogger(__name__)

class Agent:
    def __init__(self, store: Store, config: AgentConfig, *, cluster: str,
                 kubeconfig: dict[str, Any], identity: str | None = None,
                 credentials: Credentials | None = None, keeper: Keeper | None = None
                 ) -> None:
        keys.work_prefix(cluster)  # a valid cluster id, or ValueError now
        self.store = store
        self.config = config
        self.cid = cluster
        self.identity = identity or default_identity()
        # the etcd credential: when it expires (the heartbeat says), renewed in time
        self.renewal = Renewal(store, credentials, keeper)
        self.kubeconfig = kubeconfig
        self.ckey = keys.resource_key("Cluster", *reversed(cluster.split("/", 1)))
        idle = config.watch_idle_timeout
        self.works: Informer[Work] = Informer(
            store, keys.work_prefix(cluster), Work, idle_timeout=idle,
            layout=keys.cluster_key_problem)
        self.works.add_handler(self._on_work)
        self.reports = Reports(store, cluster, idle_timeout=idle)
        self.reports.on_garbage.append(lambda rkey: self.queue.add(_work_of(rkey)))
        self.beat = Beat(store, config, cluster, self.identity, probe=self._probe,
                         capacity=lambda wait: self.tracker.first(wait) if self.tracker else None,
                         held=lambda: self._held, renewal=self.renewal)
        self.queue: WorkQueue[keys.Key] = WorkQueue(base_delay=config.retry_base_delay,
                                               max_delay=config.retry_max_delay)
        self.connections = Connections(config.request_timeout)
        self.book = Book(self._on_seen)
        self.own_writes = OwnWrites()
        self.drift_hub = Hub("agent-drift-watches")
        self.capacity_hub = Hub("agent-capacity-watches")
        self.drift = DriftWatches(self.connections, self.drift_hub, self._on_drift,
                                  lambda _cid: self.requeue(drifted=True),
                                  known=self.book.held,
                                  server_timeout=config.drift_watch_timeout,
                                  probe_timeout=config.probe_timeout)
        # what it sends the cluster goes out only while its lease surely lives: a paused
        # agent, deposed meanwhile, sends nothing more when it resumes (tenure.py)
        self.executor = Executor(self, self.own_writes, [self._applied], Leased(store.holds))
        self.budget = Budget(config.delete_share, config.delete_least, config.delete_window)
        self.kept = Kept(store, cluster)  # the budget's removals, in etcd
        self._listed = 0  # the works' revision when this agent began: its backlog's end
        self.tracker: Tracker | None = None
        self._lock = threading.Lock()
        self._epoch = 1  # bumped by every resync: every work is applied again once
        self._applied_epoch: dict[str, int] = {}  # work key → the epoch it was applied in
        self._drifted: set[str] = set()  # work keys someone else changed on the cluster
        self._kept: set[str] = set()  # works that vanished, their objects kept (said once)
        self._held = ""  # why removals wait, for the heartbeat
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._resync = Loop("resync", self._resync_step, deadline=config.resync_interval + 60)
        self._started = False

    # -- running ------------------------------------------------------------------------

    def start(self, sync_timeout: float = 60.0) -> None:
        for inf in self.informers:
            inf.start()
        for inf in self.informers:
            if not inf.wait_synced(sync_timeout):
                raise TimeoutError(f"the agent did not sync {inf.prefix} with etcd")
        self.connection()  # an unusable kubeconfig is said now
        self._listed = self.works.revision  # what was decided before this agent led
        self.budget = Budget(self.config.delete_share, self.config.delete_least,
                             self.config.delete_window, taken=self.kept.read())
        if self.config.capacity:
            self._track()
        self._started = True
        self._threads = [
            *start_workers(self.queue, self.reconcile, self.config.workers, name="apply"),
            # reports a copy whose state turned while every worker applies
            *start_workers(self.queue, self.reconcile, 1, name="judge", urgent_only=True)]
        self.beat.start()
        self._resync.start()
        self.requeue()
        log.info("agent %s of cluster %s: %d works", self.identity, self.cid, len(self.works))

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return self.works, self.reports.informer, self.beat.informer

    def ready(self) -> bool:
        return self._started and self.works.synced.is_set()

    def alive(self) -> bool:
        return (not self._started) or (
            self.beat.alive() and self._resync.alive() and self.drift_hub.alive()
            and self.capacity_hub.alive() and all(t.is_alive() for t in self._threads)
            and all(inf.alive() for inf in self.informers))

    def stop(self) -> None:
        """Works in flight end first (they may start watches), then the watches."""
        self._stop.set()
        self._resync.halt()
        self.queue.shutdown()
        for t in self._threads:
            t.join(timeout=self.config.request_timeout + 5)
        self.drift_hub.stop()
        self.capacity_hub.stop()
        self.beat.stop()
        self._resync.stop()
        for inf in self.informers:
            inf.stop(wait=False)
        for inf in self.informers:
            inf.join()
        self.connections.close()

    def requeue(self, *, drifted: bool = False) -> None:
        """Every work (and every report of a work that vanished) again."""
        for key in {*self.works.list_keys(), *map(_work_of, self.reports.names())}:
            if drifted:
                with self._lock:
                    self._drifted.add(key)
            self.queue.add(key)

    def _resync_step(self) -> None:
        if self._stop.wait(self.config.resync_interval):
            return
        with self._lock:
            self._epoch += 1
        self.requeue()

    # -- the cluster, for the executor -----------------------------------------------

    def connection(self) -> Connection:
        try:
            return self.connections.get(self.ckey, self.kubeconfig)
        except Exception as exc:
            raise Unavailable(f"cluster {self.cid}: unusable kubeconfig: {safe(exc)}") from exc

    def client(self, cid: str, identity: Identity | None = None) -> Connection | None:
        return self.connection().acting_as(identity) if cid == self.cid else None

    def unreadable(self, cid: str) -> bool:
        return False

    def judge(self, cid: str, ref: KubeObjectRef, obj: KubeObject,
              rules: tuple[HealthRule, ...]) -> Health:
        owner = obj.metadata.annotations.get(OWNER, "")
        return judge(observed(obj), age=0.0, pods=self.trouble(cid, owner), rules=rules,
                     untracked_after=self.config.untracked_after, lost=self.lost(cid, owner))

    def seen_owner(self, cid: str, ref: KubeObjectRef) -> str | None:
        return self.book.owner(cid, ref)

    def trouble(self, cid: str, owner: str) -> str:
        return self.tracker.trouble(owner) if self.tracker is not None else ""

    def lost(self, cid: str, owner: str) -> int:
        return self.tracker.lost(owner) if self.tracker is not None else 0

    def _applied(self, cid: str, kind: Any, ref: KubeObjectRef, stored: KubeObject) -> None:
        self.book.put(cid, ref, stored, answer=True)
        if not self._stop.is_set():
            self.drift.ensure(cid, self.ckey, kind)

    def _track(self) -> None:
        conn = self.connection()
        self.tracker = Tracker(conn.config.cluster.server, self.capacity_hub.of(conn.server, conn),
                               self.beat.wake.set, self._on_pods).start()

    # -- events ---------------------------------------------------------------------------

    def _on_work(self, event: Event[Work]) -> None:
        self.queue.add(event.key)

    def _on_pods(self, owner: str) -> None:
        namespace, _, name = owner.partition("/")
        if namespace and name:
            self.queue.add(keys.work_key(self.cid, namespace, name))

    def _on_seen(self, cid: str, owner: str) -> None:
        """What the cluster shows of an application's objects changed: judged again —
        ahead of every work that waits when its copy's state turned (available now, or
        failed), as the propagator records a push cluster's (its queue's urgent line):
        the application's status waits for this report."""
        namespace, _, name = owner.partition("/")
        if not (namespace and name):
            return
        key = keys.work_key(self.cid, namespace, name)
        self.queue.add(key, urgent=self._turned(key, owner))

    def _turned(self, key: keys.Key, owner: str) -> bool:
        """Whether the copy, judged as the cluster shows it now, is in another state than
        its report says."""
        report, _ = self.reports.read(_report_of(key))
        have = report.status.applied if report is not None else None
        item = self.works.item(key)
        if have is None or have.generation <= 0 or item is None:
            return False
        judged = self._judged(have, owner, tuple(item.obj.spec.rules))
        return judged.health != have.health

    def _on_drift(self, cids: Collection[str], event_type: str, obj: KubeObject) -> None:
        """What the cluster shows of an object berth manages: into the book, and the
        work applied again if someone other than berth changed or deleted it."""
        meta = obj.metadata
        owner = meta.annotations.get(OWNER, "")
        ref = KubeObjectRef(obj.apiVersion, obj.kind, meta.name, meta.namespace)
        deleted = event_type == "DELETED"
        if deleted:
            self.book.drop(self.cid, ref)
        else:
            self.book.put(self.cid, ref, obj)
        namespace, _, name = owner.partition("/")
        if not (namespace and name) or not self.own_writes.someone_else(
                self.cid, ref, meta.resourceVersion, meta.generation, deleted=deleted):
            return
        key = keys.work_key(self.cid, namespace, name)
        report, _ = self.reports.read(_report_of(key))
        have = report.status.applied if report is not None else None
        if have is None or ref not in have.objects:
            return  # not one of this cluster's works' objects (a push propagator's, once)
        if deleted and ref in have.done:
            log.info("%s was deleted after it completed: not run again", ref)
            return
        log.info("%s was %s by someone else: applying %s again", ref,
                 "deleted" if deleted else "changed", owner)
        with self._lock:
            self._drifted.add(key)
        self.queue.add(key)

    # -- carrying out a work ----------------------------------------------------------------

    def reconcile(self, key: keys.Key) -> Retry | None:
        rkey = _report_of(key)
        item = self.works.item(key)
        report, _ = self.reports.read(rkey)
        ref = keys.parse_cluster_key(key)
        meta = WorkMeta(ref.name, ref.namespace, self.cid)
        if item is None:
            return self._vanished(key, rkey, report)
        with self._lock:
            self._kept.discard(key)
        work, revision = item.obj, item.mod_revision
        named = work.metadata
        if (named.name, named.namespace, named.cluster) != (ref.name, ref.namespace, self.cid):
            log.error("%s: names %s/%s on %s, not the key's: not carried out", key,
                      named.namespace, named.name, named.cluster)
            return None
        if work.spec.intent is Intent.DELETE:
            return self._remove(key, rkey, meta, work, revision, report)
        return self._apply(key, rkey, meta, work, revision, report)

    def _vanished(self, key: keys.Key, rkey: keys.Key, report: Report | None) -> Retry | None:
        """A work gone without saying Delete: nothing is removed (only a newer decision
        removes); a report of nothing left goes with it."""
        if report is None:
            return None
        have = report.status.applied
        if report.status.cleared or have is None or not have.objects:
            self.reports.remove(rkey)
            return None
        with self._lock:
            said = key in self._kept
            self._kept.add(key)
        if not said:
            log.warning("the work %s is gone without saying Delete: its objects (%s) stay "
                        "on the cluster", key, ", ".join(map(str, have.objects)))
        return None

    def _apply(self, key: keys.Key, rkey: keys.Key, meta: WorkMeta, work: Work, revision: int,
               report: Report | None) -> Retry | None:
        spec = work.spec
        st = report.status if report is not None else ReportState()
        if st.work == revision and st.refused:
            return None  # refused as it is: not again until the work changes
        have = st.applied
        owner = f"{meta.namespace}/{meta.name}"
        rules = tuple(spec.rules)
        with self._lock:
            epoch = self._epoch
            drifted = key in self._drifted
        due = (st.work != revision or bool(st.error) or drifted or have is None
               or self._applied_epoch.get(key) != epoch or st.intent is not Intent.APPLY
               or bool(have.waiting)  # a step waits: applied again until none does
               or bool(spec.observe))  # another tool's copy: read again each time
        if not due and have is not None:  # nothing to apply: judge what is there
            judged = self._judged(have, owner, rules)
            if judged != have or self.reports.garbled(rkey):
                self._report(rkey, meta, revision, judged)
            self._recheck(key, judged)
            return None
        with self._lock:
            self._drifted.discard(key)
        now = datetime.now(UTC)
        same = have is not None and have.generation == spec.generation and (
            have.replicas == spec.replicas)
        since = have.since if same and have is not None and have.since else now
        applied = {self.cid: have} if have is not None else {}
        progress = Progress(applied, ApplicationState(applied=dict(applied)))
        step = Apply(self.cid, spec.generation, spec.replicas, since, skip=tuple(spec.skip),
                     owner=owner, bodies=tuple(spec.objects), identity=spec.identity)
        app = App(spec.generation, bodies=tuple(spec.objects), rules=rules, adopt=spec.adopt,
                  propagation=spec.propagation, observe=tuple(spec.observe))

        def record(state: ApplicationState) -> Retry | None:
            """Objects about to be applied, recorded first (not yet for this work)."""
            written = state.applied.get(self.cid)
            if not self.reports.write(rkey, Report(meta, msgspec.structs.replace(
                    st, applied=written))):
                return Retry("the report changed meanwhile")
            return None

        halt = self.executor.apply(step, app, progress, record)
        if halt is not None:
            return halt
        got = progress.applied.get(self.cid)
        if progress.refused is not None:
            self._report(rkey, meta, revision, got, refused=progress.refused[1])
            log.warning("cluster %s refused %s: %s", self.cid, owner, progress.refused[1])
            return None
        error = progress.errors.get(self.cid, "")
        if got is not None:
            copy = progress.health.get(self.cid)
            got = msgspec.structs.replace(got, since=since)
            got = with_copy(got, copy) if copy is not None else self._judged(got, owner, rules)
        if not self._report(rkey, meta, revision, got, error=error):
            return Retry("the report changed meanwhile")
        if error:
            return Retry(error)
        with self._lock:
            self._applied_epoch[key] = epoch
        if got is not None:
            self._recheck(key, got)
        return None

    def _recheck(self, key: keys.Key, have: ClusterApplied) -> None:
        """A copy not yet healthy is judged again within ``RECHECK`` seconds: a kind
        berth cannot judge counts as available ``untracked_after`` seconds after it
        was applied, with no event to say so."""
        if have.health != HEALTHY:
            self.queue.add_after(key, RECHECK)

    def _remove(self, key: keys.Key, rkey: keys.Key, meta: WorkMeta, work: Work, revision: int,
                report: Report | None) -> Retry | None:
        st = report.status if report is not None else ReportState()
        if st.work == revision and st.cleared:
            return None
        have = st.applied
        if have is None or not have.objects:
            self._report(rkey, meta, revision, None, intent=Intent.DELETE, cleared=True)
            return None
        # Bounded: what was decided before this agent began to lead (its backlog, found
        # when it listed the works: after a restart, a lost lease, a time cut off). A
        # removal decided while it leads is the fleet's pace's to bound, upstream.
        backlog = revision <= self._listed
        held, at = self.budget.take(self._on_cluster()) if backlog else ("", 0.0)
        if not held and not self.kept.write(self.budget.times()):  # fenced: a deposed
            # agent removes nothing
            if backlog:
                self.budget.give_back(at)  # not recorded: not begun
            return Retry("the removal could not be recorded in etcd")
        self._hold(held)
        if held:
            self._report(rkey, meta, st.work, have, intent=st.intent, held=held)
            return Retry(held, after=self.budget.retry_after())
        progress = Progress({self.cid: have}, ApplicationState())
        self.executor.clear(Clear(self.cid, f"{meta.namespace}/{meta.name}",
                                  work.spec.identity), progress, work.spec.propagation)
        left = progress.applied.get(self.cid)
        error = progress.errors.get(self.cid, "")
        self._report(rkey, meta, revision, left, intent=Intent.DELETE, error=error,
                     cleared=left is None)
        with self._lock:
            self._applied_epoch.pop(key, None)
        if left is None:
            log.info("%s/%s removed from cluster %s", meta.namespace, meta.name, self.cid)
        return Retry(error) if error else None

    def _on_cluster(self) -> int:
        """How many applications have objects on the cluster (as reported)."""
        count = 0
        for rkey in self.reports.names():
            report, _ = self.reports.read(rkey)
            have = report.status.applied if report is not None else None
            if have is not None and have.objects:
                count += 1
        return count

    def _hold(self, why: str) -> None:
        """Say that removals wait (once as they begin to, once as they go on again); the
        heartbeat carries the latest count."""
        if why == self._held:
            return
        if why and not self._held:
            log.warning("cluster %s: removals %s", self.cid, why)
        elif self._held and not why:
            log.info("cluster %s: removals go on (the window moved on)", self.cid)
        self._held = why
        self.beat.wake.set()

    def _judged(self, have: ClusterApplied, owner: str, rules: tuple[HealthRule, ...]
                ) -> ClusterApplied:
        copy = judge_copy(self.book, self, self.cid, owner, have, rules, datetime.now(UTC),
                          self.config.untracked_after)
        return with_copy(have, copy)

    def _report(self, rkey: keys.Key, meta: WorkMeta, revision: int, applied: ClusterApplied | None,
                *, intent: Intent = Intent.APPLY, error: str = "", refused: str = "",
                cleared: bool = False, held: str = "") -> bool:
        return self.reports.write(rkey, Report(meta, ReportState(
            revision, intent, applied, error, refused, cleared, held)))

    def _probe(self) -> Probe:
        """What the heartbeat says of the cluster: its probe."""
        try:
            conn = self.connection()
        except Unavailable as exc:
            return Probe(Reachability.OFFLINE, str(exc))
        return conn.probe(self.config.probe_timeout)


def _report_of(work_key: str) -> keys.Key:
    ref = keys.parse_cluster_key(work_key)
    return keys.report_key(ref.cluster, ref.namespace, ref.name)


def _work_of(report_key: str) -> keys.Key:
    ref = keys.parse_cluster_key(report_key)
    return keys.work_key(ref.cluster, ref.namespace, ref.name)


__all__ = ["Agent"]
