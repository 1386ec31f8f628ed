"""Label selection, as Kubernetes does it, for every kind that selects clusters (and
the scheduler's affinity plugins; compiled with them, ``berth.native``).

``In``/``NotIn``/``Exists``/``DoesNotExist`` as in Kubernetes (``NotIn`` and
``DoesNotExist`` hold when the label is absent); ``Gt``/``Lt`` compare the
label and the single value as integers and fail when either is not one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from berth.store.documents.selection import MatchExpression


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
