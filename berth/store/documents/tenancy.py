"""Teams on one fleet: the clusters a berth namespace may place on, and the
priorities its applications may take (docs/teams.md).

A ``ClusterSet`` (global) names clusters of some namespaces, chosen by name
and label as overrides choose them. A ``NamespacePolicy`` (global, named after
the berth namespace it governs; written by administrators alone) binds sets to
that namespace — its applications are placed on the clusters of its own
namespace and of those sets, nowhere else — and limits the priorities its
applications may take: the PriorityClasses they may name, and the highest
priority they may give themselves; and limits what their manifests may make on
a member cluster: the kinds, and the Kubernetes namespaces the objects are in;
gives it a quota of the fleet's resources; and names the identity its objects
are applied as on member clusters (Kubernetes impersonation: the member's own
RBAC has the last word). A namespace without a policy is as berth always was:
its own clusters, any priority, any object, no quota, berth's own credential.

OCM's ManagedClusterSet and ManagedClusterSetBinding, Kubernetes' ResourceQuota
scoped to PriorityClasses, Karmada's FederatedResourceQuota and OCM's
ManifestWork executor are the models. Where berth differs:
the binding of a set to a namespace is a line in the namespace's policy, not a
document in the namespace (a team must not bind a set to itself, and a
namespace's documents are the team's to write).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.documents.reasons import listed
from berth.store.documents.resources import QuantityError, Resources, quantity
from berth.store.documents.selection import ClusterChoice

# A quota's counts beside resources: the applications placed, the copies they run.
APPLICATIONS, COPIES = "applications", "copies"


def placements(copies: int) -> Resources:
    """What one application placed on ``copies`` clusters counts against a quota beside
    what it asks (nothing if it is placed nowhere)."""
    return Resources(scalar=((APPLICATIONS, 1), (COPIES, copies))) if copies else Resources()


# Kubernetes' impersonation headers (client-go's rest.ImpersonationConfig).
IMPERSONATE_USER, IMPERSONATE_GROUP = "Impersonate-User", "Impersonate-Group"
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a DNS-1123 label
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class Identity(CamelStrict):
    """Who a namespace's objects are applied as on a member cluster: a
    ``serviceAccount`` (``<namespace>/<name>`` there, as OCM's ManifestWork executor
    names one) or a ``user`` with its ``groups``. berth's own credential there
    impersonates it, so the member's RBAC decides what the objects may be."""

    service_account: str = ""
    user: str = ""
    groups: list[str] = []

    def __post_init__(self) -> None:
        if bool(self.service_account) == bool(self.user):
            raise ValueError("identity: name a serviceAccount or a user, one of the two")
        if self.service_account:
            namespace, _, name = self.service_account.partition("/")
            if not (_LABEL.fullmatch(namespace) and _SUBDOMAIN.fullmatch(name)):
                raise ValueError(f"identity.serviceAccount: {self.service_account!r} is not "
                                 "<namespace>/<name> of a ServiceAccount")
            if self.groups:
                raise ValueError("identity.groups: a ServiceAccount's groups are its own "
                                 "(name them with a user)")
        for text in (self.user, *self.groups):
            if not text.isprintable() or not text.isascii() or text != text.strip():
                raise ValueError(f"identity: {text!r} is not a name a header can carry")

    @property
    def username(self) -> str:
        """The user the member cluster sees (a ServiceAccount's is Kubernetes' own)."""
        if self.service_account:
            namespace, _, name = self.service_account.partition("/")
            return f"system:serviceaccount:{namespace}:{name}"
        return self.user

    def headers(self) -> tuple[tuple[str, str], ...]:
        """The impersonation headers a request as this identity carries."""
        return ((IMPERSONATE_USER, self.username),
                *((IMPERSONATE_GROUP, group) for group in self.groups))

    def __str__(self) -> str:
        if self.service_account:
            return f"ServiceAccount {self.service_account}"
        return f"user {self.user}" + (f" (groups {', '.join(self.groups)})" if self.groups
                                      else "")


