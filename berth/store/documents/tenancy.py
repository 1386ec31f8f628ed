"""Teams on one fleet: the clusters a berth namespace may place on, and the
priorities its applications may take (docs/teams.md).

A ``ClusterSet`` (global) names clusters of some namespaces, chosen by name
and label as overrides choose them. A ``NamespacePolicy`` (global, named after
the berth namespace it governs; written by administrators alone) binds sets to
that namespace — its applications are placed on the clusters of its own
namespace and of those sets, nowhere else — and limits the priorities its
applications may take: the PriorityClasses they may name, and the highest
priority they may give themselves. A namespace without a policy is as berth
always was: its own clusters, any priority.

OCM's ManagedClusterSet and ManagedClusterSetBinding, and Kubernetes'
ResourceQuota scoped to PriorityClasses, are the models. Where berth differs:
the binding of a set to a namespace is a line in the namespace's policy, not a
document in the namespace (a team must not bind a set to itself, and a
namespace's documents are the team's to write).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.documents.selection import ClusterChoice


class ClusterSetSpec(CamelStrict):
    """The clusters of ``namespaces`` that ``clusters`` chooses (all of them when it
    chooses nothing in particular)."""

    namespaces: list[str]
    clusters: ClusterChoice = msgspec.field(default_factory=ClusterChoice)

    def holds(self, cid: str, labels: Mapping[str, str]) -> bool:
        """Whether the cluster ``cid`` (``<namespace>/<name>``) with ``labels`` is in it."""
        namespace = cid.partition("/")[0]
        return namespace in self.namespaces and self.clusters.selects(cid, labels)


class ClusterSet(Strict, tag_field="kind", tag="ClusterSet"):
    metadata: Metadata
    spec: ClusterSetSpec
    api: str = "core"


class NamespacePolicySpec(CamelStrict):
    """What the applications of one berth namespace may do. ``priorityClasses``: the
    classes they may name (absent: any; empty: none); ``maxPriority``: the highest
    ``spec.priority`` they may give themselves (absent: any)."""

    cluster_sets: list[str] = []
    priority_classes: list[str] | None = None
    max_priority: int | None = None


class NamespacePolicy(Strict, tag_field="kind", tag="NamespacePolicy"):
    """The policy of the berth namespace ``metadata.name``."""

    metadata: Metadata
    spec: NamespacePolicySpec = msgspec.field(default_factory=NamespacePolicySpec)
    api: str = "core"


__all__ = ["ClusterSet", "ClusterSetSpec", "NamespacePolicy", "NamespacePolicySpec"]
