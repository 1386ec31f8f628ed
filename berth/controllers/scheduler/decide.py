"""The one way a placement is decided: a subject and a snapshot in, a value out.

``decide`` runs pre-filter, filter, score and selection on one frozen fleet
and returns a :class:`Decision` (the targets, with what is needed to explain
them) or a :class:`NoFit` (nothing fits, with the diagnosis; or a plugin
failed and the attempt should be retried). It writes nothing and queues
nothing: the scheduler acts on the value (reserve, permit, bind, write), the
sweep after a change compares it with what is bound, and a what-if asks it
without acting at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from berth.controllers.scheduler.framework import CycleState, Evaluation, Framework, Ranked, Subject
from berth.controllers.scheduler.framework.types import Snapshot
from berth.controllers.scheduler.selection import explanation, select, summary, targets
from berth.store.documents import Target


@dataclass(slots=True)
class Decision:
    targets: list[Target]  # best first
    evaluation: Evaluation
    chosen: list[Ranked]
    subject: Subject
    state: CycleState  # for reserve, permit and bind

    @property
    def reason(self) -> str:
        """``7/12 clusters are available: ...`` (built when asked: most are never written)."""
        return summary(self.subject.candidate_kind, self.evaluation)

    def explained(self, framework: Framework, snapshot: Snapshot, limit: int
                  ) -> list[dict[str, Any]]:
        """The explanation written into the Binding (built only when it is written)."""
        details: dict[str, dict[str, Any]] = {}
        for describe in framework.describers:
            for r in self.chosen[:limit]:
                details.setdefault(r.candidate.key, {}).update(
                    describe(self.state, self.subject, r.candidate, snapshot))
        return explanation(self.evaluation, details, limit)


@dataclass(slots=True)
class NoFit:
    reason: str
    evaluation: Evaluation | None = None  # None when pre-filter refused the subject
    retry: bool = False  # a plugin failed: try again after a backoff

    def explained(self, limit: int) -> list[dict[str, Any]]:
        return explanation(self.evaluation, {}, limit) if self.evaluation is not None else []


def decide(framework: Framework, subject: Subject, snapshot: Snapshot, current: list[Target],
           *, keep_current: bool = False) -> Decision | NoFit:
    """Where ``subject`` should run now, given it runs on ``current``."""
    state = CycleState(current=current, fleet=snapshot.fleet(subject))
    status = framework.pre_filter(state, subject, snapshot)
    if not status.ok:
        return NoFit(f"{status.plugin}: {status.reason}" if status.reason else str(status))
    evaluation = framework.evaluate(state, subject, snapshot)
    if evaluation.error is not None:
        return NoFit(str(evaluation.error), evaluation, retry=True)
    if not evaluation.ranked:
        if framework.plugins("postFilter"):
            framework.post_filter(state, subject, evaluation.rejected)
        return NoFit(summary(subject.candidate_kind, evaluation), evaluation)
    chosen = select(subject, evaluation.ranked, current, keep_current=keep_current,
                    fill=framework.selector(state))
    return Decision(targets(chosen), evaluation, chosen, subject, state)


__all__ = ["Decision", "NoFit", "decide"]
