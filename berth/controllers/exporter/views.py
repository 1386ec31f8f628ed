"""The exporter's views of stored documents (only the fields it reads), and what it
makes of them: an application's decisions, a cluster's profile.

An application's decisions are its Binding's targets, and every cluster its status
says still holds a copy: during a move both the cluster it goes to (``arriving``
until its copy is available there) and the one it leaves (``leaving`` until that
copy is removed). A cluster is never missing from the list while it runs the
application, and the new one is listed as soon as the Binding names it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, assert_never

import msgspec

from berth.controllers.exporter.shapes import (
    Access,
    Decision,
    Placement,
    Profile,
    Property,
    Role,
    cluster_name,
)
from berth.store import keys
from berth.store.documents import (
    BindingState,
    Endpoint,
    HealthState,
    MetricRef,
    Reachability,
    Target,
)


class Meta(msgspec.Struct):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = {}
    deleted: datetime | None = None


class AppSpecHead(msgspec.Struct):
    deployedBy: Any = None  # who deploys it, when not berth (read by ``verdicts.py``)


class AppHead(msgspec.Struct):
    """An application: which one, its labels, and who deploys it when another tool does
    (its manifest is never decoded)."""

    metadata: Meta
    spec: AppSpecHead = msgspec.field(default_factory=AppSpecHead)


class BindingSpecView(msgspec.Struct):
    targets: list[Target] = []
    scheduled: datetime | None = None


class BindingStatusView(msgspec.Struct):
    state: BindingState | None = None
    reason: str = ""
    explanation: list[dict[str, Any]] = []


class BindingView(msgspec.Struct):
    metadata: Meta
    spec: BindingSpecView = msgspec.field(default_factory=BindingSpecView)
    status: BindingStatusView = msgspec.field(default_factory=BindingStatusView)


class CopyView(msgspec.Struct):
    generation: int = 0
    health: HealthState | None = None
    new: bool = False  # never available there yet: a move's or a first placement's copy


class AppStateView(msgspec.Struct):
    applied: dict[str, CopyView] = {}  # cluster "<namespace>/<name>" → its copy


class AppStatusView(msgspec.Struct):
    metadata: Meta
    status: AppStateView = msgspec.field(default_factory=AppStateView)


class ClusterSpecView(msgspec.Struct):
    metrics: list[MetricRef] = []


class ClusterView(msgspec.Struct):
    metadata: Meta
    spec: ClusterSpecView = msgspec.field(default_factory=ClusterSpecView)


class ClusterStateView(msgspec.Struct):
    state: Reachability | None = None
    reason: str = ""
    version: str = ""
    endpoint: Endpoint | None = None


class ClusterStatusView(msgspec.Struct):
    metadata: Meta
    status: ClusterStateView = msgspec.field(default_factory=ClusterStateView)


class ValueStatus(msgspec.Struct):
    value: float | None = None
    observed: datetime | None = None


class ValueView(msgspec.Struct):
    """A metric's value (the metrics-cache's), or the picture under the same prefix."""

    status: ValueStatus = msgspec.field(default_factory=ValueStatus)


def _target_id(t: Target) -> str:
    return f"{t.namespace or 'default'}/{t.name}"


def _score_line(binding: BindingView, cid: str) -> str:
    """How the scheduler scored the cluster ``cid`` (its explanation keys candidates
    ``Cluster/<namespace>/<name>``)."""
    key = f"Cluster/{cid}"
    for e in binding.status.explanation:
        if e.get("candidate") == key and "score" in e:
            parts = " ".join(f"{k}={v:g}" for k, v in (e.get("scores") or {}).items())
            return f"score {e['score']:.4f}" + (f" ({parts})" if parts else "")
    return ""


def exported_names(clusters: Iterable[ClusterView]) -> tuple[dict[str, str], dict[str, str]]:
    """Each cluster's exported name (:func:`cluster_name`), by "<namespace>/<name>";
    and the clusters left out because another one's name is theirs too (only two
    digests meeting can do that), with why: a ClusterProfile's name is its cluster's,
    and Argo CD matches clusters by name, so neither may stand for the other. Of two,
    the first given keeps the name."""
    names: dict[str, str] = {}
    taken: dict[str, str] = {}
    clashes: dict[str, str] = {}
    for cluster in clusters:
        meta = cluster.metadata
        cid = f"{meta.namespace or 'default'}/{meta.name}"
        name = cluster_name(cid)
        if name in taken:
            clashes[cid] = (f"not exported: its exported name {name!r} is cluster "
                            f"{taken[name]}'s too; rename one of them")
            continue
        taken[name] = cid
        names[cid] = name
    return names, clashes


def placement(app: str, binding: BindingView | None, status: AppStatusView | None,
              exported: dict[str, str]) -> Placement:
    """An application's decisions: its Binding's targets and the clusters still holding
    a copy. ``exported`` maps a cluster "<namespace>/<name>" to its exported name; a
    cluster it lacks is left out of the decisions (never named as another) and listed
    as unexported."""
    copies = status.status.applied if status is not None else {}
    targets = [t for t in (binding.spec.targets if binding is not None else [])
               if t.kind == "Cluster"]
    chosen = {_target_id(t) for t in targets}
    why = binding.status.reason if binding is not None else ""
    out: list[Decision] = []
    unexported = sorted(c for c in chosen | set(copies) if c not in exported)
    for cid in sorted(chosen - set(unexported)):
        copy = copies.get(cid)
        role = Role.CURRENT if copy is not None and not copy.new else Role.ARRIVING
        line = _score_line(binding, cid) if binding is not None else ""
        out.append(Decision(exported[cid], role,
                            "; ".join(p for p in (line, why) if p) or "chosen"))
    for cid in sorted(set(copies) - chosen - set(unexported)):
        out.append(Decision(exported[cid], Role.LEAVING,
                            "no longer chosen; this copy is removed once the new ones are "
                            "available" + (f" ({why})" if why else "")))
    return Placement(app, tuple(out), tuple(unexported))


def _health(state: Reachability | None) -> tuple[str, str]:
    """A ClusterProfile's ControlPlaneHealthy condition for a cluster's reachability:
    its status and reason."""
    match state:
        case Reachability.ONLINE:
            return "True", "Online"
        case Reachability.UNHEALTHY:
            return "False", "Unhealthy"
        case Reachability.OFFLINE:
            return "False", "Offline"
        case None:
            return "Unknown", "NotProbed"
        case _:
            assert_never(state)


def cluster_profile(cid: str, name: str, cluster: ClusterView,
                    status: ClusterStatusView | None,
                    values: dict[keys.Key, ValueView], provider: str = "") -> Profile:
    """A cluster's profile: its health as berth's propagator last saw it, its labels and
    its metrics' current values (``values`` by metric value key) as properties; with
    ``provider``, the access provider it is reached through, where the propagator said
    where it is (a push cluster)."""
    state = status.status if status is not None else ClusterStateView()
    healthy, reason = _health(state.state)
    # (a property's name: at most 253 characters, its value at least 1: a longer label
    # key or an empty value is left out)
    props = [Property(f"label.berth.io/{k}", v) for k, v in sorted(
        cluster.metadata.labels.items()) if v and len(k) <= 253 - len("label.berth.io/")]
    for ref in sorted(cluster.spec.metrics, key=lambda r: (r.name, r.namespaced)):
        ns = cluster.metadata.namespace if ref.namespaced else None
        value = values.get(keys.metric_value_key(ref.name, ns))
        if value is None or value.status.value is None:
            continue
        prop = f"metric.berth.io/{ns + '.' if ns else ''}{ref.name}"
        props.append(Property(prop, f"{value.status.value:g}", value.status.observed))
    message = state.reason or ({"True": "its API server answers berth's probes"}.get(
        healthy, "berth has not probed it yet"))
    access = (Access(provider, state.endpoint.server, state.endpoint.ca),) if (
        provider and state.endpoint is not None and state.endpoint.server) else ()
    return Profile(cid, name, healthy, reason, message, state.version, tuple(props), access)


__all__ = ["AppHead", "AppStatusView", "BindingView", "ClusterStatusView", "ClusterView",
           "ValueView", "cluster_profile", "exported_names", "placement"]
