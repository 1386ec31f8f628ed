"""The console's HTTP application: Starlette, served by uvicorn.

Routes: ``/`` the page (one HTML file; the script routes by ``#/fleet``,
``#/applications``, ``#/application/NS/NAME``, ``#/metrics``, ``#/what-if``),
``/static/`` its script, style and uPlot, ``/vocabulary.js`` the words the script
shares with berth's documents (:mod:`berth.console.vocabulary`), ``/healthz``, and under
``/api/``
the pages' data (``pages``), ``/api/stream`` (server-sent events: the fleet's
version, at most every ``coalesce`` seconds, and whether etcd answers) and the
operator's actions (POST ``/api/applications/NS/NAME/rollout/approve|pause|resume``):
each a module of :mod:`berth.console.pages`, listed in its ``PAGES``.

Credentials (:class:`Access`):

- with a bearer token configured, every ``/api/`` request must carry it
  (``Authorization: Bearer …``), and actions are allowed;
- a team's token (several may be configured) sees and acts on its namespaces
  alone: every page is built from the fleet narrowed to them
  (:mod:`berth.console.scope`);
- with TLS client certificates required, the handshake authenticates every
  request, and actions are allowed;
- with neither, the console reads for anyone who reaches it — so it must listen
  on a loopback address only (:func:`check_exposure` refuses anything else) —
  and refuses every action.

No response carries a credential: the token is compared, never echoed, and the
documents shown are views without credentials.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from berth.console.fleet import Fleet
from berth.console.pages import PAGES, Endpoint
from berth.console.pages.common import HEADERS, Console, error
from berth.console.prometheus import History
from berth.console.scope import EVERYTHING, Scope
from berth.console.vocabulary import script
from berth.store import Invalid, Store, StoreError

log = logging.getLogger(__name__)

STATIC = resources.files("berth.console") / "static"
NEEDS_TOKEN = "this console needs its bearer token (Authorization: Bearer)"


@dataclass(frozen=True, slots=True)
class Access:
    """Who may read and who may act: the console's own credential, and the teams'."""

    token: str = ""  # the bearer token ("" none)
    client_certs: bool = False  # TLS with client certificates required
    # a team's bearer token → the namespaces it sees and acts on (berth.console.scope)
    teams: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def can_act(self) -> bool:
        return bool(self.token) or self.client_certs or bool(self.teams)

    def scope(self, request: Request) -> Scope | None:
        """What the request's credential sees and may do; None: it carries none that
        counts (every token is compared, each in constant time)."""
        if self.client_certs:  # the TLS handshake refused any connection without one
            return Scope(None, can_act=True)
        if not self.token and not self.teams:
            return EVERYTHING  # reads for anyone (on loopback alone: check_exposure)
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip().encode() if scheme.lower() == "bearer" else b""
        found: Scope | None = None
        if self.token and hmac.compare_digest(given, self.token.encode()):
            found = Scope(None, can_act=True)
        for token, namespaces in self.teams.items():
            if hmac.compare_digest(given, token.encode()):
                found = Scope(namespaces, can_act=True)
        return found if given else None

    def allowed(self, request: Request) -> bool:
        """The request carries a credential of the console's (or none is needed)."""
        return self.scope(request) is not None


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, access: Access) -> None:
    """ValueError unless the console is either on loopback or guarded by a credential."""
    if not loopback(host) and not access.can_act:
        raise ValueError(f"--listen {host}: the console answers anyone who reaches it there; "
                         "give it --token-file (a bearer token) or --tls-client-ca (client "
                         "certificates), or listen on 127.0.0.1")


