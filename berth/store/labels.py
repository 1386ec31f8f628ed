"""Label selection, as Kubernetes does it, for every kind that selects clusters (and
the scheduler's affinity plugins).

``In``/``NotIn``/``Exists``/``DoesNotExist`` as in Kubernetes (``NotIn`` and
``DoesNotExist`` hold when the label is absent); ``Gt``/``Lt`` compare the
label and the single value as integers and fail when either is not one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol


class Expression(Protocol):
    """A selector's expression, as documents hold it (``documents.selection``'s
    ``MatchExpression``): this module needs no document type."""

    @property
    def key(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def values(self) -> Sequence[str]: ...


def expression_matches(e: Expression, labels: Mapping[str, str]) -> bool:
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


def selector_matches(match_labels: Mapping[str, str], expressions: Iterable[Expression],
                     labels: Mapping[str, str]) -> bool:
    """All of ``match_labels`` and all ``expressions`` hold (an empty selector matches)."""
    return all(labels.get(k) == v for k, v in match_labels.items()) and all(
        expression_matches(e, labels) for e in expressions)
