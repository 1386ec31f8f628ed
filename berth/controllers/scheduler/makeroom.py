"""Carrying a preemption plan out: what the plan says, and what to do next.

:func:`preempt.plan` finds the room; this module turns a plan into what the
preemptor's Binding holds (:class:`~store.documents.Preemption`: the
cluster, the victims and where each goes, the room reserved and until when)
and, at each later look while the plan runs, says what is to be done
(:func:`advance`): the moves not made yet (they wait for the pace), then —
once every move is done or has failed — the stops. It reads the scheduler's
cache and decides with its framework, and writes nothing: the scheduler acts
on the :class:`Step` (docs/scheduler.md "Priority and preemption").

A move is done when the victim's Binding no longer names the cluster and the
cluster reports none of its pods (make-before-break: the old copy goes only
once the new one is available); it has failed when the victim is no longer
Scheduled or could not become available where it went.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from berth.controllers.scheduler.cache import Cache
from berth.controllers.scheduler.decide import Decision, decide
from berth.controllers.scheduler.framework import Framework, Subject
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.outcome import names
from berth.controllers.scheduler.overlay import Overlay
from berth.controllers.scheduler.preempt import Occupant, Plan
from berth.controllers.scheduler.ranks import Rank
from berth.controllers.scheduler.views import BindingView
from berth.store import keys
from berth.store.documents import BindingState, Preemption, Target, Victim, Yield


def cluster_key(plan: Preemption) -> str:
    """The candidate key of the cluster a plan makes room on."""
    ns, _, name = plan.cluster.rpartition("/")
    return candidate_key("Cluster", ns or None, name)


def app_key(victim: Victim) -> str:
    ns, _, name = victim.application.rpartition("/")
    return keys.resource_key("Application", name, ns or None)


class Occupants:
    """The applications placed on a candidate below priority ``below``, as possible
    victims of one plan at ``now``: exempt those that give nothing up, are victims of a
    running plan, or made room within ``protect`` seconds."""

    def __init__(self, cache: Cache, now: float, protect: float, below: int) -> None:
        self.cache, self.now, self.protect, self.below = cache, now, protect, below
        self.promised = {v.application for p in cache.decisions.plans() for v in p.victims
                         if p.deadline.timestamp() > now}
        # a plan reads a hundred candidates' occupants: each priority is resolved once per
        # what it depends on (the namespace's policy, the class, its own value)
        self._priorities: dict[tuple[str | None, int | None, str | None, object], int] = {}
        self._ranked: dict[Rank, int] = {}  # the same, by rank, for the bounds

    def lowest(self, candidate: str) -> float:
        """No application placed on ``candidate`` is less important (inf: none is placed
        there): what bounds a plan there before its occupants are read."""
        values = []
        for rank in self.cache.decisions.ranks_on(candidate):
            value = self._ranked.get(rank)
            if value is None:
                found = self.cache.priorities.lowest([rank])  # (one rank: never None)
                value = self._ranked[rank] = found if found is not None else 0
            values.append(value)
        return min(values, default=float("inf"))

    def __call__(self, candidate: str) -> list[Occupant]:
        cache, now = self.cache, self.now
        out = []
        for bkey, usage in cache.decisions.occupants(candidate):
            binding, _ = cache.decisions.get(bkey)
            if binding is None:
                continue
            subject = cache.subject(keys.resource_of(keys.BINDINGS, bkey))
            if subject is None or subject.deleted:
                continue
            alike = (subject.ref.namespace, subject.priority, subject.priority_class,
                     subject.preemption_policy)
            priority = self._priorities.get(alike)
            if priority is None:
                priority = self._priorities[alike] = cache.priorities.of(subject).value
            if priority >= self.below:
                continue  # never a victim
            exempt = ""
            if not (subject.preemptible.move or subject.preemptible.stop):
                exempt = "it gives nothing up (preemptible)"
            elif usage.app in self.promised:
                exempt = "it makes room for another plan"
            elif binding.status.yielded_to and binding.spec.scheduled is not None and (
                    now - binding.spec.scheduled.timestamp() < self.protect):
                exempt = "it made room lately"
            out.append(Occupant(subject, priority, usage.ask, list(binding.spec.targets),
                                usage.since, exempt))
        return out


def document(plan: Plan, now: datetime, deadline: float, plan_id: str) -> Preemption:
    """What the preemptor's Binding says of ``plan`` while it runs."""
    ref = plan.cluster.ref
    return Preemption(
        cluster=f"{ref.namespace}/{ref.name}",
        deadline=(now + timedelta(seconds=deadline)).replace(microsecond=0),
        victims=[Victim(f"{v.occupant.subject.ref}", v.occupant.priority, v.action,
                        [f"{t.namespace}/{t.name}" for t in v.moved_to])
                 for v in plan.victims],
        reserved=plan.reserved.listed(), plan=plan_id)


