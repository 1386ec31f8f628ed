"""The console's HTTP application: Starlette, served by uvicorn.

Routes: ``/`` the page (one HTML file; the script routes by ``#/fleet``,
``#/applications``, ``#/application/NS/NAME``, ``#/metrics``, ``#/what-if``),
``/static/`` its script, style and uPlot, ``/healthz``, and under ``/api/``
the pages' data (``pages``), ``/api/stream`` (server-sent events: the fleet's
version, at most every ``coalesce`` seconds, and whether etcd answers) and the
operator's actions (POST ``/api/applications/NS/NAME/rollout/approve|pause|resume``).

Credentials (:class:`Access`):

- with a bearer token configured, every ``/api/`` request must carry it
  (``Authorization: Bearer …``), and actions are allowed;
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
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from berth.actions.rollouts import Refused as ActionRefused
from berth.actions.rollouts import approve_stage, set_paused
from berth.console import pages
from berth.console.fleet import Fleet
from berth.console.prometheus import History
from berth.store import Invalid, Store, StoreError

log = logging.getLogger(__name__)

STATIC = resources.files("berth.console") / "static"
MAX_WHATIF = 1 << 20  # bytes of pasted YAML


@dataclass(frozen=True, slots=True)
class Access:
    """Who may read and who may act."""

    token: str = ""  # the bearer token ("" none)
    client_certs: bool = False  # TLS with client certificates required

    @property
    def can_act(self) -> bool:
        return bool(self.token) or self.client_certs

    def allowed(self, request: Request) -> bool:
        """The request carries the console's credential (or none is needed to read)."""
        if self.client_certs:
            return True  # the TLS handshake refused any connection without a certificate
        if not self.token:
            return True
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self.token.encode())


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


_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
            "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                       "img-src 'self' data:; frame-ancestors 'none'"}


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=_HEADERS)


def _error(message: str, status: int) -> JSONResponse:
    return _json({"error": message}, status)


Handler = Callable[[Request], Awaitable[Response]]


def build(store: Store, fleet: Fleet, access: Access, *, coalesce: float = 0.5,
          heartbeat: float = 2.0, prometheus: History | None = None) -> Starlette:
    """The application over ``fleet`` (started by the caller); ``prometheus``: where the
    metrics' history comes from before the console's own."""

    def guarded(handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            if not access.allowed(request):
                return _error("this console needs its bearer token (Authorization: Bearer)",
                              401)
            try:
                return await handler(request)
            except Invalid as exc:  # a stored value that does not decode: named
                return _error(str(exc), 422)
            except StoreError as exc:
                return _error(f"etcd: {exc}", 503)
        return run

    async def index(_request: Request) -> Response:
        return FileResponse(str(STATIC / "index.html"), headers=_HEADERS)

    async def healthz(_request: Request) -> Response:
        ok = fleet.alive()
        return Response("ok\n" if ok else "a loop has stopped\n", 200 if ok else 503,
                        media_type="text/plain")

    async def fleet_page(request: Request) -> Response:
        group = request.query_params.get("group", "")
        return _json(await asyncio.to_thread(lambda: pages.fleet(fleet.snapshot(), group)))

    async def apps_page(request: Request) -> Response:
        q = request.query_params
        try:
            offset = max(0, int(q.get("offset", "0")))
        except ValueError:
            return _error(f"offset: {q.get('offset')!r} is not a number", 400)
        try:
            data = await asyncio.to_thread(lambda: pages.applications(
                fleet.snapshot(), namespace=q.get("namespace", ""), labels=q.get("labels", ""),
                state=q.get("state", ""), offset=offset))
        except ValueError as exc:
            return _error(str(exc), 400)
        return _json(data)

    async def app_page(request: Request) -> Response:
        ns, name = request.path_params["namespace"], request.path_params["name"]
        data = await asyncio.to_thread(pages.application, store, ns, name)
        if data is None:
            return _error(f"no application {ns}/{name}", 404)
        return _json({**pages.head(fleet.snapshot()), **data})

    async def metrics_page(_request: Request) -> Response:
        snap = await asyncio.to_thread(lambda: fleet.snapshot(history=lambda _k: True))
        return _json(await asyncio.to_thread(pages.metric_series, snap, prometheus))

    async def whatif_page(request: Request) -> Response:
        body = await _bounded(request, MAX_WHATIF)
        if body is None:
            return _error(f"the YAML is larger than {MAX_WHATIF >> 20} MiB", 413)
        try:
            text = body.decode()
        except UnicodeDecodeError:
            return _error("the YAML is not UTF-8 text", 400)
        try:
            return _json(await asyncio.to_thread(pages.whatif, store, text))
        except pages.Refused as exc:
            return _error(str(exc), 400)

    async def act(request: Request) -> Response:
        if not access.can_act:
            return _error("this console was started without a credential (--token-file or "
                          "--tls-client-ca): it only reads", 403)
        ns, name = request.path_params["namespace"], request.path_params["name"]
        action = request.path_params["action"]
        try:
            if action == "approve":
                try:
                    body = await request.json()
                except (json.JSONDecodeError, UnicodeDecodeError):
                    return _error('approve takes {"stage": NAME}', 400)
                stage = body.get("stage") if isinstance(body, dict) else None
                if not isinstance(stage, str) or not stage:
                    return _error('approve takes {"stage": NAME}', 400)
                said = await asyncio.to_thread(approve_stage, store, ns, name, stage, "console")
            elif action in ("pause", "resume"):
                said = await asyncio.to_thread(set_paused, store, ns, name, action == "pause")
            else:
                return _error(f"no action {action!r} (approve, pause, resume)", 404)
        except ActionRefused as exc:
            return _error(str(exc), 409)
        log.info("console: %s", said)
        return _json({"done": said})

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
                                 headers={**_HEADERS, "X-Accel-Buffering": "no"})

    async def not_here(request: Request, exc: Exception) -> Response:
        """A path or method nothing serves: under ``/api/``, said after the token is
        checked (no route is revealed to one without it), with every response's
        headers; elsewhere (a static file that is not there) as plain text, with them."""
        code = exc.status_code if isinstance(exc, HTTPException) else 404
        if request.url.path.startswith("/api/"):
            if not access.allowed(request):
                return _error("this console needs its bearer token (Authorization: Bearer)",
                              401)
            what = ("no such page or action" if code == 404 else
                    f"{request.method} is not what it takes")
            allow = getattr(exc, "headers", None) or {}  # 405's Allow
            return JSONResponse({"error": f"{what}: {request.url.path}"}, status_code=code,
                                headers={**_HEADERS, **allow})
        return Response(f"{'not found' if code == 404 else 'method not allowed'}\n", code,
                        media_type="text/plain", headers=_HEADERS)

    routes = [
        Route("/", index),
        Route("/healthz", healthz),
        Route("/api/fleet", guarded(fleet_page)),
        Route("/api/applications", guarded(apps_page)),
        Route("/api/applications/{namespace}/{name}", guarded(app_page)),
        Route("/api/applications/{namespace}/{name}/rollout/{action}", guarded(act),
              methods=["POST"]),
        Route("/api/metrics", guarded(metrics_page)),
        Route("/api/what-if", guarded(whatif_page), methods=["POST"]),
        Route("/api/stream", guarded(stream)),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_here, 405: not_here})


async def _bounded(request: Request, limit: int) -> bytes | None:
    """The request's body, read no further than ``limit`` bytes (None: it is longer): a
    body is never held whole before it is known to fit."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


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
