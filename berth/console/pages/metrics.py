"""Metrics over time (``GET /api/metrics``): each metric's values (Prometheus's history
when the console has one, then its own since it started), the clusters that use it,
its forecast, the moves seen, and the applications deferred with their planned start."""

from __future__ import annotations

import asyncio

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from berth.console.fleet import Snapshot
from berth.console.pages.common import Head, answer, console, head, snapshot
from berth.console.pages.fleet import metric_key
from berth.console.prometheus import History, merged
from berth.store import keys
from berth.store.documents import BindingState

MOVES_SHOWN = 500  # the latest moves the page marks


class Series(msgspec.Struct):
    key: str  # the value's key in etcd
    metric: str  # ``price-de`` (a GlobalMetric) or ``ns/price`` (a Metric)
    clusters: list[str]  # those whose placement it scores
    points: list[tuple[float, float]]  # (unix time, value)
    forecast: list[tuple[float, float]]


class MoveRow(msgspec.Struct):
    at: float  # unix time
    application: str
    from_: list[str] = msgspec.field(name="from")
    to: list[str] = []
    decision: str = ""


class Deferred(msgspec.Struct):
    application: str
    reason: str
    start: float | None  # the planned start (unix time), the Binding's deferred_until


class MetricsPage(Head, kw_only=True):
    series: list[Series]
    source: str  # where the history comes from
    problem: str  # why Prometheus's history is not shown ("" none)
    moves: list[MoveRow]
    deferred: list[Deferred]


def metric_name(value_key: str) -> str:
    """``price-de`` (a GlobalMetric) or ``ns/price`` (a Metric) of a value's key."""
    ref = value_key.removeprefix(keys.METRIC_VALUES).split("/", 1)
    return ref[1] if len(ref) == 2 and ref[0] == "globalmetrics" else ref[-1]


def page(snap: Snapshot, prometheus: History | None = None) -> MetricsPage:
    history, source, problem = snap.history, "the console, since it started", ""
    if prometheus is not None:
        kept, problem = prometheus.series()
        if kept:
            history = merged(snap.history, kept)
            source = f"Prometheus ({prometheus.url}), then the console"
    users: dict[str, list[str]] = {}
    for item in snap.clusters:
        c = item.obj
        for use in c.spec.metrics:
            users.setdefault(metric_key(use, c.metadata.namespace)[1], []).append(
                c.metadata.name)
    series = []
    for key in sorted(set(history) | set(snap.values)):
        value = snap.values.get(key)
        forecast = [(p.at.timestamp(), p.value) for p in value.status.forecast] \
            if value is not None else []
        series.append(Series(key, metric_name(key), sorted(users.get(key, [])),
                             [(t, v) for t, v in history.get(key, [])], forecast))
    deferred = [Deferred(app, b.status.reason,
                         until.timestamp() if (until := b.status.deferred_until) else None)
                for app, b in sorted(snap.bindings.items())
                if b.status.state == BindingState.PENDING]
    return MetricsPage(**head(snap), series=series, source=source, problem=problem,
                       moves=[MoveRow(m.at, m.application, list(m.source), list(m.targets),
                                      m.decision) for m in snap.moves[-MOVES_SHOWN:]],
                       deferred=deferred)


async def endpoint(request: Request) -> Response:
    c = console(request)
    snap = await asyncio.to_thread(lambda: snapshot(request, history=lambda _k: True))
    return answer(await asyncio.to_thread(page, snap, c.prometheus))
