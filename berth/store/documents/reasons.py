"""A reason is one line a person reads (a status's, a Binding's, an error's): a list in
it names the first few items and counts the rest, however large the fleet."""

from __future__ import annotations

from collections.abc import Iterable

NAMED = 5  # items a reason names


def listed(items: Iterable[str], sep: str = ", ", named: int = NAMED) -> str:
    """The first ``named`` of ``items`` joined by ``sep``, then how many more there are:
    ``a, b, c, d, e and 70 more``."""
    said = list(items)
    if len(said) <= named:
        return sep.join(said)
    return f"{sep.join(said[:named])} and {len(said) - named} more"


__all__ = ["NAMED", "listed"]
