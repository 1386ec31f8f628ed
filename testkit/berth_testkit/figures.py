"""What the benchmarks print: one way to take a percentile."""

from __future__ import annotations

from collections.abc import Sequence


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0 to 1) of ``values`` by the nearest rank below: the value
    that ``q`` of them are at most (NaN for none)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
