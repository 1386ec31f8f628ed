"""Teams on one fleet: the clusters a berth namespace may place on, and the
priorities its applications may take (docs/teams.md).

A ``ClusterSet`` (global) names clusters of some namespaces, chosen by name
and label as overrides choose them. A ``NamespacePolicy`` (global, named after
the berth namespace it governs; written by administrators alone) binds sets to
that namespace — its applications are placed on the clusters of its own
namespace and of those sets, nowhere else — and limits the priorities its
applications may take: the PriorityClasses they may name, and the highest
priority they may give themselves; and limits what their manifests may make on
a member cluster: the kinds, and the Kubernetes namespaces the objects are in.
A namespace without a policy is as berth always was: its own clusters, any
priority, any object.

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
from berth.store.documents.reasons import listed
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
    ``spec.priority`` they may give themselves (absent: any); ``kinds``: the kinds of
    object their manifests may hold, each ``Kind`` (any group) or ``group/Kind`` (the
    core group is ``core``) (absent: any); ``targetNamespaces``: the Kubernetes
    namespaces their objects may be in, each object naming one of them — so none that
    names no namespace, and no cluster-scoped object (absent: any)."""

    cluster_sets: list[str] = []
    priority_classes: list[str] | None = None
    max_priority: int | None = None
    kinds: list[str] | None = None
    target_namespaces: list[str] | None = None

    def forbids(self, body: Mapping[str, object]) -> str:
        """Why this policy forbids the object ``body`` (a manifest's, as it would be
        applied); empty when it may be applied."""
        kind, api = str(body.get("kind", "")), str(body.get("apiVersion", ""))
        group = api.rpartition("/")[0] or "core"
        meta = body.get("metadata")
        name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
        where = meta.get("namespace") if isinstance(meta, Mapping) else None
        if self.kinds is not None and kind not in self.kinds and (
                f"{group}/{kind}" not in self.kinds):
            return f"{kind} {name}: kind {group}/{kind} is not among {listed(self.kinds) or 'none'}"
        if self.target_namespaces is not None and where not in self.target_namespaces:
            said = f"namespace {where}" if isinstance(where, str) and where else (
                "no namespace")
            return (f"{kind} {name}: {said}, not one of "
                    f"{listed(self.target_namespaces) or 'none'}")
        return ""


class NamespacePolicy(Strict, tag_field="kind", tag="NamespacePolicy"):
    """The policy of the berth namespace ``metadata.name``."""

    metadata: Metadata
    spec: NamespacePolicySpec = msgspec.field(default_factory=NamespacePolicySpec)
    api: str = "core"


__all__ = ["ClusterSet", "ClusterSetSpec", "NamespacePolicy", "NamespacePolicySpec"]
