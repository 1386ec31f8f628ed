"""Label selection shared by the affinity plugins (a helper, not a plugin): the set
form over a fleet of :mod:`berth.store.documents.selection`'s rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from berth.controllers.scheduler.framework.fleet import Fleet
from berth.store.documents import MatchExpression
from berth.store.labels import expression_matches, selector_matches

__all__ = ["describe", "expression_bits", "expression_matches", "selector_bits",
           "selector_matches"]


def expression_bits(fleet: Fleet, e: MatchExpression) -> int:
    """The set form of :func:`expression_matches`: the candidates it holds for."""
    match e.operator:
        case "In":
            return fleet.label_in(e.key, e.values)
        case "NotIn":
            return fleet.all & ~fleet.label_in(e.key, e.values)
        case "Exists":
            return fleet.has_label(e.key)
        case "DoesNotExist":
            return fleet.all & ~fleet.has_label(e.key)
        case "Gt" | "Lt":
            try:
                want = int(e.values[0])
            except (ValueError, IndexError):
                return 0
            out = 0
            for value, bits in fleet.label(e.key).items():
                try:
                    have = int(value or "")
                except ValueError:
                    continue
                if (have > want) if e.operator == "Gt" else (have < want):
                    out |= bits
            return out
    return 0


def selector_bits(fleet: Fleet, match_labels: Mapping[str, str],
                  expressions: Iterable[MatchExpression]) -> int:
    """The set form of :func:`selector_matches`."""
    bits = fleet.all
    for k, v in match_labels.items():
        bits &= fleet.label(k).get(v, 0)
    for e in expressions:
        if not bits:
            break
        bits &= expression_bits(fleet, e)
    return bits


def describe(match_labels: Mapping[str, str], expressions: Iterable[MatchExpression]) -> str:
    parts = [f"{k}={v}" for k, v in match_labels.items()]
    parts += [f"{e.key} {e.operator} ({', '.join(e.values)})" if e.values
              else f"{e.key} {e.operator}" for e in expressions]
    return ", ".join(parts) or "{}"
