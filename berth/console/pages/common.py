"""What every page shares: its head, how it answers, and what it is served with.

A page is a module of :mod:`berth.console.pages`: a :mod:`msgspec` response type
(its schema is the contract with the script, ``tests/unit/console/test_schema.py``
checks what the script reads against it), a pure function from what it reads to
that response, and an ``endpoint`` — a Starlette handler at module level that
finds what it serves in :class:`Console` (``request.app.state.console``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from berth.console.fleet import Fleet, Snapshot
from berth.console.prometheus import History
from berth.console.scope import Scope
from berth.store import Store

HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
           "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                      "img-src 'self' data:; frame-ancestors 'none'"}


@dataclass(frozen=True, slots=True)
class Console:
    """What the endpoints serve: etcd, the fleet's informers, and where the metrics'
    history comes from before the console's own."""

    store: Store
    fleet: Fleet
    prometheus: History | None = None


def console(request: Request) -> Console:
    found: Console = request.app.state.console
    return found


def scope(request: Request) -> Scope:
    """What the request's credential sees and may do (set where it was checked)."""
    found: Scope = request.state.scope
    return found


def snapshot(request: Request, *, history: Callable[[str], bool] | None = None) -> Snapshot:
    """The fleet now, as the request's credential may see it: every page is built from
    this, never from the fleet itself."""
    fleet = console(request).fleet
    return scope(request).narrow(fleet.snapshot(history=history), fleet.admits)


class Head(msgspec.Struct, kw_only=True):
    """What every page says of its data: its version, its time, whether etcd answers."""

    version: int
    as_of: str | None
    synced: bool
    etcd_lost_since: str | None


def iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat() if ts is not None else None


def head(snap: Snapshot) -> dict[str, Any]:
    """The head's fields, for a page's constructor (``Page(**head(snap), …)``)."""
    return {"version": snap.version, "as_of": iso(snap.taken), "synced": snap.synced,
            "etcd_lost_since": iso(snap.etcd_lost)}


class Error(msgspec.Struct):
    """What every refusal answers."""

    error: str


def answer(data: msgspec.Struct, status: int = 200, headers: dict[str, str] | None = None
           ) -> Response:
    """A page (or a refusal) as JSON, with every response's headers (and ``headers``)."""
    return Response(msgspec.json.encode(data), status, headers={**HEADERS, **(headers or {})},
                    media_type="application/json")


def error(message: str, status: int, headers: dict[str, str] | None = None) -> Response:
    return answer(Error(message), status, headers)
