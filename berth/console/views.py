"""The shapes the console keeps of each stored document: only what its pages show.

Decoding with these ignores every other field, so that a fleet of 10,000
applications is held without their manifests: an application keeps its demand
(what one replica asks, read from the manifest once), not the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from berth.store.documents import BindingState
from berth.store.documents.metrics import ForecastPoint, MetricError
from berth.store.documents.resources import NO_DEMAND, Demand, QuantityError, demand
from berth.store.documents.rollouts import RolloutStrategy


class Meta(msgspec.Struct):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = {}
    generation: int = 0
    created: datetime | None = None


class MetricUse(msgspec.Struct):
    name: str
    weight: float = 0.0
    namespaced: bool = False


class Taint(msgspec.Struct):
    key: str
    effect: str = ""
    value: str | None = None


class ClusterSpec(msgspec.Struct):
    metrics: list[MetricUse] = []
    taints: list[Taint] = []


class ClusterView(msgspec.Struct):
    metadata: Meta
    spec: ClusterSpec = msgspec.field(default_factory=ClusterSpec)


class Capacity(msgspec.Struct):
    allocatable: dict[str, int] = {}
    requested: dict[str, int] = {}
    nodes: int = 0
    placed: dict[str, int] = {}


class ClusterState(msgspec.Struct):
    state: str = ""
    reason: str = ""
    capacity: Capacity | None = None


class ClusterStatusView(msgspec.Struct):
    status: ClusterState = msgspec.field(default_factory=ClusterState)


class RolloutPolicy(msgspec.Struct):
    strategy: RolloutStrategy = RolloutStrategy.ALL


class AppSpec(msgspec.Struct):
    manifest: list[Any] = []
    rollout: RolloutPolicy | None = None


class AppDoc(msgspec.Struct):
    metadata: Meta
    spec: AppSpec = msgspec.field(default_factory=AppSpec)


@dataclass(frozen=True, slots=True)
class AppRow:
    """An application as the console keeps it: who it is, and what it asks of a cluster."""

    meta: Meta
    strategy: RolloutStrategy
    demand: Demand


def app_row(_key: str, doc: AppDoc) -> AppRow:
    """The informer's converter: the manifest read for its demand, then dropped (one the
    scheduler cannot read either has none here)."""
    try:
        asked = demand(doc.spec.manifest)
    except QuantityError:
        asked = NO_DEMAND
    return AppRow(doc.metadata, doc.spec.rollout.strategy if doc.spec.rollout
                  else RolloutStrategy.ALL, asked)


class Target(msgspec.Struct):
    name: str
    kind: str = "Cluster"
    namespace: str | None = None
    replicas: int | None = None
    score: float | None = None


class BindingSpec(msgspec.Struct):
    generation: int = 0
    targets: list[Target] = []
    scheduled: datetime | None = None
    decision: str = ""


class BindingStatus(msgspec.Struct):
    state: BindingState | None = None
    reason: str = ""
    held: str = ""
    deferred_until: datetime | None = None


class BindingView(msgspec.Struct):
    spec: BindingSpec = msgspec.field(default_factory=BindingSpec)
    status: BindingStatus = msgspec.field(default_factory=BindingStatus)


class Copy(msgspec.Struct):
    generation: int = 0
    health: str = ""
    reason: str = ""
    available: int | None = None
    desired: int | None = None


class Rollout(msgspec.Struct):
    generation: int = 0
    phase: str = ""
    stage: str = ""
    reason: str = ""


class AppState(msgspec.Struct):
    state: str = ""
    reason: str = ""
    applied: dict[str, Copy] = {}
    rollout: Rollout | None = None


class AppStatusView(msgspec.Struct):
    status: AppState = msgspec.field(default_factory=AppState)


class MetricSpec(msgspec.Struct):
    min: float = 0.0
    max: float = 1.0


class MetricDef(msgspec.Struct):
    metadata: Meta
    spec: MetricSpec = msgspec.field(default_factory=MetricSpec)


class MetricValueStatus(msgspec.Struct):
    value: float | None = None
    normalized: float | None = None
    observed: datetime | None = None
    error: MetricError | None = None
    forecast: list[ForecastPoint] = []


class MetricValueView(msgspec.Struct):
    """A metric's value; also what the metrics-cache's picture (under the same prefix,
    without ``metadata``) decodes to, and is then left out."""

    metadata: Meta | None = None
    status: MetricValueStatus = msgspec.field(default_factory=MetricValueStatus)
