"""Where workloads run: Clusters, and the Clouds that clusters are placed on.

A Cluster with a kubeconfig is a Kubernetes cluster applications are placed
on. A Cluster without one is itself waiting to be placed on a Cloud (Krake
"Cluster handler"), with label and metric constraints on clouds.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

import msgspec

from berth.store.codec import decoder
from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.documents.metrics import MetricRef


class LabelMetricConstraints(Strict):
    """Seed 000's label and metric constraints on the candidates."""

    labels: list[str] = []
    metrics: list[str] = []


class ClusterConstraints(Strict):
    cloud: LabelMetricConstraints | None = None


class Taint(CamelStrict):
    key: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    value: str | None = None


class ClusterMode(StrEnum):
    """How berth reaches a cluster (docs/agents.md): ``Push``, the propagator dials its
    API with the kubeconfig stored here; ``Pull``, an agent in the cluster dials etcd
    and carries out the cluster's work, and the Cluster holds no credential."""

    PUSH = "Push"
    PULL = "Pull"


class ClusterSpec(Strict):
    kubeconfig: dict[str, Any] | None = None
    mode: ClusterMode = ClusterMode.PUSH
    metrics: list[MetricRef] = []
    custom_resources: list[str] = []
    constraints: ClusterConstraints | None = None
    taints: list[Taint] = []
    # Krake's cluster fields, accepted so its YAML loads unchanged.
    tosca: Any = None
    backoff: Any = None
    backoff_delay: Any = None
    backoff_limit: Any = None
    inherit_metrics: bool | None = None
    auto_cluster_create: Any = None
    scale: Any = None


class Cluster(Strict, tag_field="kind", tag="Cluster"):
    metadata: Metadata
    spec: ClusterSpec
    api: str = "kubernetes"
    status: dict[str, Any] | None = None


class CloudSpec(Strict):
    metrics: list[MetricRef] = []
    # Krake's cloud backends (OpenStack, IM), accepted unchanged.
    type: str | None = None
    openstack: Any = None
    im: Any = None

    def __post_init__(self) -> None:
        """Krake keeps a cloud's metrics in its backend's section
        (``spec.openstack.metrics``): they are the cloud's metrics here too."""
        if self.metrics:
            return
        for backend in (self.openstack, self.im):
            if isinstance(backend, dict) and backend.get("metrics"):
                decoder(list[MetricRef])  # msgspec's view of it, built under the lock
                self.metrics = msgspec.convert(backend["metrics"], list[MetricRef])
                return


class Cloud(Strict, tag_field="kind", tag="Cloud"):
    metadata: Metadata
    spec: CloudSpec = msgspec.field(default_factory=CloudSpec)
    api: str = "infrastructure"
    status: dict[str, Any] | None = None


class GlobalCloud(Cloud, tag="GlobalCloud"):
    pass
