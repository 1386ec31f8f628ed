"""The ranks of the placed applications, counted fleet-wide and per candidate.

An application's rank is what its priority is resolved from besides its
namespace's policy and the PriorityClasses: (namespace, own priority, class
name). A preemption plan reads the ranks placed anywhere to know at once
whether anything is less important than its preemptor, and the ranks placed on
a candidate to bound the plan there before reading who runs on it
(:mod:`preempt`). One instance belongs to :class:`~decisions.Decisions` and is
used under its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

Rank = tuple[str | None, int | None, str | None]  # (namespace, own priority, class name)


class Ranks:
    """Each Binding's rank, where it is counted (its candidates), counted."""

    __slots__ = ("_counts", "_of", "_on", "_one")

    def __init__(self) -> None:
        self._of: dict[str, Rank] = {}  # binding key → its application's rank
        self._counts: Counter[Rank] = Counter()
        self._on: dict[str, Counter[Rank]] = {}  # candidate key → the ranks there
        self._one: dict[Rank, Rank] = {}  # each rank placed, one tuple for all its Bindings

    def placed(self) -> list[Rank]:
        """The distinct ranks placed anywhere."""
        return list(self._counts)

    def on(self, candidate: str) -> list[Rank]:
        """The distinct ranks counted on ``candidate``."""
        return list(self._on.get(candidate, ()))

    def count(self, key: str, rank: Rank, where: Iterable[str]) -> None:
        """Binding ``key`` (not counted) places ``rank`` on the candidates ``where``."""
        rank = self._one.setdefault(rank, rank)
        self._of[key] = rank
        self._counts[rank] += 1
        for c in where:
            counts = self._on.get(c)
            if counts is None:
                counts = self._on[c] = Counter()
            counts[rank] += 1

    def uncount(self, key: str, where: Iterable[str]) -> None:
        """Binding ``key``, counted on ``where`` (if at all), is counted no more."""
        rank = self._of.pop(key, None)
        if rank is None:
            return
        _less(self._counts, rank)
        if rank not in self._counts:
            del self._one[rank]
        for c in where:
            there = self._on[c]
            _less(there, rank)
            if not there:
                del self._on[c]


def _less(counts: Counter[Rank], rank: Rank) -> None:
    counts[rank] -= 1
    if not counts[rank]:
        del counts[rank]


__all__ = ["Rank", "Ranks"]
