"""Choosing targets from a ranking, per placement policy (Fleet's placement), and explaining.

One cluster (PickOne, the default), the best N (PickN), every feasible one
(PickAll), or the feasible ones among those named (PickFixed). Batch mode:
the ranking is computed once per placement, not once per replica. Ties are
broken at random. Raising N never moves existing targets: while a PickN
subject has fewer feasible targets than it wants, it keeps them and adds the
best others.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from itertools import islice
from typing import Any

from berth.controllers.scheduler.framework.evaluation import Evaluation
from berth.controllers.scheduler.framework.ranking import Lazy, Ranked, Ranking
from berth.controllers.scheduler.framework.types import Subject, candidate_key
from berth.store.documents import Target

NAMED = 3  # an explanation keeps a rejection group, naming its candidates, up to this size


def wanted(subject: Subject, feasible: int) -> int:
    p = subject.placement
    if p.policy == "PickN":
        return p.number_of_clusters or 1
    if p.policy in ("PickAll", "PickFixed"):
        return feasible
    return 1


def _tie_groups(ranked: Iterable[Ranked]) -> Iterator[Ranked]:
    """``ranked`` in order, each run of equal (tier, score) shuffled; an entry is read
    only when the run before it is over (one entry ahead of what is taken)."""
    entries = iter(ranked)
    run = list(islice(entries, 1))
    while run:
        first = run[0]
        nxt = None
        for r in entries:
            if r.tier == first.tier and abs(r.score - first.score) <= 1e-12:
                run.append(r)
            else:
                nxt = r
                break
        if len(run) > 1:
            random.shuffle(run)
        yield from run
        run = [nxt] if nxt is not None else []


class Pool(Lazy):
    """A ranking in tie-broken order, materialized only as far as it is read."""

    def __init__(self, ranked: Sequence[Ranked]) -> None:
        super().__init__(len(ranked), _tie_groups(ranked))
        self._ranked = ranked

    def values(self, label: str) -> set[str]:
        """The values of ``label`` among all entries (from bitsets when it can)."""
        if isinstance(self._ranked, Ranking):
            feasible = self._ranked.feasible
            return {v for v, bits in self._ranked.fleet.label(label).items() if bits & feasible}
        return {r.candidate.labels[label] for r in self._ranked if label in r.candidate.labels}

    def within(self, labels: Mapping[str, set[str]]) -> Iterator[Ranked]:
        """The entries whose every label of ``labels`` has one of its values, best first
        (ties broken at random): from a ranking, without reading the others — the best
        of a spread's other zones may be far down it."""
        if not labels:
            return iter(self)
        ranked = self._ranked
        if isinstance(ranked, Ranking):
            bits = ranked.feasible
            for label, values in labels.items():
                bits &= ranked.fleet.label_in(label, tuple(values))
            return _tie_groups(ranked.within(bits))
        return (r for r in self if all(r.candidate.labels.get(label) in values
                                       for label, values in labels.items()))


Fill = Callable[[Subject, Pool, int, Sequence[Ranked]], list[Ranked]]


def select(subject: Subject, ranked: Sequence[Ranked], current: Sequence[Target],
           *, keep_current: bool = False, fill: Fill | None = None) -> list[Ranked]:
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
        kept = _feasible(ranked, current_keys)
        if keep_current or len(kept) < n:
            chosen = kept[:n]
    if fill is not None:
        chosen = fill(subject, Pool(ranked), n, chosen)
        chosen.sort(key=lambda r: r.order, reverse=True)
        return chosen
    taken = {r.candidate.key for r in chosen}
    for r in _tie_groups(ranked):
        if len(chosen) >= n:
            break
        if r.candidate.key not in taken:
            chosen.append(r)
            taken.add(r.candidate.key)
    chosen.sort(key=lambda r: r.order, reverse=True)
    return chosen


def _feasible(ranked: Sequence[Ranked], keys: set[str]) -> list[Ranked]:
    """The entries of ``ranked`` for ``keys``, best first, without walking a lazy ranking."""
    if isinstance(ranked, Ranking):
        found = [r for r in map(ranked.get, sorted(keys)) if r is not None]
        found.sort(key=lambda r: r.order, reverse=True)
        return found
    return [r for r in ranked if r.candidate.key in keys]


