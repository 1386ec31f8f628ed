"""A Binding's decision explained for people: the ranked candidates and the rejected
ones as tables, its render as ``berth explain`` prints it, and the propagator's side
in a line (the CLI and the console show the same cells)."""

from __future__ import annotations

from typing import Any

from berth.actions.resources import decided, room, target_note
from berth.store.documents import ApplicationStatus, Binding


def _metrics(entry: dict[str, Any]) -> str:
    parts = []
    for name, m in (entry.get("metrics") or {}).items():
        if "normalized" in m:
            parts.append(f"{name}={m['normalized']:g}x{m['weight']:g}")
        else:
            parts.append(f"{name}: {m.get('reason', '?')}")
    return " ".join(parts)


RANKED_HEAD = ("CANDIDATE", "SCORE", "TIER", "BREAKDOWN")
REJECTED_HEAD = ("REJECTED BY", "COUNT", "REASON", "CANDIDATES")


def explanation(b: Binding) -> tuple[list[tuple[str, str, str, str]],
                                     list[tuple[str, str, str, str]]]:
    """A Binding's explanation as the two tables ``berth explain`` prints and the console
    shows (one function for both): the ranked candidates (RANKED_HEAD's cells) and the
    rejected ones grouped by plugin and reason (REJECTED_HEAD's)."""
    ranked, rejected = [], []
    for e in b.status.explanation:
        if "score" in e:
            breakdown = " ".join(f"{k}={v:.4f}" for k, v in e.get("scores", {}).items())
            extra = _metrics(e)
            ranked.append((str(e["candidate"]), f"{e['score']:.4f}", str(e.get("tier", 0)),
                           breakdown + ("  " + extra if extra else "")))
        elif "rejected_by" in e:
            # Bindings keep the groups small enough to name, with every name (the
            # reason counts the rest); older ones also larger groups, named in part
            # or not at all, hence "...".
            named = e.get("candidates") or []
            names = ", ".join(c.rsplit("/", 1)[-1] for c in named)
            more = "" if e.get("count", 0) <= len(named) else ", ..."
            rejected.append((str(e["rejected_by"]), str(e.get("count", 1)), str(e["reason"]),
                             names + more if named else ""))
    return ranked, rejected


def render(b: Binding) -> str:
    spec, status = b.spec, b.status
    ref = spec.resource
    lines = [
        f"{ref.kind} {ref.namespace}/{ref.name}: {status.state or '?'} "
        f"(generation {spec.generation}{decided(b)})",
        f"reason: {status.reason}",
        *room(b),
        "targets: " + (", ".join(f"{t.kind} {t.namespace + '/' if t.namespace else ''}{t.name}"
                                 + target_note(t) for t in spec.targets) or "none"),
    ]
    ranked, rejected = explanation(b)
    if ranked:
        lines += ["", f"{'CANDIDATE':<40} {'SCORE':>8} {'TIER':>4}  BREAKDOWN"]
        lines += [f"{c:<40} {s:>8} {t:>4}  {more}".rstrip() for c, s, t, more in ranked]
    if rejected:
        lines += ["", f"{'REJECTED BY':<20} {'COUNT':>5}  REASON  (CANDIDATES)"]
        lines += [f"{by:<20} {n:>5}  {why}" + (f"  ({names})" if names else "")
                  for by, n, why, names in rejected]
    return "\n".join(lines)


def propagation(status: ApplicationStatus | None) -> str:
    """The propagator's side of an application, in one line."""
    if status is None:
        return "propagator: no status yet (not applied anywhere)"
    st = status.status
    where = ", ".join(f"{r.namespace + '/' if r.namespace else ''}{r.name}"
                      for r in st.running_on) or "nowhere"
    reason = f" ({st.reason})" if st.reason else ""
    waits = "".join(f"\n  waits on {cid}: {why}" for cid, why in sorted(st.waits_for.items()))
    return f"propagator: {st.state or '?'}{reason}; running on {where}{waits}"


__all__ = ["RANKED_HEAD", "REJECTED_HEAD", "explanation", "propagation", "render"]
