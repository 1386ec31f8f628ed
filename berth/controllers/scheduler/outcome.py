"""What an attempt's outcome writes: the one function from an outcome to a Binding write.

Every way a scheduling attempt ends that an observer should see — a
placement, a placement kept as it is, a move held back, deferred work,
nothing fitting, a gang out of time — is said as an :class:`Outcome`: the
targets the Binding should name, its state and reason, and its explanation
(built only if it is written). :func:`binding_write` turns that and the
Binding as the scheduler last knew it into the :class:`Write` the one Binding
writer (:mod:`binder`) executes, or None when nothing an observer would see
changed. It is pure: the time and the leader's term are given, nothing is
read or written, so what a Binding says is tested without a scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from berth.controllers.scheduler.binder import Write
from berth.controllers.scheduler.framework import Evaluation, Subject
from berth.controllers.scheduler.record import event_of, names, placement_record
from berth.controllers.scheduler.views import BindingView
from berth.store import ledger as L
from berth.store.documents import (
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    BindingStatus,
    HeldBy,
    ObjectRef,
    Preemption,
    Target,
)

Explained = Callable[[], list[dict[str, Any]]]
TargetRef = tuple[str, str | None, str]  # kind, namespace, name


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the Binding of a subject should say after an attempt."""

    targets: list[Target]
    state: BindingState
    reason: str
    explained: Explained  # the explanation, built only if the Binding is written
    evaluation: Evaluation | None = None  # what the attempt found (the ledger's record)
    held: HeldBy = HeldBy.NOTHING  # the rule holding a better placement back (kept targets)
    deferred_until: datetime | None = None  # Pending: when the work is planned to start
    preemption: Preemption | None = None  # a plan to make room for it, while one runs
    yielded_to: str = ""  # the preemptor it made room for (its copy moved or stopped)
    yielded_plan: str = ""  # and the plan's id


def refs(ts: list[Target]) -> frozenset[TargetRef]:
    """The targets named, whatever their order and shares."""
    return frozenset((t.kind, t.namespace, t.name) for t in ts)


def shares(ts: list[Target]) -> dict[TargetRef, int | None]:
    """Each target's share of a divided application's replicas (None: the whole)."""
    return {(t.kind, t.namespace, t.name): t.replicas for t in ts}


def binding_write(subject: Subject, binding: BindingView | None, outcome: Outcome, *,
                  term: int, now: datetime, say: bool = True,
                  failed: Mapping[str, float] | None = None, ledger: bool = True
                  ) -> Write | None:
    """The Binding ``outcome`` makes of ``binding`` (None: there is none), as a write;
    None when an observer would see nothing change.

    A Scheduled Binding's reason is not compared (it sums up the fleet, which
    changes all the time); a held move's reason is, so a hold is written once
    and cleared once. The time of scheduling is kept while the targets stay, the
    decision's id (its ledger record's) while the shares do. ``say``: make the log
    line that says a change of targets or state. ``failed``: the targets the subject
    could not become available on — given, the change is recorded: the write carries
    its ledger record (unless ``ledger`` is off) and its event (None: neither)."""
    ref = subject.ref
    new, state, reason = outcome.targets, outcome.state, outcome.reason
    same_targets = binding is not None and refs(binding.spec.targets) == refs(new)
    same_shares = same_targets and binding is not None and (
        shares(binding.spec.targets) == shares(new))
    plain = state == BindingState.SCHEDULED and not outcome.held
    if (binding is not None and same_shares and binding.spec.generation == subject.generation
            and binding.status.state == state and binding.status.held == outcome.held
            and binding.status.deferred_until == outcome.deferred_until
            and binding.status.preemption == outcome.preemption
            and binding.status.yielded_to == outcome.yielded_to and (
                binding.status.reason == reason or (plain and not binding.status.reason))):
        return None
    scheduled = binding.spec.scheduled if binding is not None and same_targets else (
        now if new else None)
    rid = L.record_id(now) if failed is not None or (new and not same_shares) else ""
    decision = binding.spec.decision if binding is not None and same_shares else (
        rid if new else "")
    doc = Binding(
        metadata=BindingMeta(name=ref.name, namespace=ref.namespace,
                             created=binding.metadata.created if binding else now,
                             modified=now),
        spec=BindingSpec(resource=ObjectRef(ref.kind, ref.name, ref.namespace),
                         generation=subject.generation, targets=new, scheduled=scheduled,
                         decision=decision),
        status=BindingStatus(state=state, reason=reason, held=outcome.held,
                             deferred_until=outcome.deferred_until,
                             preemption=outcome.preemption, yielded_to=outcome.yielded_to,
                             yielded_plan=outcome.yielded_plan,
                             explanation=outcome.explained(), term=term),
    )
    said = None
    if say and (binding is None or not same_shares or binding.status.state != state):
        was = names(binding.spec.targets) if binding is not None else "(new)"
        said = (f"{ref.kind} {ref.namespace or '-'}/{ref.name}: {was} → {names(new)}, "
                f"{state} ({reason or '-'})")
    record = event = None
    if failed is not None:
        made = placement_record(subject, binding, doc, evaluation=outcome.evaluation,
                                failed=failed, own=rid)
        if made is not None:
            if ledger:
                record = L.put(ref.kind, ref.namespace, ref.name, "scheduler", made, rid)
            event = event_of(made)
    return Write(subject.key, subject.binding_key, doc, said=said, record=record, event=event)


__all__ = ["Explained", "Outcome", "binding_write", "names", "refs", "shares"]
