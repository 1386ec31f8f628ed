"""The applications, as ``berth get applications`` lists them: filtered by namespace,
a label selector and a state, a page of rows at a time
(``GET /api/applications?namespace=&labels=&state=&offset=``)."""

from __future__ import annotations

import asyncio
from collections import Counter

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from berth.actions.resources import age, ready, selected, selector
from berth.console.fleet import Snapshot
from berth.console.pages.common import Head, answer, error, head, snapshot

LIST_LIMIT = 500  # rows sent at once (the rest: filter, or page on)


class AppRow(msgspec.Struct):
    namespace: str | None
    name: str
    placement: str  # the Binding's state ("Pending (gen N)" while one is decided)
    state: str  # the propagator's ("-" before any status)
    ready: str  # "available/targets"
    clusters: list[str]
    reason: str
    age: str


class ApplicationsPage(Head, kw_only=True):
    total: int  # every application
    matched: int  # those the filters keep
    offset: int
    rows: list[AppRow]  # at most LIST_LIMIT of them, from offset
    namespaces: list[str]
    states: dict[str, int]


def page(snap: Snapshot, *, namespace: str = "", labels: str = "", state: str = "",
         offset: int = 0, limit: int = LIST_LIMIT) -> ApplicationsPage:
    """The kubectl-style list: filtered by namespace, a label selector (``-l``'s syntax:
    ValueError names the term that does not parse) and state (the propagator's or the
    placement's), sorted by namespace and name, ``limit`` rows from ``offset``."""
    terms = selector(labels) if labels else []
    rows = []
    states: Counter[str] = Counter()
    for item in snap.apps:
        m = item.obj.meta
        app = f"{m.namespace}/{m.name}"
        b, st = snap.bindings.get(app), snap.app_status.get(app)
        placement = "Pending" if b is None else (
            f"Pending (gen {m.generation})" if b.spec.generation != m.generation
            else b.status.state or "-")
        shown_state = st.status.state if st is not None and st.status.state else "-"
        states[shown_state] += 1
        if namespace and m.namespace != namespace:
            continue
        if terms and not selected(m.labels, terms):
            continue
        if state and state not in (shown_state, placement):
            continue
        reason = (st.status.reason if st is not None and st.status.reason
                  else b.status.reason if b is not None else "")
        targets = {f"{t.namespace or m.namespace}/{t.name}" for t in b.spec.targets} \
            if b is not None else set()
        rows.append(AppRow(m.namespace, m.name, placement, shown_state,
                           ready(st.status.applied, targets) if st is not None else "-",
                           [t.name for t in b.spec.targets] if b is not None else [],
                           reason, age(m.created)))
    rows.sort(key=lambda r: (r.namespace or "", r.name))
    namespaces = sorted({i.obj.meta.namespace or "" for i in snap.apps})
    return ApplicationsPage(**head(snap), total=len(snap.apps), matched=len(rows),
                            offset=offset, rows=rows[offset:offset + limit],
                            namespaces=namespaces, states=dict(states))


async def endpoint(request: Request) -> Response:
    q = request.query_params
    try:
        offset = max(0, int(q.get("offset", "0")))
    except ValueError:
        return error(f"offset: {q.get('offset')!r} is not a number", 400)
    try:
        data = await asyncio.to_thread(lambda: page(
            snapshot(request), namespace=q.get("namespace", ""), labels=q.get("labels", ""),
            state=q.get("state", ""), offset=offset))
    except ValueError as exc:
        return error(str(exc), 400)
    return answer(data)
