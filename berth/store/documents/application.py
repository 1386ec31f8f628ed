"""Applications: a manifest, Krake's constraints, and berth's placement policy.

Krake's fields (``manifest``, ``constraints.cluster.{labels,metrics,
custom_resources}``, ``constraints.migration``) keep their spelling; berth's
additions, taken from the Kubernetes world (Crossplane, Fleet and the Kubernetes
scheduler), are spelled as there: ``clusterSelector``, ``affinity``, ``tolerations``, ``placement``,
``schedulerName``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal

import msgspec

from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.documents.pace import PaceOverride
from berth.store.documents.priority import Preemptible, PreemptionPolicy
from berth.store.documents.rollouts import RolloutPolicy
from berth.store.documents.selection import MatchExpression


class AppClusterConstraints(Strict):
    labels: list[str] = []
    metrics: list[str] = []
    custom_resources: list[str] = []


class AppConstraints(Strict):
    cluster: AppClusterConstraints | None = None
    migration: bool | None = None  # Krake's spelling of spec.migration


class ClusterSelectorTerm(CamelStrict):
    match_expressions: list[MatchExpression] = []
    match_labels: dict[str, str] = {}


class PreferredTerm(CamelStrict):
    weight: float
    preference: ClusterSelectorTerm


class ClusterSelector(CamelStrict):
    """Terms ORed together; the expressions of one term ANDed (Crossplane's workload scheduler)."""

    cluster_selector_terms: list[ClusterSelectorTerm] = []


class ClusterAffinity(CamelStrict):
    required_during_scheduling_ignored_during_execution: ClusterSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredTerm] = []


class WorkloadSelector(CamelStrict):
    match_labels: dict[str, str] = {}
    match_expressions: list[MatchExpression] = []


class WorkloadAffinityTerm(CamelStrict):
    label_selector: WorkloadSelector
    topology_key: str
    namespaces: list[str] = []


class WeightedWorkloadTerm(CamelStrict):
    weight: float
    term: WorkloadAffinityTerm = msgspec.field(name="workloadAffinityTerm")


class WorkloadAffinity(CamelStrict):
    required_during_scheduling_ignored_during_execution: list[WorkloadAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedWorkloadTerm] = []


class Affinity(CamelStrict):
    cluster_affinity: ClusterAffinity | None = None
    workload_affinity: WorkloadAffinity | None = None
    workload_anti_affinity: WorkloadAffinity | None = None


class Toleration(CamelStrict):
    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class TopologySpreadConstraint(CamelStrict):
    max_skew: int
    topology_key: str
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule"


class ClusterGroup(CamelStrict):
    """Clusters named, or selected by their labels (either or both: ORed)."""

    name: str = ""
    cluster_names: list[str] = []
    label_selector: WorkloadSelector | None = None


class StaticWeight(CamelStrict):
    """A weight for the clusters of a group (Karmada's staticWeightList)."""

    target_cluster: ClusterGroup
    weight: int


class ReplicaScheduling(CamelStrict):
    """How an application's replicas are spread over the clusters it is placed on.

    ``Duplicated`` (the default): every cluster runs the manifest as written.
    ``Divided``: the replicas (``replicas``, else the manifest's workload's)
    are divided among the chosen clusters — by ``staticWeights``
    (``division: Weighted``, the default; clusters no weight names get 1),
    by free capacity (``Capacity``), or onto the fewest clusters that hold
    them (``Aggregated``).
    """

    type: Literal["Duplicated", "Divided"] = "Duplicated"
    division: Literal["Weighted", "Capacity", "Aggregated"] = "Weighted"
    static_weights: list[StaticWeight] = []
    replicas: int | None = None


