"""What one attempt's filters and scores found: an :class:`Evaluation`, and the part of it
memoized per signature (:class:`Static`).

An evaluation holds the feasible candidates ranked best first and the groups of
candidates each rejection status rejected, as bitsets over one frozen
:class:`Fleet`; what is derived from them (counts, the reason's summary, the
explanation's groups) is built when first asked and shared by the evaluations
of every subject with the same rejections.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.controllers.scheduler.framework.fleet import Fleet, ordinals
from berth.controllers.scheduler.framework.ranking import Band, BaseOrder, Ranked, Ranking
from berth.controllers.scheduler.framework.status import Status


@dataclass(slots=True)
class Evaluation:
    """Feasible candidates ranked best first, and why the others were rejected.

    ``rejections`` are disjoint groups of candidates (bitsets over ``fleet``),
    each with the status that rejected them; ``error`` is set when a score
    plugin failed (nothing is ranked then).
    """

    fleet: Fleet
    feasible: int
    rejections: list[tuple[Status, int]]
    ranked: Ranking
    considered: int = 0
    error: Status | None = None
    derived: dict[str, Any] = field(default_factory=dict)  # memoized views of this result
    # Memoized views of ``rejections`` alone (counts, the reason's summary, the
    # explanation's groups): shared by the evaluations of every subject whose
    # rejections are those of the signature's static part.
    views: dict[str, Any] = field(default_factory=dict)

    def __init__(self, fleet: Fleet, feasible: int, rejections: list[tuple[Status, int]],
                 ranked: Ranking, considered: int = 0, error: Status | None = None,
                 views: dict[str, Any] | None = None) -> None:
        # ``views``: shared with the evaluations of the same signature when given (None:
        # its own); ``derived`` is always its own
        self.fleet = fleet
        self.feasible = feasible
        self.rejections = rejections
        self.ranked = ranked
        self.considered = considered
        self.error = error
        self.derived = {}
        self.views = {} if views is None else views

    @property
    def counts(self) -> Counter[str]:
        """Rejection reason → how many candidates it rejected."""
        counts: Counter[str] | None = self.views.get("counts")
        if counts is None:
            counts = Counter()
            for status, bits in self.rejections:
                counts[status.reason or status.code.value] += bits.bit_count()
            self.views["counts"] = counts
        return counts

    def groups(self) -> list[tuple[Status, int]]:
        """Rejections merged by status, in the order of their first candidate."""
        merged: dict[Status, int] = {}
        for status, bits in self.rejections:
            merged[status] = merged.get(status, 0) | bits
        return sorted(merged.items(), key=lambda g: (g[1] & -g[1]).bit_length())

    def rejection(self, key: str) -> Status | None:
        """The status that rejected candidate ``key`` (None: not rejected, or not in the
        fleet): one look in each group, where :attr:`rejected` maps every candidate."""
        i = self.fleet.by_key.get(key)
        if i is None:
            return None
        bit = 1 << i
        for status, bits in self.rejections:
            if bits & bit:
                return status
        return None

    @property
    def rejected(self) -> dict[str, Status]:
        """Candidate key → the status that rejected it (built on first use)."""
        out: dict[str, Status] | None = self.views.get("rejected")
        if out is None:
            keys = self.fleet.keys
            out = {keys[i]: status for status, bits in self.rejections for i in ordinals(bits)}
            self.views["rejected"] = out
        return out


@dataclass(slots=True)
class Static:
    """The memoized part of an evaluation: what depends only on the signature."""

    feasible: int
    rejections: list[tuple[Status, int]]
    bands: list[Band]
    base: BaseOrder | None = None
    dense: list[Ranked] | None = None  # when some scorer has no set form
    error: Status | None = None
    views: dict[str, Any] = field(default_factory=dict)  # Evaluation.views of rejections

    def views_of(self, rejections: list[tuple[Status, int]]) -> dict[str, Any] | None:
        """The shared views, if ``rejections`` are this part's own (no more were added)."""
        return self.views if rejections is self.rejections else None


class FeasibleScores(Mapping[str, float]):
    """One plugin's (unweighted) scores of the feasible candidates, read lazily."""

    def __init__(self, lookup: Callable[[str], Ranked | None], fleet: Fleet, feasible: int,
                 plugin: str, weight: float) -> None:
        self._lookup, self._fleet, self._feasible = lookup, fleet, feasible
        self._plugin, self._weight = plugin, weight or 1.0

    def __contains__(self, key: object) -> bool:
        i = self._fleet.by_key.get(key) if isinstance(key, str) else None
        return i is not None and bool(self._feasible >> i & 1)

    def __getitem__(self, key: str) -> float:
        r = self._lookup(key)
        if r is None:
            raise KeyError(key)
        return r.scores.get(self._plugin, 0.0) / self._weight

    def __iter__(self) -> Iterator[str]:
        keys = self._fleet.keys
        return (keys[i] for i in ordinals(self._feasible))

    def __len__(self) -> int:
        return self._feasible.bit_count()


__all__ = ["Evaluation", "FeasibleScores", "Static"]
