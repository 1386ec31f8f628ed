"""The console's pages: one module each, listed in :data:`PAGES`.

Each page module holds its response type (:mod:`msgspec`: the schema the script
reads, checked by ``tests/unit/console/test_schema.py``), a pure function from what
it reads to that response, and its endpoint. The fleet, the applications and the
metrics are built from the fleet's frozen :class:`~berth.console.fleet.Snapshot`;
one application's page reads etcd with the functions the CLI takes from
:mod:`berth.actions`, and the what-if asks the scheduler's own what-if
(:mod:`berth.controllers.scheduler.whatif`, as ``berth explain --what-if`` does), so
that the console and the CLI never disagree.

Nothing here puts a credential in a page: the documents shown are views without
credentials, and what the CLI masks is masked.

A new page is a module here and a row below (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from berth.console.pages import application, applications, fleet, metrics, whatif

Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Page:
    """An endpoint under ``/api/`` and the type of what it answers."""

    path: str
    endpoint: Endpoint
    response: type
    methods: tuple[str, ...] = ("GET",)


PAGES = (
    Page("/api/fleet", fleet.endpoint, fleet.FleetPage),
    Page("/api/applications", applications.endpoint, applications.ApplicationsPage),
    Page("/api/applications/{namespace}/{name}", application.endpoint,
         application.ApplicationPage),
    Page("/api/applications/{namespace}/{name}/rollout/{action}", application.act,
         application.Done, ("POST",)),
    Page("/api/metrics", metrics.endpoint, metrics.MetricsPage),
    Page("/api/what-if", whatif.endpoint, whatif.WhatIfPage, ("POST",)),
)