def reason(plan: Preemption) -> str:
    """``making room on ns/c1 until …: moving a → c2; stopping b (fits nowhere else)``."""
    moving = [f"{v.application} → {','.join(t.rpartition('/')[2] for t in v.to)}"
              for v in plan.victims if v.action is Yield.MOVE]
    stopping = [v.application for v in plan.victims if v.action is Yield.STOP]
    parts = [f"moving {', '.join(moving)}"] if moving else []
    if stopping:
        parts.append(f"stopping {', '.join(stopping)} (fits nowhere else)")
    return (f"making room on {plan.cluster} until {plan.deadline:%Y-%m-%dT%H:%M:%SZ}: "
            + "; ".join(parts))


@dataclass(slots=True)
class Move:
    victim: Subject
    binding: BindingView
    decision: Decision


@dataclass(slots=True)
class Stop:
    victim: Subject
    binding: BindingView
    left: list[Target]  # its targets but the cluster


@dataclass(slots=True)
class Step:
    """What a look at a running plan says to do now."""

    moves: list[Move] = field(default_factory=list)
    stops: list[Stop] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # moves not done yet (who)
    failed: list[str] = field(default_factory=list)  # moves that failed (who, why)


def advance(cache: Cache, framework: Framework, plan: Preemption) -> Step:
    """The next things to do for ``plan`` (see the module's doc)."""
    step = Step()
    where = cluster_key(plan)
    stops: list[tuple[Subject, BindingView]] = []
    for v in plan.victims:
        subject = cache.subject(app_key(v))
        binding = cache.binding(subject)[0] if subject is not None else None
        if subject is None or binding is None or subject.deleted:
            continue  # gone: it takes no room any more
        there = any(candidate_key(t.kind, t.namespace, t.name) == where
                    for t in binding.spec.targets)
        if v.action is Yield.STOP:
            if there:
                stops.append((subject, binding))
            continue
        if there and binding.status.yielded_plan == plan.plan:
            step.failed.append(f"{v.application}: back on {plan.cluster}")
        elif there:
            overlay = Overlay(cache)
            overlay.close(subject.key, where)
            got = decide(framework, subject, overlay, list(binding.spec.targets))
            if isinstance(got, Decision) and not got.unplaced and all(
                    candidate_key(t.kind, t.namespace, t.name) != where for t in got.targets):
                step.moves.append(Move(subject, binding, got))
                step.waiting.append(f"{v.application} (to {names(got.targets)})")
            else:
                step.failed.append(f"{v.application}: no place elsewhere now")
        elif binding.status.state != BindingState.SCHEDULED or any(
                key in cache.failed(subject) for key in (
                    candidate_key(t.kind, t.namespace, t.name) for t in binding.spec.targets)):
            step.failed.append(f"{v.application}: not available where it went")
        elif cache.reported_pods(plan.cluster, v.application):
            step.waiting.append(f"{v.application} (its copy on {plan.cluster} still runs)")
    if not step.waiting:
        step.stops = [Stop(s, b, [t for t in b.spec.targets
                                  if candidate_key(t.kind, t.namespace, t.name) != where])
                      for s, b in stops]
    return step


__all__ = ["Move", "Occupants", "Step", "Stop", "advance", "app_key", "cluster_key",
           "document", "reason"]