@dataclass(frozen=True, slots=True)
class Limit:
    """A namespace's quota: the amounts (``amounts``) of the resources it names
    (``names``: those alone are limited)."""

    amounts: Resources
    names: tuple[str, ...]

    def over(self, used: Resources, asked: Resources) -> list[str]:
        """Each limited resource that ``asked`` on top of ``used`` goes over:
        ``cpu 3 asked, 1 of 4 left``."""
        out = []
        for name in self.names:
            want = asked.get(name)
            left = self.amounts.get(name) - used.get(name)
            if want and want > left:
                out.append(f"{name} {amount(name, want)} asked, "
                           f"{amount(name, max(left, 0))} of {amount(name, self.amounts.get(name))}"
                           " left")
        return out


def amount(name: str, value: int) -> str:
    """An amount as a manifest would write it (CPU in cores or millicores, memory and
    storage in the largest binary unit that divides it)."""
    if name == "cpu":
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    if name == "memory" or name.startswith(("ephemeral-storage", "hugepages-")):
        for unit, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if value and value % size == 0:
                return f"{value // size}{unit}"
    return str(value)


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
    names no namespace, and no cluster-scoped object (absent: any); ``quota``: what
    its applications may ask of the whole fleet together, a Kubernetes resource list
    (``cpu``, ``memory``, ``pods``, ``nvidia.com/gpu``, ...: the requests of every
    copy on every cluster, as Karmada's FederatedResourceQuota ``overall``), and
    how many ``applications`` may be placed and ``copies`` run (a resource it does
    not name is not limited; absent: none); ``setQuotas``: a quota of the same shape
    per cluster set it binds, counting only the copies on that set's clusters (an
    application counts once in a set where it has a copy), as Karmada's
    ``staticAssignments`` per cluster; ``identity``: who its objects are applied as on
    member clusters (absent: berth's own credential there); ``dependents``: the other
    namespaces whose applications may depend on this one's (``spec.dependsOn``,
    docs/order.md: they are placed where its applications are and hold their removal
    from a cluster while they run there; absent: none)."""

    cluster_sets: list[str] = []
    priority_classes: list[str] | None = None
    max_priority: int | None = None
    kinds: list[str] | None = None
    target_namespaces: list[str] | None = None
    quota: dict[str, str | int] | None = None
    set_quotas: dict[str, dict[str, str | int]] | None = None
    identity: Identity | None = None
    dependents: list[str] = []

    def __post_init__(self) -> None:
        _amounts("quota", self.quota or {})
        for name, quota in (self.set_quotas or {}).items():
            if name not in self.cluster_sets:
                raise ValueError(f"setQuotas.{name}: the set is not among clusterSets")
            _amounts(f"setQuotas.{name}", quota)

    @property
    def limit(self) -> Limit | None:
        """The quota, read (None: no quota)."""
        if self.quota is None:
            return None
        return Limit(Resources.of(self.quota), tuple(sorted(self.quota)))

    @property
    def set_limits(self) -> dict[str, Limit]:
        """Each bound set's quota, read."""
        return {name: Limit(Resources.of(quota), tuple(sorted(quota)))
                for name, quota in (self.set_quotas or {}).items()}

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


def _amounts(where: str, quota: Mapping[str, str | int]) -> None:
    """Refuse a quota's amount that is no quantity, or below 0, naming it."""
    for name, value in quota.items():
        try:
            if quantity(value) < 0:
                raise ValueError(f"{where}.{name}: {value!r} is below 0")
        except QuantityError as exc:
            raise ValueError(f"{where}.{name}: {exc}") from exc


class NamespacePolicy(Strict, tag_field="kind", tag="NamespacePolicy"):
    """The policy of the berth namespace ``metadata.name``."""

    metadata: Metadata
    spec: NamespacePolicySpec = msgspec.field(default_factory=NamespacePolicySpec)
    api: str = "core"


__all__ = ["APPLICATIONS", "COPIES", "ClusterSet", "ClusterSetSpec", "Identity", "Limit",
           "NamespacePolicy", "NamespacePolicySpec", "amount", "placements"]
