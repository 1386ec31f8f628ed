"""The scheduler's views of stored documents: only the fields it reads.

An Application's manifest is never decoded (msgspec skips it without
building it); a Cluster's kubeconfig is read as raw bytes, and only whether
it has one is kept. :mod:`berth.controllers.scheduler.subjects` turns a view
into what the scheduler keeps (a Subject, a compact Binding).
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from berth.store.documents import (
    Affinity,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    Gang,
    HealthState,
    HeldBy,
    MetricRef,
    ObjectRef,
    Placement,
    Preemptible,
    Preemption,
    PreemptionPolicy,
    Taint,
    Toleration,
)
from berth.store.documents.application import AppConstraints, Dependency
from berth.store.documents.infrastructure import ClusterConstraints
from berth.store.documents.openstack import MagnumConstraints
from berth.store.documents.pace import PaceOverride


class Meta(msgspec.Struct):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = {}
    generation: int = 0
    created: datetime | None = None
    deleted: datetime | None = None


class AppSpec(msgspec.Struct):
    manifest: list[msgspec.Raw] = []  # only workloads are decoded (subjects.app_demand)
    constraints: AppConstraints | None = None
    migration: bool | None = None
    placement: Placement | None = None
    cluster_selector: dict[str, str] = msgspec.field(default_factory=dict, name="clusterSelector")
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    scheduler_name: str | None = msgspec.field(default=None, name="schedulerName")
    priority: int | None = None
    priority_class_name: str | None = msgspec.field(default=None, name="priorityClassName")
    preemption_policy: PreemptionPolicy | None = msgspec.field(default=None,
                                                               name="preemptionPolicy")
    preemptible: Preemptible | None = None
    gang: Gang | None = None
    pace: PaceOverride | None = None
    depends_on: list[Dependency] = msgspec.field(default_factory=list, name="dependsOn")


class AppView(msgspec.Struct):
    metadata: Meta
    spec: AppSpec = msgspec.field(default_factory=AppSpec)


class ObjectMeta(msgspec.Struct):
    annotations: dict[str, str] = {}


class ObjectHeader(msgspec.Struct):
    """Of a manifest's object, what says whether it is a workload."""

    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class ClusterSpec(msgspec.Struct):
    kubeconfig: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))
    mode: str = "Push"  # Pull: reached by its agent, without a kubeconfig here
    metrics: list[MetricRef] = []
    custom_resources: list[str] = []
    taints: list[Taint] = []
    constraints: ClusterConstraints | None = None


class ClusterView(msgspec.Struct):
    metadata: Meta
    spec: ClusterSpec = msgspec.field(default_factory=ClusterSpec)

    @property
    def existing(self) -> bool:
        """An existing Kubernetes cluster, a candidate: it has a kubeconfig, or an agent
        reaches it (Pull). Any other Cluster is to be placed on a Cloud itself."""
        return self.spec.mode == "Pull" or bytes(self.spec.kubeconfig).strip() not in (
            b"", b"null", b"{}")


class CloudSpec(msgspec.Struct):
    metrics: list[MetricRef] = []


class CloudView(msgspec.Struct):
    """A cloud, or an OpenStack project: a candidate with labels and metrics."""

    metadata: Meta
    spec: CloudSpec = msgspec.field(default_factory=CloudSpec)


class ProviderRef(msgspec.Struct):
    name: str = ""
    metric: str = ""


class MetricDefSpec(msgspec.Struct):
    min: float
    max: float
    provider: ProviderRef = msgspec.field(default_factory=ProviderRef)


class MetricDefView(msgspec.Struct):
    metadata: Meta
    spec: MetricDefSpec


def kept_reason(state: BindingState | None, reason: str, held: HeldBy) -> str:
    """The reason where the scheduler compares it: a state other than Scheduled, or a
    move held back (a Scheduled Binding's summary changes with the fleet: not kept)."""
    return reason if state != BindingState.SCHEDULED or held else ""


class BindingStatusView(msgspec.Struct):
    state: BindingState | None = None
    reason: str = ""
    held: HeldBy = HeldBy.NOTHING
    deferred_until: datetime | None = None
    preemption: Preemption | None = None
    yielded_to: str = ""
    yielded_plan: str = ""


class BindingView(msgspec.Struct):
    """A Binding without its explanation: what the scheduler reads back (small in memory)."""

    metadata: BindingMeta
    spec: BindingSpec
    status: BindingStatusView = msgspec.field(default_factory=BindingStatusView)

    @classmethod
    def of(cls, doc: Binding) -> BindingView:
        st = doc.status
        return cls(doc.metadata, doc.spec, BindingStatusView(
            st.state, kept_reason(st.state, st.reason, st.held), st.held, st.deferred_until,
            st.preemption, st.yielded_to, st.yielded_plan))


class MagnumSpecView(msgspec.Struct):
    constraints: MagnumConstraints | None = None


class MagnumView(msgspec.Struct):
    metadata: Meta
    spec: MagnumSpecView = msgspec.field(default_factory=MagnumSpecView)


class _Failed(msgspec.Struct):
    at: datetime
    generation: int


class _CopyView(msgspec.Struct):
    generation: int = 0
    health: HealthState | None = None
    new: bool = False


class _RolloutView(msgspec.Struct):
    generation: int = 0
    phase: str = ""


class _FailedState(msgspec.Struct):
    failed: dict[str, _Failed] = {}
    running_on: list[ObjectRef] = []
    finished: int = 0
    working: int = 0
    applied: dict[str, _CopyView] = {}
    rollout: _RolloutView | None = None


class FailuresView(msgspec.Struct):
    """Of the propagator's application status, only what the scheduler reads: the clusters
    the application could not become available on, where it runs, the generation whose
    work is all done (its Jobs complete) or still runs (a Job not complete), and where
    its copies are steady (the pace:
    :func:`berth.store.documents.pace.steady`)."""

    status: _FailedState = msgspec.field(default_factory=_FailedState)