def _rounded(score: float) -> float:
    """``score`` to 9 decimals, as written: ``round(score, 9)`` (the same in a million
    random scores; it can differ in the last digit only where the product's own
    rounding meets a tie) at a quarter of its cost, for every Binding's entries. A
    score too large for that (a huge weight), infinite or not a number is rounded as
    ``round`` does: never an error."""
    scaled = score * 1e9
    return round(scaled) / 1e9 if abs(scaled) < 2.0**52 else round(score, 9)


def targets(chosen: Sequence[Ranked]) -> list[Target]:
    return [Target(r.candidate.ref.kind, r.candidate.ref.name, r.candidate.ref.namespace,
                   _rounded(r.score)) for r in chosen]


def summary(kind: str, evaluation: Evaluation) -> str:
    """``0/12 clusters are available: 7 label constraint '...', 3 not ONLINE (...)``."""
    noun = {"Cluster": "clusters", "Cloud": "clouds"}.get(kind, kind.lower() + "s")
    head = f"{len(evaluation.ranked)}/{evaluation.considered} {noun} are available"
    if not evaluation.counts:
        return head
    tail = evaluation.views.get("summary")
    if tail is None:
        ordered = sorted(evaluation.counts.items(), key=lambda i: (-i[1], i[0]))
        tail = evaluation.views["summary"] = ", ".join(f"{n} {r}" for r, n in ordered)
    return f"{head}: {tail}"


def explanation(evaluation: Evaluation, limit: int, chosen: Sequence[Ranked] = (),
                describe: Callable[[Ranked], dict[str, Any]] | None = None
                ) -> list[dict[str, Any]]:
    """The best ``limit`` candidates and every ``chosen`` one, by score; then up to
    ``limit`` small groups of rejected candidates, named (:func:`_rejections`).

    Every candidate listed has its score and each plugin's part of it; a chosen one
    also what ``describe`` says of it (its metric readings, the room it had): why it
    won, as of the decision. The others' readings are the fleet's, the same for
    every subject: ``berth explain --all`` gives them. The part that is not the
    chosen ones' is built once per evaluation, the entry of a candidate of a shared
    ranking once per fleet and metric values, the groups of rejected ones once per
    signature (unless a filter rejected more for this subject alone).
    """
    cached: list[dict[str, Any]] | None = evaluation.derived.get(f"explanation:{limit}")
    if cached is None:
        fleet = evaluation.fleet
        cached = [fleet.cached(("explained", r.ordinal), partial(_entry, r), metric=True)
                  if r.shared else _entry(r) for r in evaluation.ranked[:limit]]
        rejected = evaluation.views.get(f"rejections:{limit}")
        if rejected is None:
            rejected = evaluation.views[f"rejections:{limit}"] = _rejections(evaluation, limit)
        cached += rejected
        evaluation.derived[f"explanation:{limit}"] = cached
    if not chosen:
        return cached
    said = {r.candidate.key for r in chosen}
    ranked = [e for e in cached if "score" in e and e["candidate"] not in said]
    for r in chosen:
        entry = _entry(r)
        if describe is not None:
            entry.update(describe(r))
        ranked.append(entry)
    ranked.sort(key=lambda e: (e.get("tier", 0), e["score"]), reverse=True)
    return ranked + [e for e in cached if "score" not in e]


def _entry(r: Ranked) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "candidate": r.candidate.key,
        "score": _rounded(r.score),
        "scores": {name: _rounded(v) for name, v in r.scores.items() if v},
    }
    if r.tier:
        entry["tier"] = r.tier
    return entry


def _rejections(evaluation: Evaluation, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` groups of rejected candidates by plugin and reason that are small
    enough to name (``NAMED`` or fewer), the largest first as the reason orders them,
    each with its count and every one of its candidates.

    The reason already counts every group by its reason; a larger group would repeat
    it (a Kubernetes event names no node either; ``berth explain --all`` gives every
    candidate's verdict). What the reason cannot say is which few candidates a rare
    rejection hit: those are named here, all of them, never a sample.
    """
    if limit <= 0:
        return []
    merged: dict[tuple[str, str], int] = {}
    for status, bits in evaluation.rejections:
        group = (status.plugin, status.reason)
        merged[group] = merged.get(group, 0) | bits
    counted = sorted((-n, reason, plugin, bits) for (plugin, reason), bits in merged.items()
                     if (n := bits.bit_count()) <= NAMED)[:limit]
    return [{"rejected_by": plugin, "reason": reason, "count": -minus,
             "candidates": evaluation.fleet.first_keys(bits, NAMED)}
            for minus, reason, plugin, bits in counted]