def build(store: Store, fleet: Fleet, access: Access, *, coalesce: float = 0.5,
          heartbeat: float = 2.0, prometheus: History | None = None) -> Starlette:
    """The application over ``fleet`` (started by the caller); ``prometheus``: where the
    metrics' history comes from before the console's own."""

    words = script()

    def guarded(handler: Endpoint) -> Endpoint:
        async def run(request: Request) -> Response:
            scope = access.scope(request)
            if scope is None:
                return error(NEEDS_TOKEN, 401)
            request.state.scope = scope
            try:
                return await handler(request)
            except Invalid as exc:  # a stored value that does not decode: named
                return error(str(exc), 422)
            except StoreError as exc:
                return error(f"etcd: {exc}", 503)
        return run

    async def index(_request: Request) -> Response:
        return FileResponse(str(STATIC / "index.html"), headers=HEADERS)

    async def vocabulary(_request: Request) -> Response:
        return Response(words, media_type="text/javascript", headers=HEADERS)

    async def healthz(_request: Request) -> Response:
        ok = fleet.alive()
        return Response("ok\n" if ok else "a loop has stopped\n", 200 if ok else 503,
                        media_type="text/plain")

    async def stream(request: Request) -> Response:
        async def changes() -> AsyncIterator[str]:
            last, quiet = -1, 0.0
            yield "retry: 2000\n\n"
            while not await request.is_disconnected():
                version, lost = fleet.version, fleet.etcd_lost
                if version != last or quiet >= heartbeat:
                    last, quiet = version, 0.0
                    said = json.dumps({"version": version, "etcd_lost_since": lost})
                    yield f"event: change\ndata: {said}\n\n"
                await asyncio.sleep(coalesce)
                quiet += coalesce
        return StreamingResponse(changes(), media_type="text/event-stream",
                                 headers={**HEADERS, "X-Accel-Buffering": "no"})

    async def not_here(request: Request, exc: Exception) -> Response:
        """A path or method nothing serves: under ``/api/``, said after the token is
        checked (no route is revealed to one without it), with every response's
        headers; elsewhere (a static file that is not there) as plain text, with them."""
        code = exc.status_code if isinstance(exc, HTTPException) else 404
        if request.url.path.startswith("/api/"):
            if not access.allowed(request):
                return error(NEEDS_TOKEN, 401)
            what = ("no such page or action" if code == 404 else
                    f"{request.method} is not what it takes")
            allow = getattr(exc, "headers", None) or {}  # 405's Allow
            return error(f"{what}: {request.url.path}", code, dict(allow))
        return Response(f"{'not found' if code == 404 else 'method not allowed'}\n", code,
                        media_type="text/plain", headers=HEADERS)

    routes = [
        Route("/", index),
        Route("/vocabulary.js", vocabulary),
        Route("/healthz", healthz),
        *(Route(p.path, guarded(p.endpoint), methods=list(p.methods)) for p in PAGES),
        Route("/api/stream", guarded(stream)),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_here, 405: not_here})
    app.state.console = Console(store, fleet, prometheus)
    return app


@dataclass(frozen=True, slots=True)
class Listen:
    host: str = "127.0.0.1"
    port: int = 9190
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""


def serve(app: Starlette, listen: Listen, *, started: Callable[[str], None]) -> None:
    """Serve until interrupted; ``started(url)`` once it listens."""
    import uvicorn

    kwargs: dict[str, Any] = {}
    if listen.tls_cert:
        kwargs.update(ssl_certfile=listen.tls_cert, ssl_keyfile=listen.tls_key)
    if listen.tls_client_ca:
        kwargs.update(ssl_ca_certs=listen.tls_client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
    config = uvicorn.Config(app, host=listen.host, port=listen.port, log_level="warning",
                            access_log=False, timeout_graceful_shutdown=2, lifespan="off",
                            **kwargs)
    server = uvicorn.Server(config)
    scheme = "https" if listen.tls_cert else "http"
    host = f"[{listen.host}]" if ":" in listen.host else listen.host

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started and not task.done():
            await asyncio.sleep(0.05)
        if server.started:
            bound = [s.getsockname() for srv in server.servers for s in srv.sockets]
            port = bound[0][1] if bound else listen.port
            started(f"{scheme}://{host}:{port}/")
        await task

    asyncio.run(run())
