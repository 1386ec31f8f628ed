"""What the scheduler writes in the ledger with a Binding: the change, its trigger and
the candidates in short (docs/ledger.md).

:func:`placement_record` is pure: from the Binding as it was, the Binding about
to be written and what the attempt found, it says whether an observer would
want the change remembered — a placement, a move, a hold and its end, nothing
fitting, deferred work, a new spec decided — and builds the
:class:`~berth.store.documents.ledger.Record`; :func:`event_of` says it as an
event once it is written. A Binding rewritten only because
its summary changed (``7/12 clusters ...`` → ``8/12 ...``) is not recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, assert_never

from berth.controllers.scheduler.framework import Evaluation, Subject
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.plugins.taint_toleration import NAME as TAINTS
from berth.controllers.scheduler.views import BindingView
from berth.store.documents import Binding, BindingState, HeldBy, Target
from berth.store.documents import ledger as L
from berth.store.events import NORMAL, WARNING

BEST = 3  # candidates recorded besides the chosen ones and where it ran before
_REASONED = (L.HELD, L.UNSCHEDULABLE, L.DEFERRED)


def _shares(ts: list[Target]) -> dict[tuple[str, str | None, str], int | None]:
    return {(t.kind, t.namespace, t.name): t.replicas for t in ts}


def _key(t: Target) -> str:
    return candidate_key(t.kind, t.namespace, t.name)


def event(binding: BindingView | None, doc: Binding) -> L.LedgerEvent | None:
    """What kind of change writing ``doc`` over ``binding`` is; None: nothing to record."""
    new, status = doc.spec.targets, doc.status
    if status.held:
        return L.HELD
    if binding is None:
        return L.PLACED if new else _by_state(status.state)
    old = binding.spec.targets
    if _shares(old) != _shares(new):
        if new and status.state == BindingState.SCHEDULED:
            return L.MOVED if old else L.PLACED
        return _by_state(status.state)
    if binding.status.state != status.state:
        return _by_state(status.state)
    if binding.spec.generation != doc.spec.generation:
        return L.KEPT
    if binding.status.held:
        return L.RELEASED
    if status.state == BindingState.PENDING and (
            binding.status.deferred_until != status.deferred_until
            or binding.status.reason != status.reason):
        return L.DEFERRED  # a new plan
    return None


def _by_state(state: BindingState | None) -> L.LedgerEvent:
    """The ledger's event for a Binding that comes to ``state``."""
    match state:
        case BindingState.UNSCHEDULABLE:
            return L.UNSCHEDULABLE
        case BindingState.PENDING:
            return L.DEFERRED
        case BindingState.SCHEDULED | None:
            return L.KEPT
        case _:
            assert_never(state)


def trigger(subject: Subject, binding: BindingView | None, evaluation: Evaluation | None,
            failed: Mapping[str, float], metrics: list[str], doc: Binding | None = None
            ) -> tuple[str, str]:
    """Why the scheduler decided again: one of ``TRIGGERS``, and its particulars (``doc``:
    the Binding written, which says whether it made room for another)."""
    if doc is not None and doc.status.yielded_to and (
            binding is None or binding.status.yielded_plan != doc.status.yielded_plan):
        return "preemption", (f"for {doc.status.yielded_to} (plan {doc.status.yielded_plan})"
                              if doc.status.yielded_plan else f"for {doc.status.yielded_to}")
    if binding is None or not binding.spec.targets:
        return "new", ""
    if binding.spec.generation != subject.generation:
        return "spec", f"generation {binding.spec.generation} → {subject.generation}"
    for t in binding.spec.targets:
        key = _key(t)
        if key in failed:
            return "failed-target", key
        status = evaluation.rejection(key) if evaluation is not None else None
        if status is not None:
            return ("taint" if status.plugin == TAINTS else "cluster",
                    f"{key}: {status.plugin}: {status.reason}" if status.plugin
                    else f"{key}: {status.reason}")
        if evaluation is not None and key not in evaluation.fleet.by_key:
            return "cluster", f"{key}: gone"
    if metrics:  # scored by metric values (their values are the candidates')
        return "metrics", ""
    return "scores", ""


