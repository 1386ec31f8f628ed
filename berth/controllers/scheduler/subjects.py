"""What the scheduler keeps of stored documents: the framework's Subjects, and the
compact values its informers hold (converted from :mod:`views`, the decoded
documents: the one place where Application, Cluster and MagnumCluster differ).

Every application the scheduler watches passes through
:func:`subject_from_application` and every Binding it writes comes back through
:func:`compact_binding`; what many of them repeat is held once.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import msgspec

from berth.controllers.scheduler.framework import Ref, Subject
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.packed import pack
from berth.controllers.scheduler.views import (
    AppView,
    BindingStatusView,
    BindingView,
    ClusterView,
    FailuresView,
    MagnumView,
    ObjectHeader,
    kept_reason,
)
from berth.store import keys
from berth.store.documents import BindingMeta, BindingSpec, ObjectRef, Placement, Target
from berth.store.documents.metrics import ForecastPoint, MetricError, MetricPicture, MetricValue
from berth.store.documents.pace import steady
from berth.store.documents.priority import PREEMPTIBLE
from berth.store.documents.resources import (
    NO_DEMAND,
    REPLICA_FIELDS,
    REPLICAS_PATH,
    Demand,
    QuantityError,
    demand,
)

log = logging.getLogger(__name__)

_HEADER = msgspec.json.Decoder(ObjectHeader)


def app_demand(key: str, manifest: list[msgspec.Raw]) -> tuple[Demand, tuple[bytes, ...]]:
    """What the application's workloads ask for, and those workload objects as written
    (JSON, packed: an override may change what they ask of one cluster, :mod:`demands`,
    :mod:`packed`); only
    workload objects are decoded in full (a ConfigMap's data costs nothing). A manifest
    berth cannot read asks for nothing (bootstrap and apply refuse it; garbage written
    by hand is logged)."""
    objects: list[Any] = []
    kept: list[bytes] = []
    try:
        for raw in manifest:
            head = _HEADER.decode(raw)
            wanted = (head.kind in REPLICA_FIELDS or head.kind == "Pod"
                      or REPLICAS_PATH in head.metadata.annotations)
            objects.append(msgspec.json.decode(raw) if wanted else None)
            if wanted:
                kept.append(pack(bytes(raw)))
        return demand(objects), tuple(kept)
    except (msgspec.DecodeError, QuantityError) as exc:
        log.warning("%s: its manifest's resource requests cannot be read (%s): it is "
                    "placed as if it asked for nothing", key, exc)
        return NO_DEMAND, ()


@dataclass(frozen=True, slots=True)
class ValueView:
    """What the scheduler reads of a metric value (a ``MetricValue``'s status): a
    tenth of the memory the decoded document, metadata and provider and all, holds."""

    value: float | None
    error: MetricError | None
    forecast: tuple[ForecastPoint, ...]


def compact_value(key: str, doc: MetricValue | MetricPicture) -> ValueView | MetricPicture:
    """The values informer's convert: a value as :class:`ValueView`, the picture as it
    is. Decoded as the whole document first, so a malformed one is still refused."""
    if isinstance(doc, MetricPicture):
        return doc
    s = doc.status
    return ValueView(s.value, s.error, tuple(s.forecast) if s.forecast else ())


_KUBECONFIG = msgspec.Raw(b"true")  # kept in place of a kubeconfig: an existing cluster
_NO_KUBECONFIG = msgspec.Raw(b"null")


def compact_cluster(key: str, c: ClusterView) -> ClusterView:
    """A Cluster as the scheduler keeps it: whether it is an existing cluster (a
    kubeconfig, or an agent: :attr:`ClusterView.existing`), not the kubeconfig. A
    decoded Raw is a view into the whole stored document, which stays in memory as
    long as the Raw does: every cluster's document, certificates and all, for a
    scheduler that only asks whether there is one. Its labels' keys and
    values, and its metric references, are shared with every other cluster's."""
    raw = _KUBECONFIG if c.existing else _NO_KUBECONFIG
    m = c.metadata
    labels = {sys.intern(k): sys.intern(v) for k, v in m.labels.items()}
    return msgspec.structs.replace(
        c, metadata=msgspec.structs.replace(m, labels=labels),
        spec=msgspec.structs.replace(c.spec, kubeconfig=raw,
                                     metrics=[_shared_spec(r) for r in c.spec.metrics]))


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Shared(Generic[K, V]):
    """Equal values held once (a fleet's applications repeat a few label sets, demands
    and placements, its Bindings a few targets: memory at 100,000 of them): the first
    one made is handed out for every equal one after it. Bounded: a full table starts
    afresh, and what it handed out stays shared where it is. Informers of several
    kinds share values from their own threads: one lock."""

    LIMIT = 1 << 14

    def __init__(self) -> None:
        self._held: dict[K, V] = {}
        self._lock = threading.Lock()

    def share(self, key: K, make: Callable[[], V]) -> V:
        """The value held for ``key``, made by ``make()`` if none is."""
        with self._lock:
            found = self._held.get(key)
            if found is None:
                if len(self._held) >= self.LIMIT:
                    self._held.clear()
                found = self._held[key] = make()
            return found


# the labels' items → one read-only mapping of them
_LABEL_SETS: _Shared[tuple[tuple[str, str], ...], Mapping[str, str]] = _Shared()
# (kind, name, namespace, replicas) → one Target, score 0 (never read back)
_TARGETS: _Shared[tuple[str, str, str | None, int | None], Target] = _Shared()
_DEMANDS: _Shared[Demand, Demand] = _Shared()  # a demand → the first equal one
# (type, encoded) → the first equal placement, affinity or metric reference
_SPECS: _Shared[tuple[type, bytes], Any] = _Shared()

S = TypeVar("S", bound=msgspec.Struct)


def _shared_spec(value: S) -> S:
    """``value``, or the equal one another subject holds (neither is ever changed)."""
    found: S = _SPECS.share((type(value), msgspec.msgpack.encode(value)), lambda: value)
    return found


def _interned(labels: dict[str, str]) -> Mapping[str, str]:
    """Labels as one read-only mapping shared by every subject with the same ones, their
    keys and values shared with every other subject's."""
    if not labels:
        return _NO_LABELS
    items = tuple(labels.items())
    return _LABEL_SETS.share(items, lambda: MappingProxyType(
        {sys.intern(k): sys.intern(v) for k, v in items}))


def _shared_demand(demand: Demand) -> Demand:
    return _DEMANDS.share(demand, lambda: demand)


def compact_binding(key: str, b: BindingView) -> BindingView:
    """A Binding as the scheduler keeps it, at 100,000s: the strings that repeat
    (kinds, namespaces, states, cluster names) shared, the application's name held
    once with its subject's, each target held once for every Binding placed the same
    there (the score it was chosen with dropped: never read back), ``scheduled`` the
    same object as ``created`` when they are equal, ``modified`` dropped, and the
    reason only where the scheduler compares it (a state other than Scheduled, or a
    move held back). The decision's id is kept: the next write carries it on."""
    m, spec, status = b.metadata, b.spec, b.status
    r = spec.resource
    ns = _intern(m.namespace)
    name = sys.intern(m.name)
    scheduled = m.created if spec.scheduled == m.created else spec.scheduled
    return BindingView(
        BindingMeta(name, ns, created=m.created),
        BindingSpec(ObjectRef(sys.intern(r.kind), name, ns), spec.generation,
                    [_shared_target(t) for t in spec.targets], scheduled, spec.decision),
        BindingStatusView(status.state, kept_reason(status.state, status.reason, status.held),
                          status.held, status.deferred_until, status.preemption,
                          _intern(status.yielded_to) or "", status.yielded_plan))


def _shared_target(t: Target) -> Target:
    return _TARGETS.share((t.kind, t.name, t.namespace, t.replicas), lambda: Target(
        sys.intern(t.kind), sys.intern(t.name), _intern(t.namespace), 0.0, t.replicas))


def _intern(value: str | None) -> str | None:
    return sys.intern(value) if value is not None else None


_DEFAULT_PLACEMENT = Placement()  # shared by every subject without one: never changed
_NO_LABELS: Mapping[str, str] = MappingProxyType({})


def _signature(*parts: object) -> bytes:
    return hashlib.blake2b(msgspec.msgpack.encode(parts), digest_size=16).digest()


def subject_from_application(key: keys.Key, app: AppView) -> Subject:
    s = app.spec
    c = s.constraints.cluster if s.constraints and s.constraints.cluster else None
    migration = s.migration if s.migration is not None else (
        s.constraints.migration if s.constraints and s.constraints.migration is not None
        else True)
    placement = _shared_spec(s.placement) if s.placement else _DEFAULT_PLACEMENT
    asked, workloads = app_demand(key, s.manifest) if s.manifest else (NO_DEMAND, ())
    subject = Subject(
        ref=Ref("Application", _intern(app.metadata.namespace), sys.intern(app.metadata.name)),
        key=key,
        candidate_kind="Cluster",
        generation=app.metadata.generation,
        labels=_interned(app.metadata.labels),
        created=app.metadata.created.timestamp() if app.metadata.created else 0.0,
        priority=s.priority,
        priority_class=_intern(s.priority_class_name),
        preemption_policy=s.preemption_policy,
        preemptible=s.preemptible if s.preemptible is not None else PREEMPTIBLE,
        deleted=app.metadata.deleted is not None,
        scheduler_name=s.scheduler_name,
        label_constraints=tuple(map(sys.intern, c.labels)) if c else (),
        metric_constraints=tuple(map(sys.intern, c.metrics)) if c else (),
        custom_resources=tuple(c.custom_resources) if c else (),
        cluster_selector=s.cluster_selector or _NO_LABELS,
        affinity=_shared_spec(s.affinity) if s.affinity else None,
        tolerations=tuple(s.tolerations) if s.tolerations else (),
        placement=placement,
        migration=migration,
        gang=s.gang,
        demand=_shared_demand(asked) if s.manifest else NO_DEMAND,
        workloads=workloads,
        pace=s.pace,
        depends_on=tuple(keys.resource_key("Application", d.name,
                                           d.namespace or app.metadata.namespace)
                         for d in s.depends_on),
    )
    subject.signature = _signature(
        "Cluster", subject.ref.namespace, subject.label_constraints, subject.metric_constraints,
        subject.custom_resources, s.cluster_selector,
        s.affinity.cluster_affinity if s.affinity else None, s.tolerations,
        placement.policy, placement.cluster_names, placement.topology_spread_constraints,
        placement.cluster_groups,
    )
    return subject


def subject_from_cluster(key: keys.Key, cluster: ClusterView) -> Subject:
    """A cluster without a kubeconfig, to be placed on a cloud (Krake)."""
    cloud = cluster.spec.constraints.cloud if cluster.spec.constraints else None
    subject = Subject(
        ref=Ref("Cluster", cluster.metadata.namespace, cluster.metadata.name),
        key=key,
        candidate_kind="Cloud",
        generation=cluster.metadata.generation,
        labels=cluster.metadata.labels,
        created=cluster.metadata.created.timestamp() if cluster.metadata.created else 0.0,
        deleted=cluster.metadata.deleted is not None,
        label_constraints=tuple(cloud.labels) if cloud else (),
        metric_constraints=tuple(cloud.metrics) if cloud else (),
        migration=False,  # a cluster, once placed on a cloud, stays there
    )
    subject.signature = _signature("Cloud", subject.ref.namespace, subject.label_constraints,
                                   subject.metric_constraints)
    return subject


def subject_from_magnum(key: keys.Key, magnum: MagnumView) -> Subject:
    """A Magnum cluster, to be placed on an OpenStack project (Krake)."""
    project = magnum.spec.constraints.project if magnum.spec.constraints else None
    m = magnum.metadata
    subject = Subject(
        ref=Ref("MagnumCluster", m.namespace, m.name),
        key=key,
        candidate_kind="Project",
        generation=m.generation,
        labels=m.labels,
        created=m.created.timestamp() if m.created else 0.0,
        deleted=m.deleted is not None,
        label_constraints=tuple(project.labels) if project else (),
        metric_constraints=tuple(project.metrics) if project else (),
        migration=False,  # a Magnum cluster, once created in a project, stays there
    )
    subject.signature = _signature("Project", subject.ref.namespace,
                                   subject.label_constraints, subject.metric_constraints)
    return subject


@dataclass(frozen=True, slots=True)
class Failures:
    """Candidate key → (when, for which generation) it failed; where it still runs; the
    generation whose work is all done, and the newest with a Job still running (0:
    none)."""

    failed: Mapping[str, tuple[float, int]]
    running_on: tuple[Target, ...]
    finished: int = 0
    # Where its copies are not in transition (None: it runs nowhere yet): the pace.
    steady: frozenset[str] | None = None
    working: int = 0


NO_FAILURES = Failures({}, ())
_STEADY: dict[frozenset[str], Failures] = {}  # shared values for the common case, by set


def compact_failures(key: str, view: FailuresView) -> Failures:
    """One shared value for the (many) applications that failed nowhere and are not
    finished, per set of clusters where they run steadily."""
    st = view.status
    rollout = st.rollout
    ok = steady(st.applied, rollout.generation if rollout is not None else 0,
                rollout.phase if rollout is not None else "")
    here = frozenset(ok) if ok is not None else None
    if not st.failed and not st.finished and not st.working:
        if here is None:
            return NO_FAILURES
        shared = _STEADY.get(here)
        if shared is None:
            shared = _STEADY[here] = Failures({}, (), 0, here)
        return shared
    failed = {}
    for cid, f in st.failed.items():
        namespace, _, name = cid.partition("/")
        failed[candidate_key("Cluster", namespace or None, name)] = (f.at.timestamp(),
                                                                    f.generation)
    return Failures(failed, tuple(Target(r.kind, r.name, r.namespace) for r in st.running_on),
                    st.finished, here, st.working)
