"""Each process's HTTP endpoint: ``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz`` answers 200 while every liveness check passes (the process is
not wedged); ``/readyz`` answers 200 while every readiness check passes
(informers synced, and so on); ``/metrics`` is prometheus_client's exposition.
A failing check answers 503 and names itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Check = Callable[[], bool]


class HealthServer:
    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, registry: CollectorRegistry = REGISTRY
    ) -> None:
        self.liveness: dict[str, Check] = {}
        self.readiness: dict[str, Check] = {}
        self.registry = registry
        server = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, generate_latest(server.registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    checks = server.liveness if path == "/healthz" else server.readiness
                    failing = [name for name, check in checks.items() if not _safe(check)]
                    body = ("failing: " + ", ".join(failing) if failing else "ok") + "\n"
                    self._reply(503 if failing else 200, body.encode(), "text/plain")
                else:
                    self._reply(404, b"not found\n", "text/plain")

            def _reply(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def add_liveness(self, name: str, check: Check) -> None:
        self.liveness[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        self.readiness[name] = check

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _safe(check: Check) -> bool:
    try:
        return bool(check())
    except Exception:
        log.exception("health check failed")
        return False
