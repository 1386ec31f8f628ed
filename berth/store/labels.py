"""Label selection, as Kubernetes does it, for every kind that selects clusters (and
the scheduler's affinity plugins).

``In``/``NotIn``/``Exists``/``DoesNotExist`` as in Kubernetes (``NotIn`` and
``DoesNotExist`` hold when the label is absent); ``Gt``/``Lt`` compare the
label and the single value as integers and fail when either is not one.
"""

from __future__ import annotations

import re
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


_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def label_problem(key: str, value: str) -> str:
    """Why ``key: value`` is not a Kubernetes label ("": it is one): a key is a name of at
    most 63 characters, with an optional DNS subdomain prefix and '/'; a value is empty
    or such a name."""
    prefix, _, name = key.rpartition("/")
    if not _NAME.fullmatch(name) or (prefix and not _PREFIX.fullmatch(prefix)) or (
            "/" in key and not prefix):
        return f"{key!r} is not a label key"
    if value and not _NAME.fullmatch(value):
        return f"{value!r} is not a label value (at most 63 letters, digits, '-', '_', '.')"
    return ""
