"""Exports: berth's clusters and decisions, written into a Kubernetes API in the fleet's
standard shapes, for the tools that read those (docs/argocd.md).

An ``Export`` names one Kubernetes API (a kubeconfig; its users are kept apart like
a Cluster's, :mod:`berth.store.credentials`), the namespace written there, the
shapes written and the applications whose decisions go out. The exporter is the one
writer of what an Export makes; what it last did is its status at
``/berth/v1/exported/exports/<name>``.

The shapes:

- ``ClusterProfile`` (SIG-Multicluster's cluster inventory, KEP-4322): one per
  berth Cluster;
- ``PlacementDecision`` (SIG-Multicluster's, KEP-5313): per application, slices of
  at most 100 decisions naming ClusterProfiles;
- ``OCMPlacementDecision`` (Open Cluster Management's ``cluster.open-cluster-
  management.io/v1beta1`` PlacementDecision): per application, the decisions in its
  status, which Argo CD's ``clusterDecisionResource`` generator reads; ``argocd``
  adds the ConfigMap that points the generator at them.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.documents.selection import ClusterChoice


class Shape(StrEnum):
    CLUSTER_PROFILE = "ClusterProfile"
    PLACEMENT_DECISION = "PlacementDecision"
    OCM_PLACEMENT_DECISION = "OCMPlacementDecision"


ALL_SHAPES = (Shape.CLUSTER_PROFILE, Shape.PLACEMENT_DECISION, Shape.OCM_PLACEMENT_DECISION)


class ApplicationChoice(ClusterChoice):
    """Applications by name (``<namespace>/<name>`` or the name alone) and by a label
    selector on their labels (given both, an application must be named and match);
    neither: all of them."""


class ArgoCD(CamelStrict):
    """The ConfigMap Argo CD's ``clusterDecisionResource`` generator names in its
    ``configMapRef``: it says to read the OCM PlacementDecisions' ``status.decisions``
    and match their ``clusterName`` with Argo CD's cluster names."""

    config_map: str = "berth-placements"


class ExportSpec(CamelStrict):
    kubeconfig: dict[str, Any]  # the API written to; its users are kept apart
    namespace: str = "default"  # where everything is written there
    shapes: list[Shape] = msgspec.field(default_factory=lambda: list(ALL_SHAPES))
    cluster_manager: str = "berth"  # ClusterProfiles' spec.clusterManager.name and label
    applications: ApplicationChoice | None = None  # None: every application
    argocd: ArgoCD | None = None
    install_crds: bool = msgspec.field(default=True, name="installCRDs")  # when absent
    # the access provider berth's push clusters are reached through, by its consumers'
    # name: each ClusterProfile lists it with the cluster's server and CA ("": none)
    access_provider: str = ""


class Export(Strict, tag_field="kind", tag="Export"):
    metadata: Metadata
    spec: ExportSpec
    api: str = "core"


class ExportState(StrEnum):
    SYNCED = "Synced"  # everything written is as berth decided
    PENDING = "Pending"  # writing, or waiting to (a first sync, a backoff)
    FAILING = "Failing"  # the target refuses or cannot be reached: see reason


class ExportedStatus(msgspec.Struct, omit_defaults=True):
    state: ExportState = ExportState.PENDING
    reason: str = ""
    objects: dict[str, int] = {}  # objects written there now, by shape
    refused: dict[str, str] = {}  # an item it could not export → why (a few, named)
    synced: datetime | None = None  # when it last was Synced
    term: int = 0  # the exporter's term that wrote this


class ExportedMeta(msgspec.Struct, omit_defaults=True):
    name: str


class Exported(msgspec.Struct, tag_field="kind", tag="Export", omit_defaults=True):
    """``/berth/v1/exported/exports/<name>``: what the exporter last made of an Export."""

    metadata: ExportedMeta
    status: ExportedStatus = msgspec.field(default_factory=ExportedStatus)
    api: str = "core"


class ToolVerdict(msgspec.Struct, omit_defaults=True):
    """What the tool that deploys an application says of its copy on one cluster (Argo
    CD: the Application its ApplicationSet generated for that cluster)."""

    application: str = ""  # the Application that deploys it there
    health: str = ""  # its health status: Healthy, Progressing, Degraded, Missing, ...
    sync: str = ""  # its sync status: Synced, OutOfSync, Unknown
    revision: str = ""  # the revision it is synced at
    message: str = ""  # why it is not Healthy, as it says


class VerdictsMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str


class VerdictsStatus(msgspec.Struct, omit_defaults=True):
    export: str = ""  # the Export whose API they were read from
    clusters: dict[str, ToolVerdict] = {}  # berth's cluster "<namespace>/<name>" → verdict
    term: int = 0  # the exporter's term that wrote this


class Verdicts(msgspec.Struct, tag_field="kind", tag="Verdicts", omit_defaults=True):
    """``/berth/v1/exported/applications/<namespace>/<name>``, the exporter's: what the
    tool that deploys a placement-only application says of its copies."""

    metadata: VerdictsMeta
    status: VerdictsStatus = msgspec.field(default_factory=VerdictsStatus)
    api: str = "core"


__all__ = ["ALL_SHAPES", "ApplicationChoice", "ArgoCD", "Export", "ExportSpec", "ExportState",
           "Exported", "ExportedMeta", "ExportedStatus", "Shape", "ToolVerdict", "Verdicts",
           "VerdictsMeta", "VerdictsStatus"]
