"""Choosing targets from a ranking, per placement policy (seed 003), and explaining.

One cluster (PickOne, the default), the best N (PickN), every feasible one
(PickAll), or the feasible ones among those named (PickFixed). Batch mode:
the ranking is computed once per placement, not once per replica. Ties are
broken at random. Raising N never moves existing targets: while a PickN
subject has fewer feasible targets than it wants, it keeps them and adds the
best others.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from controllers.scheduler.framework import Evaluation, Ranked, Status, Subject
from controllers.scheduler.framework.types import candidate_key
from store.documents import Target


def wanted(subject: Subject, feasible: int) -> int:
    p = subject.placement
    if p.policy == "PickN":
        return p.number_of_clusters or 1
    if p.policy in ("PickAll", "PickFixed"):
        return feasible
    return 1


def _tie_groups(ranked: Sequence[Ranked]) -> Iterator[Ranked]:
    """``ranked`` in order, each run of equal (tier, score) shuffled."""
    i = 0
    while i < len(ranked):
        j = i + 1
        while j < len(ranked) and ranked[j].tier == ranked[i].tier and (
                abs(ranked[j].score - ranked[i].score) <= 1e-12):
            j += 1
        if j - i == 1:
            yield ranked[i]
        else:
            group = list(ranked[i:j])
            random.shuffle(group)
            yield from group
        i = j


def select(subject: Subject, ranked: Sequence[Ranked], current: Sequence[Target],
           *, keep_current: bool = False) -> list[Ranked]:
    """The chosen entries of ``ranked``, best first.

    ``keep_current`` keeps every feasible current target (ignoredDuringExecution,
    or a PickN that grew) and fills up with the best others.
    """
    n = wanted(subject, len(ranked))
    if n <= 0:
        return []
    current_keys = {candidate_key(t.kind, t.namespace, t.name) for t in current}
    chosen: list[Ranked] = []
    if keep_current or (subject.placement.policy == "PickN" and current_keys):
        kept = [r for r in ranked if r.candidate.key in current_keys]
        if keep_current or len(kept) < n:
            chosen = kept[:n]
    taken = {r.candidate.key for r in chosen}
    for r in _tie_groups(ranked):
        if len(chosen) >= n:
            break
        if r.candidate.key not in taken:
            chosen.append(r)
            taken.add(r.candidate.key)
    chosen.sort(key=lambda r: r.order, reverse=True)
    return chosen


def targets(chosen: Sequence[Ranked]) -> list[Target]:
    return [Target(r.candidate.ref.kind, r.candidate.ref.name, r.candidate.ref.namespace,
                   round(r.score, 9)) for r in chosen]


def summary(kind: str, evaluation: Evaluation) -> str:
    """``0/12 clusters are available: 7 label constraint '...', 3 not ONLINE (...)``."""
    noun = {"Cluster": "clusters", "Cloud": "clouds"}.get(kind, kind.lower() + "s")
    head = f"{len(evaluation.ranked)}/{evaluation.considered} {noun} are available"
    if not evaluation.rejected:
        return head
    counts = Counter(status.reason or status.code.value for status in evaluation.rejected.values())
    parts = [f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))]
    return f"{head}: {', '.join(parts)}"


def explanation(evaluation: Evaluation, details: dict[str, dict[str, Any]],
                limit: int) -> list[dict[str, Any]]:
    """The best ``limit`` candidates with their breakdown, then up to ``limit`` rejections."""
    out: list[dict[str, Any]] = []
    for r in evaluation.ranked[:limit]:
        entry: dict[str, Any] = {
            "candidate": r.candidate.key,
            "score": round(r.score, 9),
            "scores": {name: round(v, 9) for name, v in r.scores.items()},
        }
        if r.tier:
            entry["tier"] = r.tier
        entry.update(details.get(r.candidate.key, {}))
        out.append(entry)
    for key, status in list(evaluation.rejected.items())[:limit]:
        out.append(_rejection(key, status))
    return out


def _rejection(key: str, status: Status) -> dict[str, Any]:
    return {"candidate": key, "rejected_by": status.plugin, "reason": status.reason}
