"""Running a controller as a process: health endpoint, leader election, signals.

Every replica serves ``/healthz``, ``/readyz`` and ``/metrics``; one leads.
The leader runs the controller; if it loses its lease it stops the
controller and exits with status 1, so its supervisor restarts it as a
follower (no half-stopped state to reason about). SIGTERM and SIGINT stop
cleanly and hand leadership over at once.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

from controllers.runtime.election import LeaderElection
from controllers.runtime.health import HealthServer
from store import Store

log = logging.getLogger(__name__)


def parse_listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"--http {value!r}: expected HOST:PORT") from None


def run_process(
    *,
    name: str,
    store: Store,
    start: Callable[[], None],
    stop: Callable[[], None],
    ready: Callable[[], bool],
    listen: tuple[str, int],
    lease_ttl: int = 10,
) -> int:
    # Controllers hold large caches of small objects: collect the young
    # generation less often, so pauses stay rare and short.
    gc.set_threshold(50_000, 20, 100)
    health = HealthServer(*listen)
    stopping = threading.Event()
    lost = threading.Event()
    started = threading.Event()

    def lead() -> None:
        log.info("%s: leading; starting", name)
        start()
        started.set()

    def follow() -> None:
        if started.is_set() and not stopping.is_set():
            log.error("%s: lost leadership; stopping", name)
            lost.set()
            stopping.set()

    election = LeaderElection(store, name, ttl=lease_ttl, on_started_leading=lead,
                              on_stopped_leading=follow)
    health.add_liveness("process", lambda: not lost.is_set())
    health.add_readiness(
        "ready", lambda: (not election.is_leader) or (started.is_set() and ready()))
    health.start()
    log.info("%s: health and metrics on http://%s:%d/", name, listen[0], health.port)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s: signal %d; stopping", name, signum)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    election.start()
    stopping.wait()
    if started.is_set():
        stop()
    election.resign()
    health.stop()
    return 1 if lost.is_set() else 0