def candidates(doc: Binding, before: list[Target], evaluation: Evaluation | None,
               chosen: set[str]) -> list[L.Candidate]:
    """The best few candidates, every ``chosen`` one and where it ran before, in short."""
    was = {_key(t) for t in before}
    out: list[L.Candidate] = []
    seen: set[str] = set()
    for entry in doc.status.explanation:
        name = entry.get("candidate")
        if "score" not in entry or not isinstance(name, str):
            continue
        if len(out) >= BEST and name not in chosen and name not in was:
            continue
        seen.add(name)
        out.append(L.Candidate(name=name, score=round(entry["score"], 4),
                               chosen=name in chosen,
                               metrics=_values(entry.get("metrics"))))
    for name in sorted(was - seen):
        status = evaluation.rejection(name) if evaluation is not None else None
        out.append(L.Candidate(name=name, rejected=(
            f"{status.plugin}: {status.reason}" if status is not None else "not feasible")))
    return out


def _bare(ts: list[Target]) -> list[Target]:
    """Targets without their scores (the candidates carry them)."""
    return [Target(t.kind, t.name, t.namespace, replicas=t.replicas) for t in ts]


def names(targets: list[Target]) -> str:
    """Targets for a line: ``de-1,de-2`` (divided: ``de-1=3,de-2=2``), or ``nowhere``."""
    return ",".join(t.name if t.replicas is None else f"{t.name}={t.replicas}"
                    for t in targets) or "nowhere"


def event_of(record: L.Record) -> tuple[str, str, str] | None:
    """The event a scheduler record makes (type, reason, message); None for nothing
    fitting (FailedScheduling is said at each attempt, counted by the recorder)."""
    moved = f"{names(record.source)} → {names(record.targets)}"
    why = f"{record.trigger}: {record.detail}" if record.detail else record.trigger
    match record.event:
        case L.PLACED:
            return NORMAL, "Scheduled", f"placed on {names(record.targets)} ({why})"
        case L.MOVED:
            return NORMAL, "Moved", f"{moved} ({why})"
        case L.KEPT:
            return NORMAL, "Scheduled", f"stays on {names(record.targets)} ({why})"
        case L.HELD:
            return NORMAL, "MoveHeld", record.reason
        case L.RELEASED:
            return NORMAL, "HoldReleased", f"stays on {names(record.targets)}"
        case L.DEFERRED:
            return NORMAL, "Deferred", record.reason
        case L.UNSCHEDULABLE if record.trigger == "preemption":  # its last copy stopped
            return WARNING, "Preempted", f"stopped on {names(record.source)} ({why})"
        case L.UNSCHEDULABLE | L.HEALTH | L.ROLLOUT:  # said otherwise; not the scheduler's
            return None
        case _:
            assert_never(record.event)


def _values(metrics: Any) -> dict[str, float]:
    if not isinstance(metrics, dict):
        return {}
    return {m: float(f"{e['value']:.6g}") for m, e in metrics.items()  # 6 digits: enough
            if isinstance(e, dict) and isinstance(e.get("value"), int | float)}


def placement_record(subject: Subject, binding: BindingView | None, doc: Binding, *,
                     evaluation: Evaluation | None, failed: Mapping[str, float], own: str
                     ) -> L.Record | None:
    """The ledger record of writing ``doc`` over ``binding`` (``own``: its id, the time
    of the write's); None: nothing to remember."""
    what = event(binding, doc)
    if what is None:
        return None
    before = list(binding.spec.targets) if binding is not None else []
    chosen = {_key(t) for t in doc.spec.targets}
    note = doc.status.explanation[0] if doc.status.explanation else {}
    if what == L.HELD and isinstance(note.get("would_move_to"), list):
        chosen = {str(k) for k in note["would_move_to"]}  # what the decision chose
    short = candidates(doc, before, evaluation, chosen)
    metrics = sorted({m for c in short for m in c.metrics})
    why, detail = trigger(subject, binding, evaluation, failed, metrics, doc)
    rule = doc.status.held if what == L.HELD else HeldBy.NOTHING
    assert doc.metadata.modified is not None
    return L.Record(time=doc.metadata.modified, event=what, generation=doc.spec.generation,
                    trigger=why, detail=detail, source=_bare(before),
                    targets=_bare(doc.spec.targets),
                    state=doc.status.state or "", rule=rule,
                    # the reason where it is the cause: a hold, nothing fitting, a deferral
                    # (a placement's sums up the fleet; its trigger and candidates say why)
                    reason=doc.status.reason if what in _REASONED else "",
                    candidates=short,
                    decision=doc.spec.decision if doc.spec.decision != own else "")  # (key's)


__all__ = ["candidates", "event", "event_of", "names", "placement_record", "trigger"]
