"""How documents select clusters by label, as Kubernetes does (the rules are
:mod:`berth.store.labels`'s)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from berth.store.documents.base import CamelStrict
from berth.store.labels import selector_matches


class MatchExpression(CamelStrict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = []


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
