"""Label selection, as Kubernetes does it, for every kind that selects clusters.

``In``/``NotIn``/``Exists``/``DoesNotExist`` as in Kubernetes (``NotIn`` and
``DoesNotExist`` hold when the label is absent); ``Gt``/``Lt`` compare the
label and the single value as integers and fail when either is not one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from berth.store.documents.base import CamelStrict


class MatchExpression(CamelStrict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = []


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


class ClusterChoice(CamelStrict):
    """Clusters by name (``<namespace>/<name>`` or the name alone) and by a label
    selector (given both, a cluster must be named and match); neither: all. What
    overrides and rollout stages choose clusters with."""

    names: list[str] = []
    match_labels: dict[str, str] = {}
    match_expressions: list[MatchExpression] = []

    def selects(self, cid: str, labels: Mapping[str, str]) -> bool:
        """Whether the cluster ``cid`` ("<namespace>/<name>") with ``labels`` is chosen."""
        name = cid.rpartition("/")[2]
        if self.names and name not in self.names and cid not in self.names:
            return False
        return selector_matches(self.match_labels, self.match_expressions, labels)
