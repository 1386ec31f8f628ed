"""The one way a placement is decided: a subject and a snapshot in, a value out.

``decide`` runs pre-filter, filter, score and selection on one frozen fleet
and returns a :class:`Decision` (the targets, with what is needed to explain
them), a :class:`Deferred` (deferrable work that should start later, and
where), or a :class:`NoFit` (nothing fits, with the diagnosis; or a plugin
failed and the attempt should be retried). It writes nothing and queues
nothing: the scheduler acts on the value (reserve, permit, bind, write), the
sweep after a change compares it with what is bound, and a what-if asks it
without acting at all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from berth.controllers.scheduler import deferral
from berth.controllers.scheduler.framework import CycleState, Evaluation, Framework, Ranked, Subject
from berth.controllers.scheduler.framework.helpers.replicas import (
    divide,
    divided,
    grouped,
    room,
    total_replicas,
)
from berth.controllers.scheduler.framework.selection import explanation, select, summary, targets
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.types import candidate_key
from berth.store.documents import Target
from berth.store.documents.reasons import listed
from berth.store.documents.tenancy import placements


@dataclass(slots=True)
class Decision:
    targets: list[Target]  # best first
    evaluation: Evaluation
    chosen: list[Ranked]
    subject: Subject
    state: CycleState  # for reserve, permit and bind
    unplaced: int = 0  # replicas of a divided application no cluster had room for

    @property
    def reason(self) -> str:
        """``7/12 clusters are available: ...`` (built when asked: most are never written)."""
        head = summary(self.subject.candidate_kind, self.evaluation)
        if self.unplaced:
            head = f"{self.unplaced} replicas wait for room; {head}"
        return head

    def explained(self, framework: Framework, snapshot: Snapshot, limit: int,
                  before: Sequence[Target] = ()) -> list[dict[str, Any]]:
        """The explanation written into the Binding (built only when it is written): the
        best ``limit`` candidates and every chosen one, the chosen — and where it ran
        ``before``, if still feasible — with what the plugins say of them (metric
        readings; the room a subject's requests found): why it went, and why it left."""
        state, subject = self.state, self.subject
        chosen = {r.candidate.key for r in self.chosen}
        left = [r for r in (self.evaluation.ranked.get(candidate_key(t.kind, t.namespace, t.name))
                            for t in before) if r is not None and r.candidate.key not in chosen]

        def described(r: Ranked) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for plugin in framework.describers:
                out.update(plugin.describe(state, subject, r.candidate, snapshot))
            return out

        return explanation(self.evaluation, limit, [*self.chosen, *left], described)


@dataclass(slots=True)
class Deferred:
    """Deferrable work that should start at ``start`` on ``at`` rather than now."""

    plan: deferral.Plan
    evaluation: Evaluation
    subject: Subject

    @property
    def start(self) -> float:
        assert self.plan.start is not None
        return self.plan.start

    @property
    def until(self) -> datetime:
        """When the work is planned to start, to the second (stable as the reason is)."""
        return datetime.fromtimestamp(self.start, UTC).replace(microsecond=0)

    @property
    def reason(self) -> str:
        """Stable while the plan is (it is written only when it changes)."""
        assert self.plan.at is not None
        metric = self.subject.placement.cost_metric
        if self.plan.cost is None:
            return (f"deferred until {_iso(self.start)} (its latest start): no feasible "
                    f"cluster has a value of {metric} yet")
        return (f"deferred until {_iso(self.start)}: {metric} is forecast lowest then, on "
                f"{self.plan.at.candidate.ref.name}, before the latest start "
                f"{_iso(self.plan.latest)}")

    def explained(self) -> list[dict[str, Any]]:
        p = self.plan
        assert p.at is not None
        return [{"deferred": {"start": _iso(self.start), "latest_start": _iso(p.latest),
                              "on": p.at.candidate.key, "cost": p.cost,
                              "cheapest_now": p.cost_now,
                              "metric": self.subject.placement.cost_metric}}]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class NoFit:
    reason: str
    evaluation: Evaluation | None = None  # None when pre-filter refused the subject
    retry: bool = False  # a plugin failed: try again after a backoff
    quota: bool = False  # it fits, but over its namespace's quota: no room is made for it

    def explained(self, limit: int) -> list[dict[str, Any]]:
        return explanation(self.evaluation, limit) if self.evaluation is not None else []


@dataclass(frozen=True, slots=True)
class Deferral:
    """How deferrable work is planned (the scheduler's configuration)."""

    margin: float = 120.0  # seconds before the deadline by which it is bound
    min_saving: float = 0.05  # the fraction a later start must save to be waited for


def decide(framework: Framework, subject: Subject, snapshot: Snapshot, current: list[Target],
           *, keep_current: bool = False, defer: Deferral = Deferral(),
           now: float | None = None) -> Decision | Deferred | NoFit:
    """Where ``subject`` should run now, given it runs on ``current`` (and, for deferrable
    work not started yet, whether it should rather start later). ``now``: seconds since
    the epoch (a simulation's clock), else the time."""
    state = CycleState(current=current, fleet=snapshot.fleet(subject))
    status = framework.pre_filter(state, subject, snapshot)
    if not status.ok:
        return NoFit(f"{status.plugin}: {status.reason}" if status.reason else str(status))
    evaluation = framework.evaluate(state, subject, snapshot)
    if evaluation.error is not None:
        return NoFit(str(evaluation.error), evaluation, retry=True)
    if not evaluation.ranked:
        if framework.on.post_filters:
            framework.post_filter(state, subject, evaluation.rejected)
        if state.fleet is not None and not state.fleet.candidates:
            return NoFit(_nowhere(subject, snapshot), evaluation)
        return NoFit(summary(subject.candidate_kind, evaluation), evaluation)
    ranked: Sequence[Ranked] = evaluation.ranked
    if subject.placement.cluster_groups:
        ranked = grouped(subject, ranked)
    latest = deferral.latest_start(subject, defer.margin) if not current else None
    if latest is not None:
        t = time.time() if now is None else now
        plan = deferral.plan(subject, ranked, snapshot, state.fleet, t, latest, defer.min_saving)
        if plan.start is not None:
            return Deferred(plan, evaluation, subject)
        ranked = plan.ranked
    chosen = select(subject, ranked, current, keep_current=keep_current,
                    fill=framework.selector(state))
    if not divided(subject):
        return _within_quota(Decision(targets(chosen), evaluation, chosen, subject, state),
                             snapshot)
    total = total_replicas(subject)
    rooms = [room(subject, r.candidate, snapshot, current) for r in chosen]
    division = divide(subject, chosen, current, rooms, total)
    shares = division.shares or [(r, 0) for r in chosen[:1]]  # scaled to zero: stays put
    if total and not division.shares:
        return NoFit(f"no cluster has room for one of its {total} replicas; "
                     + summary(subject.candidate_kind, evaluation), evaluation)
    chosen = [r for r, _ in shares]
    placed = [Target(t.kind, t.name, t.namespace, t.score, n)
              for t, (_, n) in zip(targets(chosen), shares, strict=True)]
    return _within_quota(Decision(placed, evaluation, chosen, subject, state,
                                  division.unplaced), snapshot)


def _within_quota(decision: Decision, snapshot: Snapshot) -> Decision | NoFit:
    """The decision, or a NoFit if what it asks of the fleet, with what the namespace's
    other applications use, goes over the namespace's quota (docs/teams.md): checked
    on the whole decision, since a quota counts every copy on every cluster; then what
    it asks of each cluster set the policy gives a quota of, against that set's."""
    quota = snapshot.quota(decision.subject)
    if quota is None:
        return decision
    asks = [(r.candidate.key, snapshot.demand_on(decision.subject, r.candidate).on(t.replicas))
            for r, t in zip(decision.chosen, decision.targets, strict=True)]
    over = quota.over(sum((a for _, a in asks), placements(len(asks))))
    for limited in quota.sets if not over else ():  # and each set's, of its copies there
        there = [a for key, a in asks if limited.holds(key)]
        over = quota.over_in(limited, sum(there, placements(len(there)))) if there else ""
        if over:
            break
    return NoFit(over, decision.evaluation, quota=True) if over else decision


def _nowhere(subject: Subject, snapshot: Snapshot) -> str:
    """An empty fleet: candidates are namespaced, so say where they are (an application
    in ``prod`` is placed only on clusters in ``prod`` and in the cluster sets its
    policy binds)."""
    noun = {"Cluster": "cluster", "Project": "project"}.get(subject.candidate_kind, "cloud")
    ns = subject.ref.namespace
    sets = snapshot.bound_sets(ns) if subject.candidate_kind == "Cluster" else []
    own = (f"no {noun} in namespace {ns} nor in the cluster sets bound to it "
           f"({listed(sets)})" if sets else f"no {noun} in namespace {ns}")
    where = snapshot.namespaces(subject.candidate_kind)
    return f"{own}; {noun}s are in: {listed(where)}" if where else f"{own}, nor in any other"


__all__ = ["Decision", "Deferral", "Deferred", "NoFit", "decide"]
