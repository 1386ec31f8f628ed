"""Label selection shared by the affinity plugins (a helper, not a plugin).

``In``/``NotIn``/``Exists``/``DoesNotExist`` as in Kubernetes (``NotIn`` and
``DoesNotExist`` hold when the label is absent); ``Gt``/``Lt`` compare the
label and the single value as integers and fail when either is not one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from berth.controllers.scheduler.framework import Fleet
from berth.store.documents import MatchExpression


def expression_matches(e: MatchExpression, labels: Mapping[str, str]) -> bool:
    value = labels.get(e.key)
    match e.operator:
        case "In":
            return value is not None and value in e.values
        case "NotIn":
            return value is None or value not in e.values
        case "Exists":
            return value is not None
        case "DoesNotExist":
            return value is None
        case "Gt" | "Lt":
            try:
                have, want = int(value or ""), int(e.values[0])
            except (ValueError, IndexError):
                return False
            return have > want if e.operator == "Gt" else have < want
    return False


def selector_matches(match_labels: Mapping[str, str], expressions: Iterable[MatchExpression],
                     labels: Mapping[str, str]) -> bool:
    """All of ``match_labels`` and all ``expressions`` hold (an empty selector matches)."""
    return all(labels.get(k) == v for k, v in match_labels.items()) and all(
        expression_matches(e, labels) for e in expressions)


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
