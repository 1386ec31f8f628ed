"""What the framework schedules (Subjects) onto what (Candidates).

The kind being placed is data: an Application is placed on Clusters, a
Cluster without a kubeconfig on Clouds (Krake's cluster handler). Both
become a :class:`Subject`; clusters and clouds both become a
:class:`Candidate`. Plugins see only these, so there is one pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berth.store import keys
from berth.store.documents import (
    Affinity,
    ForecastPoint,
    Gang,
    MetricRef,
    Placement,
    Reachability,
    Taint,
    Toleration,
)
from berth.store.documents.pace import PaceOverride
from berth.store.documents.priority import PREEMPTIBLE, Preemptible, PreemptionPolicy
from berth.store.documents.resources import NO_DEMAND, Demand, Resources
from berth.store.documents.tenancy import Limit


@dataclass(frozen=True, slots=True)
class Ref:
    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(slots=True)
class Candidate:
    """A place a subject can go: a cluster or a cloud."""

    ref: Ref
    labels: Mapping[str, str]
    metrics: tuple[MetricRef, ...] = ()
    custom_resources: frozenset[str] = frozenset()
    taints: tuple[Taint, ...] = ()
    state: Reachability | None = None  # None: no status yet
    deleted: bool = False
    key: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.key = candidate_key(self.ref.kind, self.ref.namespace, self.ref.name)


def candidate_key(kind: str, namespace: str | None, name: str) -> str:
    """How candidates are keyed in evaluations: ``Cluster/ns/name``, ``GlobalCloud/name``."""
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


@dataclass(slots=True)
class Subject:
    """A resource to place, with everything the plugins read from its spec."""

    ref: Ref
    key: keys.Key  # the resource's etcd key
    candidate_kind: str  # "Cluster" or "Cloud"
    generation: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    created: float = 0.0
    priority: int | None = None  # its own (spec.priority); a class's is resolved when asked
    priority_class: str | None = None  # spec.priorityClassName
    preemption_policy: PreemptionPolicy | None = None  # its own, under a class's
    preemptible: Preemptible = PREEMPTIBLE  # what it gives up for a more important one
    deleted: bool = False
    scheduler_name: str | None = None
    label_constraints: tuple[str, ...] = ()
    metric_constraints: tuple[str, ...] = ()
    custom_resources: tuple[str, ...] = ()
    cluster_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    placement: Placement = field(default_factory=Placement)
    migration: bool = True
    gang: Gang | None = None
    demand: Demand = NO_DEMAND  # what its workloads ask of a cluster, as written
    # Its workload objects as written (JSON, packed: scheduler/packed.py), for what an
    # override makes them ask of one cluster (Snapshot.demand_on)
    workloads: tuple[bytes, ...] = ()
    pace: PaceOverride | None = None  # its own over the fleet's (docs/pace.md)
    # The keys of the applications it is placed with (spec.dependsOn: docs/order.md)
    depends_on: tuple[keys.Key, ...] = ()
    signature: bytes = b""  # equal for subjects the cacheable filters treat alike

    @property
    def binding_key(self) -> keys.Key:
        """Where its Binding lives, derived from ``key`` when asked (not held: memory
        at 100,000 subjects); empty for a key outside berth's layout."""
        return keys.under(keys.BINDINGS, self.key)

    @property
    def status_key(self) -> keys.Key:
        """Where the propagator says how it runs, derived as :attr:`binding_key` is."""
        return keys.under(keys.STATUS, self.key)


@dataclass(frozen=True, slots=True)
class MetricReading:
    """A candidate's metric as the scheduler sees it: usable, or why not."""

    name: str
    weight: float
    value: float | None = None  # raw
    normalized: float | None = None  # in [0, 1]
    reason: str = ""  # empty when usable; else UNKNOWN_METRIC, INVALID_METRIC, ...
    message: str = ""
    measures: str = ""  # what the definition says it measures (label berth.dev/measures)
    forecast: Sequence[ForecastPoint] = ()  # the provider's later values, oldest first

    @property
    def usable(self) -> bool:
        return self.normalized is not None and not self.reason


@dataclass(frozen=True, slots=True)
class Room:
    """A cluster's allocatable resources and what is free of them."""

    allocatable: Resources
    free: Resources


@dataclass(frozen=True, slots=True)
class SetQuota:
    """A namespace's quota of one cluster set (``setQuotas``) and what its applications'
    copies there use of it, the one being decided left out."""

    name: str
    limit: Limit
    used: Resources
    holds: Callable[[str], bool]  # whether a candidate (by key) is in the set


@dataclass(frozen=True, slots=True)
class Quota:
    """A namespace's quota of the fleet (docs/teams.md) and what its applications use of
    it, the one being decided left out; and its quotas of cluster sets."""

    namespace: str
    limit: Limit | None
    used: Resources
    sets: tuple[SetQuota, ...] = ()

    def over(self, asked: Resources) -> str:
        """Why ``asked`` does not fit in what is left; empty when it does."""
        over = self.limit.over(self.used, asked) if self.limit is not None else []
        return (f"over the quota of namespace {self.namespace}: {'; '.join(over)}"
                if over else "")

    def over_in(self, quota: SetQuota, asked: Resources) -> str:
        """Why ``asked`` of ``quota``'s set does not fit in what is left of it."""
        over = quota.limit.over(quota.used, asked)
        return (f"over the quota of namespace {self.namespace} in cluster set "
                f"{quota.name}: {'; '.join(over)}" if over else "")


@dataclass(frozen=True, slots=True)
class Placed:
    """Where another subject runs (for workload affinity and spread)."""

    ref: Ref
    labels: Mapping[str, str]
    targets: tuple[Ref, ...]


Breakdown = dict[str, Any]
