"""What the scheduler does with an outcome of :func:`~decide.decide`, as a value.

:func:`act` reads one attempt — the outcome, what is bound (:class:`Bound`: the
Binding and the targets the subject runs on), its priority, the configuration —
and returns the act: :class:`Defer` the work, :class:`Retry` after a backoff,
follow the running plan that makes room for it (:class:`FollowPlan`),
:class:`MakeRoom` with a new plan, say it is :class:`Unschedulable`,
:class:`Hold` an optional move back, or :class:`Place` it. It writes and queues
nothing: ``Scheduler._carry`` carries an act out, in one place.

What an act depends on beyond the attempt it asks of :class:`Looks`, queries on the
same frozen view (the Scheduler answers them from its cache and its anti-flap
record; a table of cases answers them in the unit test): whether anything placed is
less important, a plan to make room, and the anti-flap and pace verdict on an
optional move.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from berth.controllers.scheduler.antiflap import Held, Refs
from berth.controllers.scheduler.decide import Decision, Deferred, NoFit
from berth.controllers.scheduler.framework import Evaluation, Subject
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.outcome import refs
from berth.controllers.scheduler.preempt import NoPlan, Plan
from berth.controllers.scheduler.priorities import Priority
from berth.controllers.scheduler.views import BindingView
from berth.store.documents import Preemption, Target
from berth.store.documents.pace import PaceSpec


@dataclass(frozen=True, slots=True)
class Bound:
    """What is bound to a subject now: its Binding (None: never decided) and the
    targets it runs on (empty: it is to be placed anew)."""

    binding: BindingView | None
    current: list[Target]


@dataclass(frozen=True, slots=True)
class Rules:
    """What the scheduler's configuration says of acting."""

    preemption: bool = False  # may make room
    antiflap: bool = False  # any anti-flap rule is on


@dataclass(frozen=True, slots=True)
class OptionalMove:
    """A move only because another candidate scores better now: what the anti-flap rules
    and the pace judge."""

    subject: Subject
    decision: Decision
    new: Refs
    gain: float  # in score over where it runs (inf: a better tier)
    last_move: datetime | None  # when its targets last changed
    pace: PaceSpec | None

    @property
    def names(self) -> str:
        return ", ".join(t.name for t in self.decision.targets)


class Looks(Protocol):
    """The queries an act may need, on the view the outcome was decided on (asked only
    where the act depends on them: most attempts need none)."""

    def priority(self, subject: Subject) -> Priority:
        """The subject's priority, resolved (docs/scheduler.md "Priority and preemption")."""
        ...

    def pace(self, subject: Subject) -> PaceSpec | None:
        """The pace the subject moves under: its own over the fleet's (None: none)."""
        ...

    def anything_below(self, priority: int) -> bool:
        """Whether any placed application is less important than ``priority``."""
        ...

    def room(self, subject: Subject, priority: int, evaluation: Evaluation) -> Plan | NoPlan:
        """A plan that makes room for ``subject`` (:func:`~preempt.plan`), or why none can."""
        ...

    def held(self, move: OptionalMove) -> Held | None:
        """Whether the anti-flap rules or the pace hold ``move`` back (None: they do not)."""
        ...


@dataclass(frozen=True, slots=True)
class Defer:
    """Deferrable work: Pending until its start; ``replan``: that start is new, so the
    subject is looked at again then."""

    deferred: Deferred
    replan: bool


@dataclass(frozen=True, slots=True)
class Retry:
    """A plugin failed: tried again after a backoff, nothing written."""


@dataclass(frozen=True, slots=True)
class FollowPlan:
    """Its plan to make room runs and it still does not fit: the plan's next steps."""

    plan: Preemption


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """Nothing fits: kept where it runs, saying why."""

    reason: str
    nofit: NoFit


@dataclass(frozen=True, slots=True)
class MakeRoom:
    """Nothing fits, and ``plan`` makes room by moving or stopping less important
    applications: reserved in its Binding, then started."""

    plan: Plan
    nofit: NoFit