class Placement(CamelStrict):
    """Seed 003's placement policy; one cluster unless told otherwise.

    ``clusterGroups``: clusters in order of preference (on-premise first, then
    a cloud): the first group is filled while it has room, the rest overflow
    to the next; clusters in no group are not candidates.

    ``followDependents``: only clusters where an application that depends on it
    is placed are candidates (with PickAll: every one of them), and they are not
    held back by it in turn.

    Deferrable work: ``startBefore`` (a time) or ``maxDelay`` (a duration
    from the application's creation) says when it must have started at the
    latest, ``costMetric`` which metric measures what running costs (carbon
    intensity, an energy price: lower is better). Until it is placed, the
    scheduler starts it at the (cluster, time) its forecasts make cheapest
    before that deadline.
    """

    policy: Literal["PickOne", "PickN", "PickAll", "PickFixed"] = "PickOne"
    number_of_clusters: int | None = None
    cluster_names: list[str] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    ignored_during_execution: bool = False
    replica_scheduling: ReplicaScheduling | None = None
    cluster_groups: list[ClusterGroup] = []
    start_before: datetime | None = None
    max_delay: str | float | None = None  # 8h, 90m, or seconds
    cost_metric: str | None = None
    # Placed where the applications that depend on it are (docs/order.md "Dependencies"):
    # shared configuration following its users, as Karmada's propagateDeps ships it.
    follow_dependents: bool = False

    @property
    def deferrable(self) -> bool:
        return self.cost_metric is not None and (
            self.start_before is not None or self.max_delay is not None)


class Gang(CamelStrict):
    name: str
    min_member: int


class HealthRule(CamelStrict):
    """How the propagator judges a custom resource that has no ``Ready`` or
    ``Available`` condition (docs/propagator.md "Health"): healthy when ``condition`` is True,
    or when the value at ``field`` (``status.phase``) is one of ``healthy``; unhealthy
    when it is one of ``unhealthy``; progressing otherwise."""

    kind: str
    api_version: str | None = None  # any apiVersion when not given
    condition: str | None = None
    field: str | None = None
    healthy: list[str] = []
    unhealthy: list[str] = []

    def __post_init__(self) -> None:
        if (self.condition is None) == (self.field is None):
            raise ValueError(f"health rule for {self.kind}: give either condition or field")
        if self.field is not None and not (self.healthy or self.unhealthy):
            raise ValueError(f"health rule for {self.kind}: field needs healthy or "
                             "unhealthy values")
        if self.field is not None and self.field.partition(".")[0] not in ("spec", "status"):
            raise ValueError(f"health rule for {self.kind}: field must start with spec. "
                             "or status.")

    def matches(self, api_version: str, kind: str) -> bool:
        return self.kind == kind and self.api_version in (None, api_version)


class Dependency(CamelStrict):
    """An application that must be there first on each cluster (docs/order.md
    "Dependencies"): its copy available there (``when: Available``, the default), or
    only applied at its current generation (``Applied``: configuration that nothing
    judges). Of the same namespace, or of ``namespace`` where that namespace's policy
    lets this one depend on it (its ``dependents``)."""

    name: str
    when: Literal["Available", "Applied"] = "Available"
    namespace: str | None = None

    def key_in(self, namespace: str | None) -> str:
        """``<namespace>/<name>`` of the application it names, for one of ``namespace``."""
        return f"{self.namespace or namespace or ''}/{self.name}"


