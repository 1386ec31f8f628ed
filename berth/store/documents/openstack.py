"""OpenStack: Projects, and the Magnum clusters placed on them (Krake's Magnum
cluster handler, in Krake's shapes).

A MagnumCluster is placed on the best Project by the same pipeline that places
an Application on a Cluster and a Cluster on a Cloud: the project's labels and
metrics against the cluster's ``constraints.project`` (label constraints, as
Krake; metric constraints too, as for clouds), the best by the project's
metrics. Its Binding names the Project; creating the Magnum cluster there is
left to a controller that berth does not have (Krake marks Magnum as no
longer developed).
"""

from __future__ import annotations

from typing import Any

import msgspec

from berth.store.documents.base import Metadata, Strict
from berth.store.documents.infrastructure import LabelMetricConstraints
from berth.store.documents.metrics import MetricRef


class ProjectSpec(Strict):
    url: str  # the OpenStack identity service (Keystone)
    auth: Any  # Krake's auth methods (password, application_credential), unchanged
    template: str  # the Magnum cluster template's UUID
    metrics: list[MetricRef] = []


class Project(Strict, tag_field="kind", tag="Project"):
    metadata: Metadata
    spec: ProjectSpec
    api: str = "openstack"
    status: dict[str, Any] | None = None


class MagnumConstraints(Strict):
    project: LabelMetricConstraints | None = None


class MagnumClusterSpec(Strict):
    master_count: int | None = None
    node_count: int | None = None
    metrics: list[MetricRef] = []
    constraints: MagnumConstraints | None = None


class MagnumCluster(Strict, tag_field="kind", tag="MagnumCluster"):
    metadata: Metadata
    spec: MagnumClusterSpec = msgspec.field(default_factory=MagnumClusterSpec)
    api: str = "openstack"
    status: dict[str, Any] | None = None
