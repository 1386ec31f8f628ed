"""The fleet: every cluster's state, labels, taints, capacity and metrics, grouped by
a label (``GET /api/fleet?group=LABEL``)."""

from __future__ import annotations

import asyncio
from collections import Counter

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from berth.console import views as V
from berth.console.fleet import Snapshot
from berth.console.pages.common import Head, answer, head, snapshot
from berth.store import keys
from berth.store.documents import Reachability
from berth.store.documents.metrics import normalized
from berth.store.documents.resources import Resources

RESOURCES = ("cpu", "memory", "pods")


class Capacity(msgspec.Struct):
    """One resource of a cluster: what it can allocate, what is requested, and what
    berth placed there that the cluster does not count yet (the scheduler assumes it)."""

    allocatable: float
    requested: float
    assumed: float


class MetricCell(msgspec.Struct):
    name: str
    weight: float
    value: float | None  # as the provider gave it
    normalized: float | None  # its score, before the weight
    error: str  # why there is no value ("" if there is one)
    observed: str | None


class ClusterRow(msgspec.Struct):
    namespace: str | None
    name: str
    state: str
    reason: str
    labels: dict[str, str]
    taints: list[str]  # key[=value]:effect
    nodes: int | None
    capacity: dict[str, Capacity]  # by resource, those the cluster reports
    metrics: list[MetricCell]


class Group(msgspec.Struct):
    group: str  # the label's value ("" when not grouped)
    clusters: list[ClusterRow]


class FleetPage(Head, kw_only=True):
    group_by: str
    labels: list[str]  # every label key (what it may be grouped by)
    states: dict[str, int]
    count: int
    groups: list[Group]


def metric_key(use: V.MetricUse, namespace: str | None) -> tuple[keys.Key, keys.Key]:
    """(definition key, value key) of a metric a cluster uses."""
    if use.namespaced and namespace:
        return (keys.resource_key("Metric", use.name, namespace),
                keys.metric_value_key(use.name, namespace))
    return keys.resource_key("GlobalMetric", use.name), keys.metric_value_key(use.name)


def _amounts(r: Resources) -> dict[str, float]:
    return {"cpu": r.cpu, "memory": r.memory, "pods": r.pods}


def _assumed(snap: Snapshot) -> dict[str, dict[str, float]]:
    """Per cluster (``<ns>/<name>``): what berth placed there that the cluster does not
    report yet (its pods not counted in ``requested``): the scheduler assumes it."""
    demand = {f"{i.obj.meta.namespace}/{i.obj.meta.name}": i.obj.demand for i in snap.apps}
    out: dict[str, dict[str, float]] = {}
    for app, b in snap.bindings.items():
        d = demand.get(app)
        if d is None:
            continue
        for t in b.spec.targets:
            cid = f"{t.namespace or app.split('/')[0]}/{t.name}"
            carried = d.on(t.replicas)
            expected = t.replicas if t.replicas is not None else carried.pods
            st = snap.cluster_status.get(cid)
            cap = st.status.capacity if st is not None else None
            placed = cap.placed.get(app, 0) if cap is not None else 0
            if expected <= 0 or placed >= expected:
                continue
            left = (expected - placed) / expected
            sums = out.setdefault(cid, dict.fromkeys(RESOURCES, 0.0))
            for k, v in _amounts(carried).items():
                sums[k] += v * left
    return out


def _metrics(snap: Snapshot, c: V.ClusterView) -> list[MetricCell]:
    cells = []
    for use in c.spec.metrics:
        def_key, value_key = metric_key(use, c.metadata.namespace)
        value = snap.values.get(value_key)
        definition = snap.metrics.get(def_key)
        raw = value.status.value if value is not None else None
        score = None
        if raw is not None and definition is not None:
            scaled = normalized(raw, definition.spec.min, definition.spec.max)
            score = None if scaled is None else round(scaled[0], 4)
        err = value.status.error if value is not None else None
        cells.append(MetricCell(
            use.name, use.weight, raw, score,
            (err.reason + (f": {err.message}" if err.message else "")) if err is not None
            else ("no value yet" if value is None else ""),
            value.status.observed.isoformat()
            if value is not None and value.status.observed else None))
    return cells


def page(snap: Snapshot, group_by: str = "") -> FleetPage:
    """Every cluster: state, labels, taints, capacity (allocatable, requested, assumed),
    its metrics' values and normalized scores; grouped by the label ``group_by``."""
    assumed = _assumed(snap)
    label_keys: set[str] = set()
    groups: dict[str, list[ClusterRow]] = {}
    states: Counter[str] = Counter()
    for item in snap.clusters:
        c = item.obj
        ns = c.metadata.namespace
        cid = f"{ns}/{c.metadata.name}"
        st = snap.cluster_status.get(cid)
        state = st.status.state if st is not None and st.status.state else "UNKNOWN"
        states[state] += 1
        label_keys.update(c.metadata.labels)
        cap = st.status.capacity if st is not None else None
        capacity = {}
        if cap is not None:
            mine = assumed.get(cid, {})
            capacity = {res: Capacity(cap.allocatable[res], cap.requested.get(res, 0),
                                      round(mine.get(res, 0.0)))
                        for res in RESOURCES if cap.allocatable.get(res)}
        row = ClusterRow(
            ns, c.metadata.name, state, st.status.reason if st is not None else "no status yet",
            c.metadata.labels,
            [f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in c.spec.taints],
            cap.nodes if cap is not None else None, capacity, _metrics(snap, c))
        group = c.metadata.labels.get(group_by, "(none)") if group_by else ""
        groups.setdefault(group, []).append(row)
    for rows in groups.values():
        rows.sort(key=lambda r: (r.state == Reachability.ONLINE, r.namespace or "", r.name))
    return FleetPage(**head(snap), group_by=group_by, labels=sorted(label_keys),
                     states=dict(states), count=len(snap.clusters),
                     groups=[Group(g, groups[g]) for g in sorted(groups)])


async def endpoint(request: Request) -> Response:
    group = request.query_params.get("group", "")
    return answer(await asyncio.to_thread(lambda: page(snapshot(request), group)))
