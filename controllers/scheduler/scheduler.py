"""The scheduler: queue → pre-filter → filter → score → select → reserve → permit → bind.

One generic pipeline for every kind placed: Applications on Clusters, and
Clusters without a kubeconfig on Clouds. Subjects naming another scheduler
(``schedulerName``) are left alone; subjects being deleted keep their Binding
(the propagator cleans up); a Binding whose subject vanished is deleted.

Rescheduling: every ``reschedule_after`` seconds, and whenever a candidate,
its status or a metric changes, each placed subject is decided again;
stickiness keeps it where it is unless another candidate is better by more
than the stickiness. ``spec.migration: false`` (or Krake's
``constraints.migration: false``) never moves a placed subject, and
``placement.ignoredDuringExecution`` keeps feasible targets until the spec
changes. A Cluster, once placed on a Cloud, stays there (seed 000).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Histogram

from controllers.runtime import Event, EventType
from controllers.scheduler.binder import BindingWriter, Write
from controllers.scheduler.cache import Cache
from controllers.scheduler.config import SchedulerConfig
from controllers.scheduler.framework import Code, CycleState, Framework, Subject
from controllers.scheduler.framework.types import candidate_key
from controllers.scheduler.plugins import REGISTRY
from controllers.scheduler.queue import SchedulingQueue
from controllers.scheduler.selection import explanation, select, summary, targets
from controllers.scheduler.views import AppView, BindingView, ClusterView
from store import Store, keys
from store.documents import (
    Binding,
    BindingMeta,
    BindingSpec,
    BindingStatus,
    ObjectRef,
    Target,
)

log = logging.getLogger(__name__)

ATTEMPTS = Counter("berth_scheduler_attempts_total", "Scheduling attempts", ["result"])
LATENCY = Histogram("berth_scheduler_attempt_seconds", "Time of one scheduling attempt")


Explained = list[dict[str, Any]] | Callable[[], list[dict[str, Any]]]
SWEEP = "<sweep>"  # a queue item: check every placed subject after a change


def _refs(ts: list[Target]) -> frozenset[tuple[str, str | None, str]]:
    return frozenset((t.kind, t.namespace, t.name) for t in ts)


class Scheduler:
    def __init__(self, store: Store, config: SchedulerConfig, *,
                 idle_timeout: float = 30.0) -> None:
        self.store = store
        self.config = config
        self.cache = Cache(store, idle_timeout=idle_timeout)
        self.framework = Framework(config, REGISTRY, shared={
            "stickiness_weight": config.stickiness_weight, "submit": self._submit})
        self.queue = SchedulingQueue(
            self._sort_key, initial_backoff=config.backoff.initial,
            max_backoff=config.backoff.max, flush_every=config.unschedulable_flush)
        self.writer = BindingWriter(store, self.cache, batch=config.bind_batch,
                                    retry=self.queue.add)
        self._stop = threading.Event()
        self._resync = threading.Event()
        self._waiting_on_placements: set[str] = set()
        self._attempts: dict[str, Any] = {}  # result → its counter child
        # Subjects held at permit (gangs): key → (state, subject, targets, deadline).
        self._waiting: dict[str, tuple[CycleState, Subject, list[Target], float]] = {}
        self._group: list[Write] | None = None
        self._threads: list[threading.Thread] = []
        self.cache.applications.add_handler(self._on_subject)
        self.cache.clusters.add_handler(self._on_subject)
        self.cache.bindings.add_handler(self._on_binding)
        self.cache.on_candidates_changed(lambda _e: self._resync.set())

    # -- running -----------------------------------------------------------------

    def start(self, *, sync_timeout: float = 60.0) -> None:
        self.cache.start()
        if not self.cache.wait_synced(sync_timeout):
            raise TimeoutError("the scheduler cache did not sync with etcd")
        # The synced cache is long-lived: keep the collector from rescanning it
        # (a full collection over a large fleet pauses every thread for 100s of ms).
        gc.collect()
        gc.freeze()
        self.writer.start()
        for target, name in ((self._loop, "scheduling"), (self._resync_loop, "resync")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def ready(self) -> bool:
        return all(inf.synced.is_set() for inf in self.cache.informers)

    def stop(self) -> None:
        self._stop.set()
        self._resync.set()
        self.queue.close()
        for t in self._threads:
            t.join(timeout=10)
        self.writer.stop()
        self.cache.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            key = self.queue.pop(timeout=1.0)
            self._expire_waiting()
            if key is None:
                continue
            if key == SWEEP:
                self.queue.done(key)
                self._sweep()
                continue
            began = time.perf_counter()
            try:
                result = self.schedule_one(key)
            except Exception:
                log.exception("%s: scheduling failed", key)
                ATTEMPTS.labels("error").inc()
                self.queue.failed(key)
            else:
                counter = self._attempts.get(result)
                if counter is None:
                    counter = self._attempts[result] = ATTEMPTS.labels(result)
                counter.inc()
            finally:
                LATENCY.observe(time.perf_counter() - began)
                self.queue.done(key)

    def _resync_loop(self) -> None:
        """After candidates or metrics change, ask the scheduling thread for a sweep."""
        while not self._stop.is_set():
            self._resync.wait()
            if self._stop.is_set():
                return
            time.sleep(0.1)  # let a burst of changes settle into one pass
            self._resync.clear()
            self.queue.add(SWEEP)

    def _sweep(self) -> None:
        """Flush the waiting; queue each placed subject whose decision would change.

        Checking is cheap (the evaluations are memoized per constraint set), so
        only the subjects that actually move pay for a full attempt, and they
        move at once rather than after every other subject has been retried.
        """
        began = time.perf_counter()
        self.queue.move_all_to_active()
        queued = 0
        # Subjects alike (same constraints, same current targets) get the same
        # answer: decide it once per group, not once per subject.
        answers: dict[tuple[Any, ...], bool] = {}
        per_subject = bool(self.config.extenders)
        for item in self.cache.bindings.items():
            ref = item.obj.spec.resource
            if not item.obj.spec.targets or ref.kind != "Application":
                continue
            key = keys.resource_key(ref.kind, ref.name, ref.namespace)
            subject = self.cache.subject(key)
            if subject is None:
                continue
            aff = subject.affinity
            alone = per_subject or (aff is not None and bool(
                aff.workload_affinity or aff.workload_anti_affinity))
            p = subject.placement
            group = (subject.signature, _refs(item.obj.spec.targets), subject.migration,
                     p.ignored_during_execution, p.number_of_clusters,
                     item.obj.spec.generation == subject.generation, subject.deleted,
                     key if alone else None)
            answer = answers.get(group)
            if answer is None:
                answer = answers[group] = self._would_change(subject)
            if answer:
                self.queue.add(key)
                queued += 1
        log.debug("sweep: %d subjects to decide again (%.3fs)", queued,
                  time.perf_counter() - began)

    def _would_change(self, subject: Subject) -> bool:
        binding, _ = self.cache.binding(subject)
        if binding is None or subject.deleted or binding.spec.generation != subject.generation:
            return True
        current = list(binding.spec.targets)
        if not subject.migration:
            return not all(self._exists(t) for t in current)
        state = CycleState(current=current, record=False)
        if not self.framework.pre_filter(state, subject, self.cache).ok:
            return True
        evaluation = self.framework.evaluate(state, subject, self.cache)
        if not evaluation.ranked or evaluation.error is not None:
            return True
        chosen = select(subject, evaluation.ranked, current,
                        keep_current=subject.placement.ignored_during_execution,
                        fill=self.framework.selector(state))
        return _refs(targets(chosen)) != _refs(current)

    # -- events --------------------------------------------------------------------

    def _on_subject(self, event: Event[Any]) -> None:
        obj = event.obj
        if isinstance(obj, ClusterView) and obj.has_kubeconfig:
            return  # an existing Kubernetes cluster: a candidate, not a subject
        if event.type is EventType.DELETED:
            self.queue.forget(event.key)
        if isinstance(obj, AppView | ClusterView):
            self.queue.add(event.key)

    def _on_binding(self, event: Event[BindingView]) -> None:
        # A placement changed: subjects waiting on workload affinity may fit now.
        if self._waiting_on_placements:
            self.queue.activate(set(self._waiting_on_placements))
        if event.type is EventType.DELETED:  # someone removed our decision: decide again
            ref = event.obj.spec.resource
            try:
                self.queue.add(keys.resource_key(ref.kind, ref.name, ref.namespace))
            except (KeyError, ValueError):
                log.warning("Binding %s names no valid resource", event.key)

    def _sort_key(self, key: str, enqueued: float) -> tuple[Any, ...]:
        if key == SWEEP:
            return (float("-inf"), enqueued)
        subject = self.cache.subject(key)
        if subject is None:
            return (0, enqueued)
        return self.framework.sort_key(subject, enqueued)

    # -- one attempt ------------------------------------------------------------------

    def schedule_one(self, key: str) -> str:
        """Decide for the subject at ``key``; returns what happened (for metrics)."""
        subject = self.cache.subject(key)
        if subject is None:
            return self._forget(key)
        if subject.deleted:
            return "deleting"
        if subject.scheduler_name and subject.scheduler_name != self.config.scheduler_name:
            return "other-scheduler"
        if subject.ref.kind == "Cluster":
            view = self.cache.clusters.get(key)
            if view is None or view.has_kubeconfig:
                return "not-a-subject"
        binding, _ = self.cache.binding(subject)
        current = list(binding.spec.targets) if binding else []
        if current and not subject.migration:
            alive = [t for t in current if self._exists(t)]
            if alive:
                self._write(subject, binding, alive, "Scheduled",
                            "migration is disabled: staying on the current targets", [])
                return "kept"
            current = []  # everything it ran on is gone: it has to be placed anew

        self._waiting.pop(key, None)  # a new attempt replaces a held one
        state = CycleState(current=current)
        status = self.framework.pre_filter(state, subject, self.cache)
        if not status.ok:
            reason = f"{status.plugin}: {status.reason}" if status.reason else str(status)
            return self._unschedulable(subject, binding, current, reason, [])
        evaluation = self.framework.evaluate(state, subject, self.cache)
        if evaluation.error is not None:  # a score plugin failed: retry with backoff
            self.queue.failed(key)
            return "error"
        if not evaluation.ranked:
            self.framework.post_filter(state, subject, evaluation.rejected)
            return self._unschedulable(subject, binding, current,
                                       summary(subject.candidate_kind, evaluation),
                                       explanation(evaluation, {}, self.config.explain_limit))
        keep = subject.placement.ignored_during_execution and bool(binding) and (
            binding.spec.generation == subject.generation if binding else False)
        chosen = select(subject, evaluation.ranked, current, keep_current=keep,
                        fill=self.framework.selector(state))
        new = targets(chosen)
        # Explaining costs more than deciding: only done if the Binding is written.
        state.data["decision"] = (
            summary(subject.candidate_kind, evaluation),
            lambda: explanation(evaluation, self._describe(state, subject, chosen),
                                self.config.explain_limit))
        status = self.framework.reserve(state, subject, new)
        if status.ok:
            status = self.framework.permit(state, subject, new)
        if status.code is Code.WAIT:
            self._waiting[key] = (state, subject, new, time.monotonic() + status.timeout)
            return "waiting"
        if not status.ok:
            self.framework.unreserve(state, subject, new)
            self.queue.failed(key)
            return "not-permitted"
        released = [self._waiting.pop(k) for k in state.allow if k in self._waiting]
        if not self._bind_together([(state, subject, new), *[w[:3] for w in released]]):
            return "bind-failed"
        for _, other, _, _ in released:
            self._after_bind(other)
        self._after_bind(subject)
        return "scheduled"

    def _bind_together(self, members: list[tuple[CycleState, Subject, list[Target]]]) -> bool:
        """Bind one subject, or a released gang in one transaction."""
        self._group = [] if len(members) > 1 else None
        try:
            for state, subject, new in members:
                status = self.framework.bind(state, subject, new)
                if not status.ok:
                    for s, subj, t in members:
                        self.framework.unreserve(s, subj, t)
                        self.queue.failed(subj.key)
                    return False
            if self._group is not None:
                self.writer.commit_group(self._group)
            return True
        finally:
            self._group = None

    def _expire_waiting(self) -> None:
        now = time.monotonic()
        for key, (state, subject, new, deadline) in list(self._waiting.items()):
            if deadline > now:
                continue
            del self._waiting[key]
            self.framework.unreserve(state, subject, new)
            for plugin in self.framework.plugins("permit"):
                reject = getattr(plugin, "reject", None)
                if reject is not None:
                    reject(subject)
            binding, _ = self.cache.binding(subject)
            gang = subject.gang
            self._write(subject, binding, state.current, "Unschedulable",
                        f"gang {gang.name if gang else '?'}: not enough members in time", [])
            self.queue.failed(key)

    def _after_bind(self, subject: Subject) -> None:
        key = subject.key
        self.queue.succeeded(key)
        self._waiting_on_placements.discard(key)
        if subject.migration and not subject.placement.ignored_during_execution:
            self.queue.add_after(key, self.config.reschedule_after)

    def _describe(self, state: CycleState, subject: Subject,
                  chosen: list[Any]) -> dict[str, dict[str, Any]]:
        details: dict[str, dict[str, Any]] = {}
        for describe in self.framework.describers:
            for r in chosen[: self.config.explain_limit]:
                details.setdefault(r.candidate.key, {}).update(
                    describe(state, subject, r.candidate, self.cache))
        return details

    # -- outcomes ------------------------------------------------------------------------

    def _submit(self, state: CycleState, subject: Subject, new: list[Target]) -> None:
        """DefaultBinder's writer: a Binding with ``new`` as targets (if anything changed)."""
        binding, _ = self.cache.binding(subject)
        reason, explained = state.data.get("decision", ("", []))
        self._write(subject, binding, new, "Scheduled", reason, explained)

    def _exists(self, t: Target) -> bool:
        c = self.cache.candidate_by_key(candidate_key(t.kind, t.namespace, t.name))
        return c is not None and not c.deleted

    def _unschedulable(self, subject: Subject, binding: BindingView | None, current: list[Target],
                       reason: str, explained: Explained) -> str:
        # Keep what runs where it runs: a brief outage of every cluster must not
        # tear the application down. The reason says it does not fit anymore.
        self._write(subject, binding, current, "Unschedulable", reason, explained)
        self.queue.unschedulable_now(subject.key)
        aff = subject.affinity
        if aff is not None and (aff.workload_affinity or aff.workload_anti_affinity):
            self._waiting_on_placements.add(subject.key)
        return "unschedulable"

    def _write(self, subject: Subject, binding: BindingView | None, new: list[Target], state: str,
               reason: str, explained: Explained) -> None:
        ref = subject.ref
        same_targets = binding is not None and _refs(binding.spec.targets) == _refs(new)
        if (binding is not None and same_targets and binding.spec.generation == subject.generation
                and binding.status.state == state and (
                    state == "Scheduled" or binding.status.reason == reason)):
            return  # nothing an observer would see has changed
        now = datetime.now(UTC)
        scheduled = binding.spec.scheduled if binding is not None and same_targets else (
            now if new else None)
        doc = Binding(
            metadata=BindingMeta(name=ref.name, namespace=ref.namespace,
                                 created=binding.metadata.created if binding else now,
                                 modified=now),
            spec=BindingSpec(resource=ObjectRef(ref.kind, ref.name, ref.namespace),
                             generation=subject.generation, targets=new, scheduled=scheduled),
            status=BindingStatus(state=state, reason=reason,
                                 explanation=explained() if callable(explained) else explained),
        )
        write = Write(subject.key, subject.binding_key, doc)
        if self._group is not None:
            self._group.append(write)
        else:
            self.writer.submit(write)

    def _forget(self, key: str) -> str:
        self.queue.forget(key)
        try:
            ref = keys.parse_key(key)
        except ValueError:
            return "gone"
        bkey = keys.binding_key(ref.kind.name, ref.namespace or "", ref.name)
        if bkey in self.cache.bindings.cache or bkey in self.cache.assumed:
            self.writer.submit(Write(key, bkey, None))
            return "binding-deleted"
        return "gone"