@dataclass(frozen=True, slots=True)
class Hold:
    """An optional move held back: written where it runs, with the rule and what it would
    move to (``note``); looked at again after ``held.retry_after``, if any."""

    held: Held
    decision: Decision
    note: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Place:
    """Go on to reserve, permit and bind; ``settled``: the decision is where it runs."""

    decision: Decision
    settled: bool


Act = Defer | Retry | FollowPlan | Unschedulable | MakeRoom | Hold | Place


def act(subject: Subject, outcome: Decision | Deferred | NoFit, bound: Bound, *,
        rules: Rules, planned_start: float | None, looks: Looks) -> Act:
    """The act ``outcome`` makes for ``subject``, given what is bound (``planned_start``:
    the start last planned for its deferred work, None if none)."""
    binding, current = bound.binding, bound.current
    if isinstance(outcome, Deferred):
        return Defer(outcome, planned_start != outcome.start)
    if isinstance(outcome, NoFit):
        return _nothing_fits(subject, outcome, bound, rules, looks)
    new = refs(outcome.targets)
    if new == refs(current):
        return Place(outcome, settled=True)
    pace = looks.pace(subject)
    if not (rules.antiflap or pace is not None) or not optional(subject, binding, outcome):
        return Place(outcome, settled=False)
    assert binding is not None  # optional() says there is one
    move = OptionalMove(subject, outcome, new, gain(outcome, current),
                        binding.spec.scheduled, pace)
    held = looks.held(move)
    if held is None:
        return Place(outcome, settled=False)
    note: dict[str, Any] = {"held_back": held.rule, "would_move_to": [
        candidate_key(t.kind, t.namespace, t.name) for t in outcome.targets]}
    if held.retry_after is not None:
        note["retry_in"] = round(held.retry_after, 3)
    return Hold(held, outcome, note)


def _nothing_fits(subject: Subject, nofit: NoFit, bound: Bound, rules: Rules,
                  looks: Looks) -> Act:
    binding, current = bound.binding, bound.current
    if nofit.retry:
        return Retry()
    if binding is not None and binding.status.preemption is not None and not current:
        return FollowPlan(binding.status.preemption)  # any look while its plan runs
    why = nofit.reason
    priority = looks.priority(subject)
    if priority.problem:
        return Unschedulable(f"{priority.problem}: it makes no room; {why}", nofit)
    if (rules.preemption and not current and priority.may_preempt and not nofit.quota
            and nofit.evaluation is not None
            and not (binding is not None and binding.status.yielded_to)
            and looks.anything_below(priority.value)):
        found = looks.room(subject, priority.value, nofit.evaluation)
        if isinstance(found, Plan):
            return MakeRoom(found, nofit)
        if found.reason:
            why = f"{why}; no room can be made: {found.reason}"
    return Unschedulable(why, nofit)


def optional(subject: Subject, binding: BindingView | None, decision: Decision) -> bool:
    """A move only because another candidate scores better now: the spec is the one
    decided and every current target is feasible now — whatever the Binding said when it
    was written (one kept Unschedulable on a cluster that fits again is where it may
    stay: leaving is optional, and paced)."""
    if binding is None or not binding.spec.targets or (
            binding.spec.generation != subject.generation):
        return False
    ranking = decision.evaluation.ranked
    return all(ranking.get(candidate_key(t.kind, t.namespace, t.name)) is not None
               for t in binding.spec.targets)


def gain(decision: Decision, current: list[Target]) -> float:
    """What a move to the decision's targets gains in score over ``current`` (infinite
    when it reaches a better tier)."""
    ranking = decision.evaluation.ranked
    was = [r for r in (ranking.get(candidate_key(t.kind, t.namespace, t.name))
                       for t in current) if r is not None]
    if max(r.tier for r in decision.chosen) > max(r.tier for r in was):
        return float("inf")
    return sum((r.score for r in decision.chosen), 0.0) - sum((r.score for r in was), 0.0)
