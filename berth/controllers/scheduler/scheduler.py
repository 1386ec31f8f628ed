"""The scheduler: queue → decide → reserve → permit → bind → write the Binding.

One generic pipeline for every kind placed: Applications on Clusters, and
Clusters without a kubeconfig on Clouds. Subjects naming another scheduler
(``schedulerName``) are left alone; subjects being deleted keep their Binding
(the propagator cleans up); a Binding whose subject vanished is deleted.

Every decision is made by :func:`decide` on one frozen fleet; what it makes the
scheduler do (hold, defer, retry, make room, Unschedulable, place) is the value
:func:`acts.act` returns, carried out in :meth:`Scheduler._act`. Every Binding the
scheduler writes — a decision's, a held move's, a placement kept as it is, deferred
work, nothing fitting, a gang out of time — is an :class:`~outcome.Outcome` made a
write by the one pure function :func:`~outcome.binding_write`, and goes through the
one Binding writer (:mod:`binder`), as does the deletion of a Binding whose subject
is gone.

Rescheduling: every ``reschedule_after`` seconds, and whenever a candidate,
its status or a metric changes, each placed subject is decided again — by a
sweep that acts on each changed decision as soon as it is made, a few
milliseconds at a time between other attempts (the periodic one only while
no other attempt waits), subjects with workload affinity last; stickiness
keeps a subject where it is unless another candidate is better by more than
the stickiness. ``spec.migration: false`` (or Krake's
``constraints.migration: false``) never moves a placed subject, nor is an
application moved whose work is done (every Job complete at its generation) — nor
one whose Job still runs, but by force (its cluster gone or no longer fit) — and
``placement.ignoredDuringExecution`` keeps feasible targets until the spec
changes. A Cluster, once placed on a Cloud, stays there (Krake).

Threads: the scheduling loop and the resync loop run supervised (a step that
raises is logged and the loop goes on; :meth:`alive` feeds ``/healthz``); the
Binding writer has its own thread; informers call the event handlers, which
only touch the queue (its own lock) and flags.

Making room (docs/scheduler.md "Priority and preemption"): an application
nothing fits, that may preempt, gets a plan (:func:`preempt.plan`) whose room
its Binding reserves until a deadline; every later look at it carries the
plan on (:func:`makeroom.advance`: the victims' moves as the pace allows, then
the stops) until the room is there and it is placed, or the deadline passes.

Over 600 lines, on purpose: what is left here is the state the scheduling
thread owns (the queue's use, subjects waiting at permit, deferred work, the
sweep in progress, the anti-flap record) and the handlers that feed it, and
where a plan's steps are written; what decides, orders a sweep, plans room,
says what a plan does next, says what an outcome makes it do, says what a Binding
holds or writes it is a module of its own (decide, sweep, preempt, makeroom, acts,
outcome, binder).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, assert_never

from prometheus_client import Counter, Histogram
from prometheus_client.metrics_core import Metric

from berth.controllers.runtime import Event, EventType
from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.controllers.runtime.events import Recorder
from berth.controllers.runtime.observe import LATENCY_BUCKETS, Labelled, Stopwatch, counts
from berth.controllers.runtime.supervise import Loop
from berth.controllers.runtime.transit import transit_id
from berth.controllers.scheduler import acts, makeroom, preempt
from berth.controllers.scheduler.antiflap import AntiFlap, Held
from berth.controllers.scheduler.binder import BindingWriter, Write
from berth.controllers.scheduler.cache import Cache
from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, Deferral, Deferred, NoFit, decide
from berth.controllers.scheduler.framework import Code, Evaluation, Framework, Subject
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.outcome import (
    Explained,
    Outcome,
    binding_write,
    names,
    refs,
    shares,
)
from berth.controllers.scheduler.overlay import Overlay
from berth.controllers.scheduler.plugins import REGISTRY
from berth.controllers.scheduler.preempt import NoPlan, Plan
from berth.controllers.scheduler.priorities import Priority
from berth.controllers.scheduler.queue import SchedulingQueue
from berth.controllers.scheduler.subjects import Failures
from berth.controllers.scheduler.sweep import depends_on_placements, swept
from berth.controllers.scheduler.trim import Trimmer
from berth.controllers.scheduler.views import BindingView, ClusterView, MagnumView
from berth.store import Invalid, Store, decode, encode, keys
from berth.store import ledger as L
from berth.store.documents import BindingState, HeldBy, MovesStarted, Preemption, Target
from berth.store.documents.pace import PaceSpec, effective
from berth.store.documents.resources import Resources
from berth.store.events import WARNING, InvolvedObject
from berth.store.ledger import Stamps

log = logging.getLogger(__name__)

ATTEMPTS = Counter("berth_scheduler_attempts_total", "Scheduling attempts", ["result"])


class Attempt(StrEnum):
    """How a scheduling attempt (or a sweep's look at a placed subject) ended: the
    ``result`` of ``berth_scheduler_attempts_total`` and ``..._swept_total``."""

    SCHEDULED = "scheduled"  # placed or moved (its Binding submitted)
    KEPT = "kept"  # kept where it runs (migration off, or its work done)
    HELD = "held"  # a better placement held back (anti-flap, pace)
    DEFERRED = "deferred"  # deferrable work held Pending until its planned start
    UNSCHEDULABLE = "unschedulable"  # nothing fits
    WAITING = "waiting"  # a permit plugin said wait (a gang waiting for its members)
    NOT_PERMITTED = "not-permitted"  # a reserve or permit plugin said no
    BIND_FAILED = "bind-failed"  # a bind plugin failed
    ERROR = "error"  # an attempt that raised, or a plugin failed (retried with backoff)
    DELETING = "deleting"  # the subject is being deleted
    OTHER_SCHEDULER = "other-scheduler"  # another scheduler's subject
    NOT_A_SUBJECT = "not-a-subject"  # a key that names nothing to place
    GONE = "gone"  # the subject is gone (nothing of it left)
    BINDING_DELETED = "binding-deleted"  # the subject is gone: its Binding deleted
    PREEMPTING = "preempting"  # nothing fits yet: room is being made for it
    AWAITING_VALUES = "awaiting-values"  # a first placement waits for the first metric picture
    QUEUED = "queued"  # a sweep queued it for a full attempt
    UNCHANGED = "unchanged"  # a sweep found its decision unchanged

LATENCY = Histogram("berth_scheduler_attempt_seconds", "Time of one scheduling attempt")
TO_BINDING = Histogram(
    "berth_scheduler_application_to_binding_seconds",
    "From the scheduler seeing an application's new generation to seeing its Binding for it",
    buckets=LATENCY_BUCKETS)
SWEPT = Counter("berth_scheduler_sweep_subjects_total", "Placed subjects decided again by sweeps",
                ["result"])
_ATTEMPTS, _SWEPT = Labelled(ATTEMPTS), Labelled(SWEPT)
MOVED_OFF_FAILED = Counter(
    "berth_scheduler_moves_off_failed_total",
    "Moves away from a target the application could not become available on in time")

SWEEP = "<sweep>"  # a queue item: decide every placed subject again after a change
PERIODIC = "<periodic>"  # the same, when it is time (done while nothing else waits)
PLAN_LOOK = 1.0  # seconds between looks at a running preemption plan
VALUES_LOOK = 0.5  # seconds between looks at a first placement awaiting the metric values
SWEEP_SLICE = 0.005  # seconds a sweep decides before the loop looks at the queue again
ACTIVATE_EVERY = 0.5  # at most this often, placements changing re-activate waiting subjects


@dataclass(slots=True)
class _Held:
    """A subject held at permit (a gang member waiting for the others)."""

    decision: Decision
    binding: BindingView | None
    deadline: float


def check_config(config: SchedulerConfig) -> None:
    """Raise ValueError if the plugin configuration cannot be built (unknown plugin, a
    plugin at a point it does not implement, bad arguments)."""
    Framework(config, REGISTRY)


def framework_for(config: SchedulerConfig) -> Framework:
    """The framework the scheduler decides with (what-if uses the same one)."""
    return Framework(config, REGISTRY, shared={"stickiness_weight": config.stickiness_weight})


class _Looks:
    """What an act asks (:class:`acts.Looks`), of the scheduler's cache, framework and
    anti-flap record."""

    def __init__(self, cache: Cache, framework: Framework, antiflap: AntiFlap,
                 config: SchedulerConfig, clock: Clock) -> None:
        self.cache, self.framework, self.antiflap = cache, framework, antiflap
        self.config, self.clock = config, clock

    def priority(self, subject: Subject) -> Priority:
        return self.cache.priorities.of(subject)

    def pace(self, subject: Subject) -> PaceSpec | None:
        return effective(self.cache.pace(), subject.pace)

    def anything_below(self, priority: int) -> bool:
        # (else no plan is worth starting: a fleet without priorities pays nothing for them)
        lowest = self.cache.priorities.lowest(self.cache.decisions.ranks())
        return lowest is not None and lowest < priority

    def room(self, subject: Subject, priority: int, evaluation: Evaluation) -> Plan | NoPlan:
        p = self.config.preemption
        occupants = makeroom.Occupants(self.cache, self.clock.time(), p.deadline, priority)
        return preempt.plan(self.framework, subject, priority, evaluation, self.cache,
                            occupants, limit=p.candidates, lowest=occupants.lowest)

    def held(self, move: acts.OptionalMove) -> Held | None:
        back = [t for t in (self.cache.returned(t.kind, t.namespace, t.name)
                            for t in move.decision.targets) if t is not None]
        return self.antiflap.check(move.subject.key, move.new, move.names, move.gain,
                                   move.last_move, max(back, default=None), move.pace,
                                   self.cache.transit.count() if move.pace is not None else 0)


class Scheduler:
    def __init__(self, store: Store, config: SchedulerConfig, *,
                 idle_timeout: float = 30.0, clock: Clock = SYSTEM) -> None:
        self.store = store
        self.config = config
        self.clock = clock  # what deadlines, deferral and Bindings' times are read from
        # The leader term this scheduler decides in (0: unfenced, as in tests): every
        # Binding it writes requires it and records it.
        self.term = store.fence.term if store.fence is not None else 0
        self.cache = Cache(store, idle_timeout=idle_timeout, assume_ttl=config.assume_ttl,
                           picture_grace=config.metric_picture_grace, clock=clock)
        self.framework = framework_for(config)
        self.queue = SchedulingQueue(
            self._sort_key, initial_backoff=config.backoff.initial,
            max_backoff=config.backoff.max, flush_every=config.unschedulable_flush)
        # Events (docs/events.md): what the Bindings written say, and each attempt that
        # finds nothing fitting (counted by the recorder), through the fenced store.
        self.events = Recorder(store, "scheduler", ttl=config.event_ttl, clock=clock) if (
            config.events) else None
        self.writer = BindingWriter(store, self.cache.decisions, self._seen_revision,
                                    batch=config.bind_batch, retry=self.queue.add,
                                    say=log.info,
                                    written=self._said if config.events else None)
        self.antiflap = AntiFlap(config.anti_flap, clock=clock.monotonic,
                                 now=clock.now)  # the scheduling loop's own
        self._rules = acts.Rules(preemption=config.preemption.enabled,
                                 antiflap=config.anti_flap.active)
        self._looks = _Looks(self.cache, self.framework, self.antiflap, config, clock)
        self._resync = threading.Event()
        self._burst = threading.Event()  # a change that may be one of several at once
        # A change other than a metric picture since the last sweep began: every
        # unschedulable subject is tried again then, not only those metric values help.
        self._beyond_metrics = threading.Event()
        self._next_periodic = clock.monotonic() + config.reschedule_after
        self._last_activation = 0.0
        # Subjects that may fit once placements change: key → whether a new placement
        # can help (workload affinity) or only one that goes away (anti-affinity, and
        # a namespace's quota).
        self._waiting_on_placements: dict[str, bool] = {}
        self._placements_lock = threading.Lock()
        self._placements_added = threading.Event()
        self._placements_removed = threading.Event()
        # a namespace's use fell (a placement went, or asks less): its applications over
        # its quota may fit now
        self.cache.decisions.on_freed.append(lambda _ns: self._placements_removed.set())
        self._waiting: dict[str, _Held] = {}  # scheduling thread only
        self._deferred: dict[str, float] = {}  # deferred subject → its start (likewise)
        self._started = clock.monotonic()  # again at start(): first_picture_wait counts from it
        self.deferral = Deferral(config.deferral_margin, config.deferral_min_saving)
        self._sweep: Iterator[None] | None = None
        self._sweep_idle = False  # a periodic sweep: only while the queue is empty
        self._loops = [Loop("scheduling", self._step, deadline=60.0),
                       Loop("resync", self._resync_step, deadline=60.0)]
        self._stamps = Stamps()  # Bindings' times: a ledger id each, never one twice
        self._stopping = threading.Event()
        if config.ledger.enabled:
            self.trimmer = Trimmer(store, config.ledger.retention, clock=clock,
                                   etcd_full=config.ledger.etcd_full,
                                   etcd_quota=config.ledger.etcd_quota)
            # the first a minute in (not all at once with the start), or sooner if asked
            self._next_trim = clock.monotonic() + min(60.0, config.ledger.trim_every)
            self._loops.append(Loop("ledger-trim", self._trim_step,
                                    deadline=max(600.0, 2 * config.ledger.trim_every)))
        self._to_binding = Stopwatch(TO_BINDING)
        self.cache.applications.add_handler(self._on_subject)
        self.cache.clusters.add_handler(self._on_subject)
        self.cache.magnumclusters.add_handler(self._on_subject)
        self.cache.bindings.add_handler(self._on_binding)
        self.cache.bindings.add_invalid_handler(self._on_garbage)
        self.cache.failures.add_handler(self._on_failures)
        self.cache.on_candidates_changed(self._on_change)

    # -- running -----------------------------------------------------------------

    def start(self, *, sync_timeout: float = 60.0) -> None:
        self._started = self.clock.monotonic()
        self.cache.start()
        if not self.cache.wait_synced(sync_timeout):
            raise TimeoutError("the scheduler cache did not sync with etcd")
        # The synced cache is long-lived: keep the collector from rescanning it
        # (a full collection over a large fleet pauses every thread for 100s of ms).
        # ``stop`` unfreezes, so a stopped scheduler's objects can be collected.
        gc.collect()
        gc.freeze()
        # Bindings whose subject is gone go
        for item in self.cache.bindings.items():
            ref = item.obj.spec.resource
            try:
                key = keys.resource_key(ref.kind, ref.name, ref.namespace)
            except (KeyError, ValueError):
                continue
            if self.cache.subject(key) is None:
                self.queue.add(key)
        self.antiflap.started_before(self._moves_started())
        self.writer.start()
        if self.events is not None:
            self.events.start()
        for loop in self._loops:
            loop.start()

    def _moves_started(self) -> MovesStarted:
        """The moves the leaders before this one started lately (none: none said, or
        what is there is not such a record — said, and counted as none)."""
        key = keys.SCHEDULER_MOVES
        kv = self.store.get(key)
        if kv is None:
            return MovesStarted()
        try:
            return decode(kv.value, MovesStarted)
        except Invalid as exc:
            log.error("%s holds no record of moves (%s): the pace counts none started "
                      "before this leader; it is written again with the next move", key,
                      exc)
            return MovesStarted()

    def collect(self) -> Iterator[Metric]:
        """The queue's depths now (for /metrics, while leading)."""
        yield counts("berth_scheduler_queue_depth", "Subjects waiting in the scheduling queue",
                     "queue", self.queue.depths())

    def ready(self) -> bool:
        return all(inf.synced.is_set() for inf in self.cache.informers)

    def alive(self) -> bool:
        """Every loop runs and beats, the Binding writer runs, and every informer."""
        return (all(loop.alive() for loop in self._loops) and self.writer.alive()
                and all(inf.alive() for inf in self.cache.informers)
                and (self.events is None or self.events.alive()))

    def stop(self) -> None:
        self._stopping.set()
        for loop in self._loops:
            loop.halt()
        self._resync.set()
        self.queue.close()
        for loop in self._loops:
            loop.stop()
        self.writer.stop()
        if self.events is not None:
            self.events.stop()
        self.cache.stop()
        gc.unfreeze()

    def _step(self) -> None:
        """One turn of the scheduling loop: a slice of a sweep, or one attempt."""
        self._expire_waiting()
        if self._sweep is not None and not self._sweep_idle:
            self._sweep_slice()
        key = self.queue.pop(timeout=0.0 if self._sweep is not None else 1.0)
        if key is None:
            if self._sweep is not None and self._sweep_idle:
                self._sweep_slice()
            return
        if key in (SWEEP, PERIODIC):
            self.queue.done(key)
            if key == SWEEP:
                beyond = self._beyond_metrics.is_set()
                if beyond:  # cleared before acting: one set after it is for the next sweep
                    self._beyond_metrics.clear()
                self.queue.move_all_to_active(metrics_only=not beyond)
                self._sweep, self._sweep_idle = self._sweeping(), False  # restarts a running one
            elif self._sweep is None:
                self._sweep, self._sweep_idle = self._sweeping(), True
            return
        began = time.perf_counter()
        try:
            result = self.schedule_one(key)
        except Exception:
            log.exception("%s: scheduling failed", key)
            ATTEMPTS.labels(Attempt.ERROR).inc()
            self.queue.failed(key)
        else:
            _ATTEMPTS(result).inc()
        finally:
            LATENCY.observe(time.perf_counter() - began)
            self.queue.done(key)

    def _trim_step(self) -> None:
        """Retire the ledger's records past retention, every ``trim_every`` seconds (a
        replica that no longer leads deletes nothing: its deletes are fenced)."""
        left = self._next_trim - self.clock.monotonic()
        if left > 0:
            self._stopping.wait(min(left, 10.0))
            return
        self.trimmer.run()
        # nearly full: every minute, until the ledger has made room
        every = self.config.ledger.trim_every
        self._next_trim = self.clock.monotonic() + (min(every, 60.0) if self.trimmer.pressed
                                                     else every)

    def _sweep_slice(self) -> None:
        assert self._sweep is not None
        if next(self._sweep, StopIteration) is StopIteration:
            self._sweep = None

    def _resync_step(self) -> None:
        """Ask the scheduling loop for a sweep after a change, or when one is due.

        Also lets subjects waiting for other placements (workload affinity)
        try again after placements changed — at most every ACTIVATE_EVERY
        seconds, not once per Binding written.
        """
        changed = self._resync.wait(min(1.0, ACTIVATE_EVERY))
        if self._loops[1].stopping:
            return
        changed = self.cache.expire_picture() or changed
        now = self.clock.monotonic()
        paced = time.monotonic()  # pacing, not a decision: the system's time
        added, removed = self._placements_added.is_set(), self._placements_removed.is_set()
        if (added or removed) and paced - self._last_activation >= ACTIVATE_EVERY:
            self._placements_added.clear()
            self._placements_removed.clear()
            self._last_activation = paced
            with self._placements_lock:
                waiting = {k for k, wants_more in self._waiting_on_placements.items()
                           if removed or (added and wants_more)}
            if waiting:
                self.queue.activate(waiting)
        if changed:
            if self._burst.is_set():  # let a burst (one etcd transaction) settle into one pass
                time.sleep(0.02)
            self._burst.clear()
            self._resync.clear()
            self.queue.add(SWEEP)
        elif now >= self._next_periodic:
            self.queue.add(PERIODIC)
        else:
            return
        self._next_periodic = now + self.config.reschedule_after

    def _sweeping(self) -> Iterator[None]:
        """Decide every placed subject again; act on each change as soon as it is found.

        In :func:`~sweep.swept`'s order: the likeliest to move first. Yields after every
        ``SWEEP_SLICE`` seconds of work, so that new subjects are not held up
        behind a sweep of the whole fleet.
        """
        began = time.perf_counter()
        changed = decided = 0
        due = began + SWEEP_SLICE
        for key in swept(self.cache.bindings.items(), self.cache, self.framework):
            if time.perf_counter() >= due:
                yield
                due = time.perf_counter() + SWEEP_SLICE
            decided += 1
            try:
                result = self._reconsider(key)
            except Exception:
                log.exception("%s: deciding again after a change failed", key)
                self.queue.failed(key)
                continue
            _SWEPT(result).inc()
            changed += result != Attempt.UNCHANGED
        log.debug("sweep: %d of %d placed subjects acted on (%.3fs)", changed, decided,
                  time.perf_counter() - began)

    def _reconsider(self, key: str) -> Attempt:
        """A placed subject after a change: act only if its decision changed."""
        subject = self.cache.subject(key)
        if subject is None:  # a Binding whose subject is gone: an attempt removes it
            self.queue.add(key)
            return Attempt.QUEUED
        binding, _ = self.cache.binding(subject)
        if (binding is None or subject.deleted or binding.spec.generation != subject.generation
                or subject.scheduler_name not in (None, self.config.scheduler_name)):
            self.queue.add(key)  # not ours to decide here: a full attempt sorts it out
            return Attempt.QUEUED
        current = self._current(subject, binding)
        if current and self._stays(subject):  # deferred work (no targets yet) is decided
            if all(self._exists(t) for t in current):
                return Attempt.UNCHANGED
            self.queue.add(key)
            return Attempt.QUEUED
        outcome = decide(self.framework, subject, self.cache, current,
                         keep_current=self.cache.keeps(subject, binding.spec.generation),
                         defer=self.deferral, now=self.clock.time())
        if (isinstance(outcome, Decision)
                and shares(outcome.targets) == shares(binding.spec.targets)
                and binding.status.state == BindingState.SCHEDULED
                and not binding.status.reason):
            self.antiflap.settled(key)
            return Attempt.UNCHANGED
        return self._act(subject, binding, current, outcome)

    # -- events --------------------------------------------------------------------

    def _on_change(self, event: Event[Any]) -> None:
        """Candidates or metric values changed: sweep. A metric picture is whole when it
        comes (the metrics-cache writes it after a poll's values), so it is swept at
        once; any other change may be one of a burst, which is let settle first."""
        if event.key != keys.METRIC_PICTURE:
            self._beyond_metrics.set()
            self._burst.set()
        else:
            log.debug("metric picture at revision %d taken; sweeping", event.revision)
        self._resync.set()

    def _on_subject(self, event: Event[Any]) -> None:
        obj = event.obj
        if isinstance(obj, ClusterView) and obj.existing:
            return  # an existing Kubernetes cluster: a candidate, not a subject
        if event.type is EventType.DELETED:
            self.queue.forget(event.key)
            self._to_binding.cancel(event.key)
        elif isinstance(obj, Subject) and self.cache.applications.synced.is_set():
            self._to_binding.start(event.key, obj.generation)  # changes while running only
        if isinstance(obj, Subject | ClusterView | MagnumView):
            self.queue.add(event.key)
        if event.type is EventType.DELETED or isinstance(obj, Subject):
            self.cache.dependencies.put(event.key, obj.depends_on if isinstance(
                obj, Subject) and event.type is not EventType.DELETED else ())

    def _on_binding(self, event: Event[BindingView]) -> None:
        # A placement changed: subjects waiting on workload affinity may fit now.
        old = event.old.spec.targets if event.old is not None else []
        new = event.obj.spec.targets if event.type is not EventType.DELETED else []
        if refs(new) != refs(old):
            if new:
                self._placements_added.set()
            if old:
                self._placements_removed.set()
        ref = event.obj.spec.resource
        try:
            subject_key = keys.resource_key(ref.kind, ref.name, ref.namespace)
        except (KeyError, ValueError):
            log.warning("Binding %s names no valid resource", event.key)
            return
        if refs(new) != refs(old):  # its dependents go where it goes, and what follows
            graph = self.cache.dependencies  # its dependents where they go (docs/order.md)
            for other in sorted(graph.of(subject_key) | set(graph.on(subject_key))):
                self.queue.add(other)
        if event.type is EventType.DELETED:  # someone removed our decision: decide again
            self.queue.add(subject_key)
        else:
            self._to_binding.stop(subject_key, event.obj.spec.generation)

    def _on_failures(self, event: Event[Failures]) -> None:
        """The propagator found a cluster the application could not become available on:
        decide it again (FailedTargets avoids that cluster now)."""
        old = event.old.failed if event.old is not None else {}
        new = event.obj.failed if event.type is not EventType.DELETED else {}
        if new != old and new:
            try:
                self.queue.add(keys.resource_key_of(event.key))
            except (KeyError, ValueError):
                log.warning("%s is no application status key; left alone", event.key)

    def _stays(self, subject: Subject) -> bool:
        """Whether a placed subject is never moved: migration is disabled, or its work
        at this generation is done (the propagator found every object of it a complete
        Job: moving it would run the work again or undo nothing)."""
        return not subject.migration or (
            self.cache.failures_of(subject).finished == subject.generation > 0)

    def _current(self, subject: Subject, binding: BindingView | None) -> list[Target]:
        """The subject's targets, for stickiness: the Binding's — unless every one of them
        failed (the application could not become available there), then where it still
        runs, so that it goes back rather than somewhere new. A target its namespace may
        no longer use (its policy changed: docs/teams.md) is none: it is left even when
        nothing else fits."""
        current = [t for t in binding.spec.targets if self._admitted(subject, t)] if (
            binding) else []
        failed = self.cache.failed(subject)
        if not current or not failed or not all(
                candidate_key(t.kind, t.namespace, t.name) in failed for t in current):
            return current
        return [t for t in self.cache.failures_of(subject).running_on
                if candidate_key(t.kind, t.namespace, t.name) not in failed]

    def _admitted(self, subject: Subject, t: Target) -> bool:
        """Whether ``subject``'s namespace may place on target ``t`` (one that no longer
        exists is, as far as this goes)."""
        if t.kind != "Cluster" or t.namespace in (None, subject.ref.namespace):
            return True  # the common case: no lookup
        view = self.cache.clusters.get(keys.resource_key("Cluster", t.name, t.namespace))
        return self.cache.tenancy.admits(subject.ref.namespace, f"{t.namespace}/{t.name}",
                                         view.metadata if view else None)

    def _sort_key(self, key: str, enqueued: float) -> tuple[Any, ...]:
        if key in (SWEEP, PERIODIC):
            return (float("-inf"), enqueued)
        subject = self.cache.subject(key)
        if subject is None:
            return (0, enqueued)
        return self.framework.sort_key(subject, enqueued,
                                       self.cache.priorities.of(subject).value)

    def _on_garbage(self, binding_key: str, revision: int) -> None:
        """Something that is no Binding was written where ours lives: decide again, and the
        decision replaces it (the informer has logged it)."""
        try:
            self.queue.add(keys.resource_key_of(binding_key))
        except (KeyError, ValueError):
            log.warning("%s is no Binding key; left alone", binding_key)

    def _seen_revision(self, binding_key: str) -> int:
        return self.cache.decisions.stored_revision(binding_key)

    # -- one attempt ------------------------------------------------------------------

    def schedule_one(self, key: str) -> Attempt:
        """Decide for the subject at ``key`` and act; returns what happened (for metrics)."""
        subject = self.cache.subject(key)
        if subject is None:
            return self._forget(key)
        if subject.deleted:
            return Attempt.DELETING
        if subject.scheduler_name and subject.scheduler_name != self.config.scheduler_name:
            return Attempt.OTHER_SCHEDULER
        if subject.ref.kind == "Cluster":
            view = self.cache.clusters.get(key)
            if view is None or view.existing:
                return Attempt.NOT_A_SUBJECT
        binding, _ = self.cache.binding(subject)
        current = self._current(subject, binding)
        if current and self._stays(subject):
            alive = [t for t in current if self._exists(t)]
            if alive:
                why = ("migration is disabled: staying on the current targets"
                       if not subject.migration else
                       f"its work is done (every Job complete at generation "
                       f"{subject.generation}): not moved, as a finished Pod is not")
                self._submit(subject, binding, alive, BindingState.SCHEDULED, why, list)
                return Attempt.KEPT
            current = []  # everything it ran on is gone: it has to be placed anew

        if not current and self._awaits_values(subject):
            self.queue.add_after(key, VALUES_LOOK)
            return Attempt.AWAITING_VALUES
        self._waiting.pop(key, None)  # a new attempt replaces a held one
        plan = binding.status.preemption if binding is not None else None
        if plan is not None and not current:
            return self._room_made(subject, binding, plan)
        keep = self.cache.keeps(subject, binding.spec.generation if binding else None)
        return self._act(subject, binding, current,
                         decide(self.framework, subject, self.cache, current, keep_current=keep,
                                defer=self.deferral, now=self.clock.time()))

    def _act(self, subject: Subject, binding: BindingView | None, current: list[Target],
             outcome: Decision | Deferred | NoFit) -> Attempt:
        """The one place a decision turns into a Binding (or a retry): :func:`acts.act`
        says what to do, this carries it out."""
        done = acts.act(subject, outcome, acts.Bound(binding, current), rules=self._rules,
                        planned_start=self._deferred.get(subject.key), looks=self._looks)
        if not isinstance(done, acts.Defer):
            self._deferred.pop(subject.key, None)
        limit = self.config.explain_limit
        match done:
            case acts.Defer(deferred=deferred, replan=replan):
                return self._defer(subject, binding, deferred, replan)
            case acts.Retry():
                self.queue.failed(subject.key)
                return Attempt.ERROR
            case acts.FollowPlan(plan=running):
                return self._room_made(subject, binding, running)
            case acts.MakeRoom(plan=plan, nofit=nofit):
                return self._start_plan(subject, binding, plan, nofit)
            case acts.Unschedulable(reason=why, nofit=nofit):
                return self._unschedulable(subject, binding, current, why,
                                           lambda: nofit.explained(limit),
                                           self.framework.metric_blind(nofit.evaluation),
                                           nofit.evaluation, quota=nofit.quota)
            case acts.Hold(held=held, decision=decision, note=note):
                if held.retry_after is not None:
                    self.queue.add_after(subject.key, held.retry_after + 0.01)
                self._submit(subject, binding, current, BindingState.SCHEDULED, held.reason,
                             lambda: [note, *decision.explained(self.framework, self.cache,
                                                                limit, current)],
                             decision.evaluation, held=held.rule)
                return Attempt.HELD
            case acts.Place(decision=decision, settled=settled):
                if settled:
                    self.antiflap.settled(subject.key)
                return self._place(decision, binding)
            case _:
                assert_never(done)

    def _place(self, outcome: Decision, binding: BindingView | None) -> Attempt:
        """Reserve, permit and bind a decision (with the gang members it releases)."""
        state, new, subject = outcome.state, outcome.targets, outcome.subject
        status = self.framework.reserve(state, subject, new)
        if status.ok:
            status = self.framework.permit(state, subject, new)
        if status.code is Code.WAIT:
            self._waiting[subject.key] = _Held(outcome, binding,
                                               self.clock.monotonic() + status.timeout)
            return Attempt.WAITING
        if not status.ok:
            self.framework.unreserve(state, subject, new)
            self.queue.failed(subject.key)
            return Attempt.NOT_PERMITTED
        members = [(outcome, binding)]
        members += [(h.decision, h.binding) for h in
                    (self._waiting.pop(k) for k in state.allow if k in self._waiting)]
        if not self._bind(members):
            return Attempt.BIND_FAILED
        fleet = self.cache.pace()
        for decision, b in members:
            self._after_bind(decision.subject)
            old = refs(b.spec.targets) if b is not None else frozenset()
            failed = self.cache.failed(decision.subject)
            if any(candidate_key(*ref) in failed for ref in old - refs(decision.targets)):
                MOVED_OFF_FAILED.inc()
            if old != refs(decision.targets) and (
                    fleet is not None or decision.subject.pace is not None):
                # paced: in transition from now, before its Binding lands
                self.cache.transit.decided(transit_id(decision.subject.key), [
                    f"{t.namespace or ''}/{t.name}" for t in decision.targets])
        return Attempt.SCHEDULED

    # -- making room (docs/scheduler.md "Priority and preemption") ---------------------------

    def _awaits_values(self, subject: Subject) -> bool:
        """Whether a first placement waits for the first whole picture of the metric values:
        the metrics-cache is gathering it, the subject's candidates are scored by metrics,
        and the scheduler started less than ``first_picture_wait`` ago (then it is placed
        on what there is, the values missing said in its explanation)."""
        wait = self.config.first_picture_wait
        return (wait > 0 and self.clock.monotonic() - self._started < wait
                and self.cache.gathering_first_picture()
                and any(c.metrics for c in self.cache.fleet(subject).candidates))

    def _start_plan(self, subject: Subject, binding: BindingView | None, plan: Plan,
                    nofit: NoFit) -> Attempt:
        """Reserve the room ``plan`` makes (the preemptor's Binding says the plan) and
        start its moves."""
        now = self.clock.now()
        doc = makeroom.document(plan, now, self.config.preemption.deadline,
                                L.record_id(now))
        limit = self.config.explain_limit
        self._submit(subject, binding, [], BindingState.UNSCHEDULABLE, makeroom.reason(doc),
                     lambda: nofit.explained(limit), nofit.evaluation, preemption=doc)
        log.info("%s: %s", subject.key, makeroom.reason(doc))
        return self._advance(subject, doc)

    def _room_made(self, subject: Subject, binding: BindingView | None,
                   plan: Preemption) -> Attempt:
        """A look at a running plan: placed if the room is there, else its next steps;
        out of time, the reservation goes and nothing more is stopped."""
        where = makeroom.cluster_key(plan)
        if plan.deadline.timestamp() <= self.clock.time():
            self._submit(subject, binding, [], BindingState.UNSCHEDULABLE,
                         f"the room planned on {plan.cluster} was not made by "
                         f"{plan.deadline:%Y-%m-%dT%H:%M:%SZ}: the reservation is released",
                         list)
            self.queue.unschedulable_now(subject.key, False)
            return Attempt.UNSCHEDULABLE
        overlay = Overlay(self.cache)
        overlay.add(where, Resources.counted(plan.reserved))  # its own reservation
        outcome = decide(self.framework, subject, overlay, [], defer=self.deferral,
                         now=self.clock.time())
        if isinstance(outcome, Decision) and not outcome.unplaced:
            return self._act(subject, binding, [], outcome)
        return self._advance(subject, plan)

    def _advance(self, subject: Subject, plan: Preemption) -> Attempt:
        """Make the moves the pace allows and, once they are done or failed, the stops."""
        step = makeroom.advance(self.cache, self.framework, plan)
        pace = self.cache.pace()
        for m in step.moves:
            own = effective(pace, m.victim.pace)
            if own is not None and self.antiflap.paced(
                    own, self.cache.transit.count(), names(m.decision.targets)) is not None:
                continue  # tried again at the next look
            self.antiflap.moved(m.victim.key, refs(m.binding.spec.targets),
                                refs(m.decision.targets), optional=False)
            self.writer.moves(encode(self.antiflap.record()))
            self._submit(m.victim, m.binding, m.decision.targets, BindingState.SCHEDULED,
                         "", self._explainer(m.decision, m.binding), m.decision.evaluation,
                         yielded_to=str(subject.ref), yielded_plan=plan.plan)
            self.cache.transit.decided(transit_id(m.victim.key), [
                f"{t.namespace or ''}/{t.name}" for t in m.decision.targets])
            log.info("%s: moved %s → %s to make room for %s on %s", m.victim.key,
                     names(m.binding.spec.targets), names(m.decision.targets), subject.ref,
                     plan.cluster)
        for s in step.stops:
            why = (f"stopped on {plan.cluster} to make room for {subject.ref} (plan "
                   f"{plan.plan}): it fits nowhere else")
            self._submit(s.victim, s.binding, s.left, BindingState.SCHEDULED if s.left
                         else BindingState.UNSCHEDULABLE, why, list,
                         yielded_to=str(subject.ref), yielded_plan=plan.plan)
            if not s.left:
                self.queue.unschedulable_now(s.victim.key, False)
            log.info("%s: %s", s.victim.key, why)
        self.queue.add_after(subject.key, PLAN_LOOK)
        return Attempt.PREEMPTING

    def _defer(self, subject: Subject, binding: BindingView | None, deferred: Deferred,
               replan: bool) -> Attempt:
        """Hold deferrable work Pending (no targets, the reason says until when) and,
        when its start is new, come back then; a changed plan is written, an unchanged
        one is not."""
        self._submit(subject, binding, [], BindingState.PENDING, deferred.reason,
                     deferred.explained, deferred.evaluation, deferred_until=deferred.until)
        if replan:
            self._deferred[subject.key] = deferred.start
            self.queue.add_after(subject.key, max(0.0, deferred.start - self.clock.time()) + 0.01)
        return Attempt.DEFERRED

    def _bind(self, members: list[tuple[Decision, BindingView | None]]) -> bool:
        """Run the bind point for a subject (or a released gang), then write its Bindings."""
        for decision, _ in members:
            status = self.framework.bind(decision.state, decision.subject, decision.targets)
            if not status.ok:
                for d, _ in members:
                    self.framework.unreserve(d.state, d.subject, d.targets)
                    self.queue.failed(d.subject.key)
                return False
        moved = False
        for d, b in members:  # counted before the writes go: the record rides with them
            old = refs(b.spec.targets) if b is not None else frozenset()
            if old != refs(d.targets):
                self.antiflap.moved(d.subject.key, old, refs(d.targets),
                                    optional=acts.optional(d.subject, b, d))
                moved = moved or bool(old)
        if moved:
            self.writer.moves(encode(self.antiflap.record()))
        writes = [w for w in (self._write(d.subject, b, Outcome(d.targets, BindingState.SCHEDULED,
                                                                self._reason(d),
                                                                self._explainer(d, b),
                                                                d.evaluation))
                              for d, b in members) if w is not None]
        if len(members) > 1:
            self.writer.submit_group(writes)
        elif writes:
            self.writer.submit(writes[0])
        return True

    def _reason(self, decision: Decision) -> str:
        """The placed Binding's reason: the decision's, after the problem of a class its
        application may not name (one that does not exist, or that its namespace's policy
        does not allow: placed at its own priority, it makes room nowhere)."""
        subject = decision.subject
        if subject.priority_class is None:  # no class named, no problem: the common case
            return decision.reason
        problem = self.cache.priorities.of(subject).problem
        return (f"{problem}: placed at its own priority; {decision.reason}" if problem
                else decision.reason)

    def _explainer(self, decision: Decision, binding: BindingView | None) -> Explained:
        """The explanation of ``decision``, written over ``binding``: placed by a plan that
        made room, it says first which applications made it, and how."""
        limit = self.config.explain_limit
        before = binding.spec.targets if binding is not None else []
        plan = binding.status.preemption if binding is not None else None
        if plan is None:
            return lambda: decision.explained(self.framework, self.cache, limit, before)
        note = {"room_made": {"on": plan.cluster, "plan": plan.plan, "by": [
            f"{v.application} ({v.action}{' to ' + ', '.join(v.to) if v.to else ''})"
            for v in plan.victims]}}
        return lambda: [note, *decision.explained(self.framework, self.cache, limit, before)]

    def _expire_waiting(self) -> None:
        now = self.clock.monotonic()
        for key, held in list(self._waiting.items()):
            if held.deadline > now:
                continue
            del self._waiting[key]
            d = held.decision
            self.framework.unreserve(d.state, d.subject, d.targets)
            for plugin in self.framework.on.rejecters:
                plugin.reject(d.subject)
            binding, _ = self.cache.binding(d.subject)
            gang = d.subject.gang
            self._submit(d.subject, binding, d.state.current, BindingState.UNSCHEDULABLE,
                         f"gang {gang.name if gang else '?'}: not enough members in time", list)
            self.queue.failed(key)

    def _after_bind(self, subject: Subject) -> None:
        key = subject.key
        self.queue.succeeded(key)
        with self._placements_lock:
            self._waiting_on_placements.pop(key, None)

    # -- outcomes ------------------------------------------------------------------------

    def _exists(self, t: Target) -> bool:
        c = self.cache.candidate_by_key(candidate_key(t.kind, t.namespace, t.name))
        return c is not None and not c.deleted

    def _unschedulable(self, subject: Subject, binding: BindingView | None, current: list[Target],
                       reason: str, explained: Explained, metric_blind: bool = False,
                       evaluation: Evaluation | None = None, *, quota: bool = False
                       ) -> Attempt:
        # Keep what runs where it runs: a brief outage of every cluster must not
        # tear the application down. The reason says it does not fit anymore.
        self._submit(subject, binding, current, BindingState.UNSCHEDULABLE, reason, explained,
                     evaluation)
        if self.events is not None:
            ref = subject.ref
            self.events.emit(InvolvedObject(ref.kind, ref.name, ref.namespace), WARNING,
                             "FailedScheduling", reason)
        self.queue.unschedulable_now(subject.key, metric_blind)
        if depends_on_placements(subject) or quota:  # over its quota: for one to go
            with self._placements_lock:
                self._waiting_on_placements[subject.key] = bool(
                    subject.depends_on or subject.placement.follow_dependents) or (
                    subject.affinity is not None
                    and subject.affinity.workload_affinity is not None)
        return Attempt.UNSCHEDULABLE

    def _submit(self, subject: Subject, binding: BindingView | None, new: list[Target],
                state: BindingState, reason: str, explained: Explained,
                evaluation: Evaluation | None = None, *, held: HeldBy = HeldBy.NOTHING,
                deferred_until: datetime | None = None, preemption: Preemption | None = None,
                yielded_to: str = "", yielded_plan: str = "") -> None:
        write = self._write(subject, binding, Outcome(
            new, state, reason, explained, evaluation, held, deferred_until, preemption,
            yielded_to, yielded_plan))
        if write is not None:
            self.writer.submit(write)

    def _write(self, subject: Subject, binding: BindingView | None,
               outcome: Outcome) -> Write | None:
        """The write ``outcome`` makes of ``binding``, now, in this leader's term, with its
        ledger record when the ledger is on. An application that made room keeps saying
        so while it stays where that left it (it makes no room in turn, and is no victim
        again for a while) — in its reason too, while it is placed nowhere: a later pass
        that finds it no cluster says why beside whom it was stopped for."""
        if (binding is not None and binding.status.yielded_to and not outcome.yielded_to
                and (outcome.state is not BindingState.SCHEDULED
                     or refs(outcome.targets) == refs(binding.spec.targets))):
            who = binding.status.yielded_to
            reason = outcome.reason
            if not outcome.targets and f"to make room for {who}" not in reason:
                reason = f"stopped to make room for {who}: {reason}"
            outcome = replace(outcome, reason=reason, yielded_to=who,
                              yielded_plan=binding.status.yielded_plan)
        return binding_write(subject, binding, outcome, term=self.term,
                             now=self._stamps.next(self.clock.now()),
                             say=log.isEnabledFor(logging.INFO),
                             failed=self.cache.failed(subject) if (
                                 self.config.ledger.enabled or self.config.events) else None,
                             ledger=self.config.ledger.enabled)

    def _said(self, write: Write) -> None:
        """A Binding that says something happened was written: tell it as events."""
        assert self.events is not None
        try:
            ref = keys.parse_key(write.subject_key)
        except ValueError:
            return
        obj = InvolvedObject(ref.kind.name, ref.name, ref.namespace)
        for type_, reason, message in write.events:
            self.events.emit(obj, type_, reason, message)

    def _forget(self, key: str) -> Attempt:
        self.queue.forget(key)
        self._deferred.pop(key, None)
        try:
            ref = keys.parse_key(key)
        except ValueError:
            return Attempt.GONE
        bkey = keys.binding_key(ref.kind.name, ref.namespace or "", ref.name)
        if self.cache.decisions.known(bkey):
            self.writer.submit(Write(key, bkey, None))
            return Attempt.BINDING_DELETED
        return Attempt.GONE
