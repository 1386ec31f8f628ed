"""An application's ledger read for people: what each record says happened and why,
as a table, and where the application ran at a time (``berth history``, ``berth
explain --at``, the console's timeline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import msgspec

from berth.actions.resources import table
from berth.store import ledger
from berth.store.documents import Target
from berth.store.documents import ledger as L
from berth.store.documents.durations import DurationError, seconds

Entries = list[tuple[ledger.Entry, L.Record]]


def when(text: str, now: datetime | None = None) -> datetime:
    """A time as a user gives it: ISO 8601 (``2026-11-28T01:00:00Z``; no zone: UTC), a
    record id, or a duration ago (``90m``, ``2h``, ``1d``). ValueError otherwise."""
    text = text.strip()
    try:
        return ledger.id_time(text)
    except ValueError:
        pass
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    except ValueError:
        pass
    try:
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds(text))
    except DurationError:
        raise ValueError(f"{text!r} is not a time: say 2026-11-28T01:00:00Z, a record id "
                         "(20261128T010000.000000Z) or a duration ago (90m, 2h, 1d)") from None


def places(targets: list[Target]) -> str:
    """``de-1, fr-2`` (divided: ``de-1=3, fr-2=2``), or ``nowhere``."""
    return ", ".join(t.name if t.replicas is None else f"{t.name}={t.replicas}"
                     for t in targets) or "nowhere"


def what(r: L.Record) -> str:
    """What a record says happened, in one cell."""
    if r.changes:
        return "; ".join(
            (f"{c.cluster}: " if c.cluster else "") + f"{c.was + ' ' if c.was else ''}→ {c.now}"
            for c in r.changes)
    moved = f"{places(r.source)} → {places(r.targets)}"
    if r.event == L.HELD:
        return f"stays on {places(r.targets)} ({r.rule or 'held'}): {r.reason}"
    if r.event in (L.MOVED, L.PLACED):
        return moved if r.source else f"→ {places(r.targets)}"
    return f"{r.state} on {places(r.targets)}: {r.reason}" if r.reason else places(r.targets)


def why(r: L.Record) -> str:
    """The trigger and its particulars; for metrics, the metrics the chosen were scored by
    (the record keeps them with the candidates, not twice)."""
    detail = r.detail or (", ".join(sorted({m for c in r.candidates if c.chosen
                                             for m in c.metrics}))
                          if r.trigger == "metrics" else "")
    return f"{r.trigger} ({detail})" if detail else r.trigger or "-"


def lines(entries: Entries, *, wide: bool = False) -> list[str]:
    """The records as a table, oldest first."""
    head = ["TIME", "BY", "EVENT", "TRIGGER", "WHAT"] + (["DECISION", "BEST"] if wide else [])
    rows = [head]
    for e, r in entries:
        row = [f"{r.time:%Y-%m-%dT%H:%M:%S}Z", e.by, r.event, why(r), what(r)]
        if wide:
            row += [e.id if e.by == "scheduler" else r.decision or "-", ", ".join(
                f"{c.name.rsplit('/', 1)[-1]} {c.score:.3f}" for c in r.candidates
                if c.score is not None)]
        rows.append(row)
    return table(rows).split("\n")


@dataclass
class Then:
    """Where an application ran at a time, and why, from its ledger."""

    at: datetime
    decision: L.Record | None = None  # the scheduler's last record up to then
    decision_id: str = ""
    placed: L.Record | None = None  # the record that made its targets of then
    state: str = ""  # the propagator's word of then
    health: dict[str, str] = field(default_factory=dict)  # cluster → health then

    def to_builtins(self) -> dict[str, object]:
        return {"at": self.at.isoformat(), "state": self.state, "health": self.health,
                "decision": (msgspec.to_builtins(self.decision) | {"id": self.decision_id})
                if self.decision is not None else None,
                "placed_by": msgspec.to_builtins(self.placed)
                if self.placed is not None else None}


def then(entries: Entries, at: datetime) -> Then:
    """What the records up to ``at`` say of that moment."""
    out = Then(at)
    for e, r in entries:
        if r.time > at:
            break
        if e.by == "scheduler":
            out.decision, out.decision_id = r, e.id
            if r.event in (L.PLACED, L.MOVED) or out.placed is None:
                out.placed = r
        for c in r.changes:
            if c.what == "state":
                out.state = c.now
            elif c.what == "health":
                if c.now == "removed":
                    out.health.pop(c.cluster, None)
                else:
                    out.health[c.cluster] = c.now
    return out


def render_then(namespace: str, name: str, t: Then) -> str:
    """``explain --at``'s answer, as text."""
    head = f"Application {namespace}/{name} at {t.at:%Y-%m-%dT%H:%M:%S}Z (from the ledger)"
    d = t.decision
    if d is None:
        return f"{head}: no record so early (placed later, or retention removed it)"
    out = [head + ":", f"placed on: {places(d.targets)} ({d.state or '?'})"]
    p = t.placed
    if p is not None:
        out.append(f"since:     {p.time:%Y-%m-%dT%H:%M:%S}Z, {p.event.lower()} "
                   f"({why(p)}){' from ' + places(p.source) if p.source else ''}")
    if d is not p:
        out.append(f"then:      {d.event} at {d.time:%Y-%m-%dT%H:%M:%S}Z ({why(d)}): "
                   f"{what(d)}")
    if d.reason:
        out.append(f"reason:    {d.reason}")
    shown = p if p is not None and p.candidates else d
    if shown.candidates:
        rows = [["CANDIDATE", "SCORE", "CHOSEN", "METRICS / WHY NOT"]]
        for c in shown.candidates:
            rows.append([c.name, f"{c.score:.4f}" if c.score is not None else "-",
                         "yes" if c.chosen else "", c.rejected or " ".join(
                             f"{m}={v:g}" for m, v in sorted(c.metrics.items()))])
        out += ["candidates then:", *("  " + ln for ln in table(rows).split("\n"))]
    if t.state or t.health:
        out.append(f"propagator: {t.state or '?'}" + (" — " + ", ".join(
            f"{c} {h}" for c, h in sorted(t.health.items())) if t.health else ""))
    return "\n".join(out)


__all__ = ["Entries", "Then", "lines", "places", "render_then", "then", "what", "when", "why"]
