"""berth's documents: the typed shapes of every value under ``/berth/``.

``RESOURCE_TYPES`` maps each user-owned kind to its full (strict) type;
processes decode with smaller views of their own where they read little.

Every closed set a document carries is a ``StrEnum`` here (a cluster's
:class:`Reachability`, a copy's :class:`HealthState`, an application's
:class:`AppState`, ...); the wire holds their values, the same strings as before
they were enums. Code that tells every value of one apart (a profile's condition, a
record's words, a rollout's next step) does so with ``match`` and ``assert_never``,
so mypy names it when a value is added; code that asks about one value (is this
cluster ONLINE?) compares with that member and is right whatever is added. A field
typed with one decodes nothing else: an unknown value makes the document invalid,
named where it is read.
"""

from __future__ import annotations

from berth.store.documents.application import (
    Affinity,
    Application,
    ApplicationSpec,
    ClusterAffinity,
    ClusterGroup,
    ClusterSelector,
    ClusterSelectorTerm,
    DeployedBy,
    DeployedObject,
    Gang,
    HealthRule,
    Placement,
    PreferredTerm,
    ReplicaScheduling,
    StaticWeight,
    Toleration,
    TopologySpreadConstraint,
    WorkloadAffinity,
    WorkloadAffinityTerm,
)
from berth.store.documents.base import Header, Metadata, NameOnly, ObjectRef
from berth.store.documents.decisions import (
    ApplicationState,
    ApplicationStatus,
    AppState,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    BindingStatus,
    Capacity,
    ClusterApplied,
    ClusterState,
    ClusterStatus,
    Endpoint,
    FailedTarget,
    HealthState,
    HeldBy,
    KubeObjectRef,
    MovesStarted,
    Preemption,
    Reachability,
    ResourceList,
    StatusMeta,
    Target,
    Victim,
    Yield,
)
from berth.store.documents.export import Export, Exported, ExportSpec, Shape
from berth.store.documents.infrastructure import (
    Cloud,
    Cluster,
    ClusterMode,
    ClusterSpec,
    GlobalCloud,
    Taint,
)
from berth.store.documents.inventory import Inventory, InventorySpec
from berth.store.documents.metrics import (
    ForecastPoint,
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricError,
    MetricPicture,
    MetricRef,
    MetricSpec,
    MetricsProvider,
    MetricsProviderSpec,
    MetricValue,
    MetricValueStatus,
    ProviderInfo,
)
from berth.store.documents.openstack import MagnumCluster, Project
from berth.store.documents.overrides import GlobalOverride, Override, OverrideRule
from berth.store.documents.pace import Pace
from berth.store.documents.priority import Preemptible, PreemptionPolicy, PriorityClass
from berth.store.documents.selection import MatchExpression
from berth.store.documents.tenancy import ClusterSet, NamespacePolicy

Resource = (
    GlobalMetricsProvider
    | MetricsProvider
    | GlobalMetric
    | Metric
    | GlobalCloud
    | Cloud
    | Cluster
    | Application
    | Project
    | MagnumCluster
    | GlobalOverride
    | Override
    | Pace
    | PriorityClass
    | Export
    | Inventory
    | ClusterSet
    | NamespacePolicy
)

RESOURCE_TYPES: dict[str, type[Resource]] = {
    "GlobalMetricsProvider": GlobalMetricsProvider,
    "MetricsProvider": MetricsProvider,
    "GlobalMetric": GlobalMetric,
    "Metric": Metric,
    "GlobalCloud": GlobalCloud,
    "Cloud": Cloud,
    "Cluster": Cluster,
    "Application": Application,
    "Project": Project,
    "MagnumCluster": MagnumCluster,
    "GlobalOverride": GlobalOverride,
    "Override": Override,
    "Pace": Pace,
    "PriorityClass": PriorityClass,
    "Export": Export,
    "Inventory": Inventory,
    "ClusterSet": ClusterSet,
    "NamespacePolicy": NamespacePolicy,
}

__all__ = [
    "RESOURCE_TYPES",
    "Affinity",
    "AppState",
    "Application",
    "ApplicationSpec",
    "ApplicationState",
    "ApplicationStatus",
    "Binding",
    "BindingMeta",
    "BindingSpec",
    "BindingState",
    "BindingStatus",
    "Capacity",
    "Cloud",
    "Cluster",
    "ClusterAffinity",
    "ClusterApplied",
    "ClusterGroup",
    "ClusterMode",
    "ClusterSelector",
    "ClusterSelectorTerm",
    "ClusterSet",
    "ClusterSpec",
    "ClusterState",
    "ClusterStatus",
    "DeployedBy",
    "DeployedObject",
    "Endpoint",
    "Export",
    "ExportSpec",
    "Exported",
    "FailedTarget",
    "ForecastPoint",
    "Gang",
    "GlobalCloud",
    "GlobalMetric",
    "GlobalMetricsProvider",
    "GlobalOverride",
    "Header",
    "HealthRule",
    "HealthState",
    "HeldBy",
    "Inventory",
    "InventorySpec",
    "KubeObjectRef",
    "MagnumCluster",
    "MatchExpression",
    "Metadata",
    "Metric",
    "MetricError",
    "MetricPicture",
    "MetricRef",
    "MetricSpec",
    "MetricValue",
    "MetricValueStatus",
    "MetricsProvider",
    "MetricsProviderSpec",
    "MovesStarted",
    "NameOnly",
    "NamespacePolicy",
    "ObjectRef",
    "Override",
    "OverrideRule",
    "Pace",
    "Placement",
    "Preemptible",
    "Preemption",
    "PreemptionPolicy",
    "PreferredTerm",
    "PriorityClass",
    "Project",
    "ProviderInfo",
    "Reachability",
    "ReplicaScheduling",
    "Resource",
    "ResourceList",
    "Shape",
    "StaticWeight",
    "StatusMeta",
    "Taint",
    "Target",
    "Toleration",
    "TopologySpreadConstraint",
    "Victim",
    "WorkloadAffinity",
    "WorkloadAffinityTerm",
    "Yield",
]