class DeployedObject(CamelStrict):
    """One object of a copy another tool deploys: where to read it on each cluster."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None  # None for cluster-scoped kinds


class DeployedBy(CamelStrict):
    """An application berth places and another tool deploys (docs/argocd.md, section 7):
    it has no manifest; its copy on a cluster is ``objects``, which berth reads there
    and judges as its own, never writing or removing them. With ``tool: argocd``,
    the Application Argo CD's ApplicationSet ``applicationSet`` generates for each
    cluster (in the namespace of the Export named ``export``) must say Healthy and
    Synced — at ``revision`` when one is given — before the copy counts available."""

    tool: str  # "argocd", or the name of another tool (its objects alone are judged)
    objects: list[DeployedObject] = []
    export: str = ""  # tool argocd: the Export whose API holds Argo CD's Applications
    application_set: str = ""  # tool argocd: the ApplicationSet generating them
    revision: str = ""  # tool argocd: the revision they must be synced at ("": any)

    @property
    def argocd(self) -> bool:
        return self.tool == ARGOCD

    def problems(self, manifest: bool) -> Iterator[tuple[str, str]]:
        """What is wrong with it (the path below ``spec.deployedBy``, why); ``manifest``:
        the application has one too."""
        if manifest:
            yield "", "an application another tool deploys has no manifest: give one or the other"
        if not self.tool.strip():
            yield ".tool", "name the tool that deploys it (argocd, or another)"
        if not self.objects:
            yield ".objects", ("name the objects its copy is on each cluster: berth judges "
                               "them before a move removes the old copy")
        seen: set[tuple[str, str, str, str]] = set()
        for i, o in enumerate(self.objects):
            if not (o.api_version and o.kind and o.name):
                yield f".objects[{i}]", "needs apiVersion, kind and name"
                continue
            key = (o.api_version, o.kind, o.namespace or "", o.name)
            if key in seen:
                yield f".objects[{i}]", f"{o.kind} {o.namespace or ''}/{o.name} is named twice"
            seen.add(key)
        if self.argocd:
            for name, value in (("export", self.export),
                                ("applicationSet", self.application_set)):
                if not value:
                    yield f".{name}", ("Argo CD's Applications are found by the Export "
                                       "whose API holds them and the ApplicationSet that "
                                       "generates them")
        elif self.export or self.application_set or self.revision:
            yield "", (f"export, applicationSet and revision are Argo CD's: not for tool "
                       f"{self.tool!r}")


ARGOCD = "argocd"


class ApplicationSpec(Strict):
    manifest: list[dict[str, Any]] = []
    # Placement only: another tool deploys its copies (it then has no manifest).
    deployed_by: DeployedBy | None = msgspec.field(default=None, name="deployedBy")
    constraints: AppConstraints | None = None
    migration: bool | None = None
    placement: Placement | None = None
    cluster_selector: dict[str, str] = msgspec.field(default_factory=dict, name="clusterSelector")
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    scheduler_name: str | None = msgspec.field(default=None, name="schedulerName")
    # Its priority (docs/scheduler.md "Priority and preemption"): its own, or a class's by
    # name (the class's wins); neither, the global default class's, else 0.
    priority: int | None = None
    priority_class_name: str | None = msgspec.field(default=None, name="priorityClassName")
    # Whether it may make room when it fits nowhere (a class's policy wins).
    preemption_policy: PreemptionPolicy | None = msgspec.field(default=None,
                                                               name="preemptionPolicy")
    preemptible: Preemptible | None = None  # what it gives up for a more important one
    gang: Gang | None = None
    # The propagator's: how custom resources are judged, whether an object another
    # application (or nobody berth knows) manages on a cluster may be taken over
    # (Karmada's conflictResolution), and how objects are deleted.
    health: list[HealthRule] = []
    conflict_resolution: Literal["Abort", "Overwrite"] = msgspec.field(
        default="Abort", name="conflictResolution")
    deletion_propagation: Literal["Background", "Foreground"] = msgspec.field(
        default="Background", name="deletionPropagation")
    rollout: RolloutPolicy | None = None  # how a new generation reaches its clusters
    pace: PaceOverride | None = None  # its own over the fleet's pace (docs/pace.md)
    # Applications whose copy on a cluster comes before its own there (docs/order.md).
    depends_on: list[Dependency] = msgspec.field(default_factory=list, name="dependsOn")
    # Krake's application fields, accepted so its YAML loads unchanged.
    observer_schema: Any = None
    tosca: Any = None
    csar: Any = None
    hooks: Any = None
    backoff: Any = None
    backoff_delay: Any = None
    backoff_limit: Any = None
    shutdown_grace_time: Any = None
    container_health: Any = None


class Application(Strict, tag_field="kind", tag="Application"):
    metadata: Metadata
    spec: ApplicationSpec
    api: str = "kubernetes"
    status: dict[str, Any] | None = None
