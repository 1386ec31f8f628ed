"""Running a controller as a process: health endpoint, leader election, signals.

Every replica serves ``/healthz``, ``/readyz`` and ``/metrics``; one leads.
The leader runs the controller. A replica that loses its lease (etcd
unreachable for longer than the lease allows, say) stops its controller and
campaigns again; when it leads again it starts a fresh one, built by the
``make`` function, so no state of the old run leaks into the new. SIGTERM
and SIGINT stop cleanly and hand leadership over at once.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any, Protocol, runtime_checkable

from prometheus_client import Counter

from berth.controllers.runtime.election import LeaderElection
from berth.controllers.runtime.health import HealthServer
from berth.controllers.runtime.observe import LEADER_STATE
from berth.store import Fence, Store, StoreError, keys

log = logging.getLogger(__name__)

GC_SECONDS = Counter("berth_gc_seconds_total", "Time spent in Python's cyclic collector",
                     ["generation"])
_gc_began: list[float] = []


def _time_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_began[:] = [time.perf_counter()]
    elif _gc_began:
        GC_SECONDS.labels(str(info.get("generation", -1))).inc(time.perf_counter() - _gc_began[0])


class Controller(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...

    def ready(self) -> bool: ...


@runtime_checkable
class Supervised(Protocol):
    def alive(self) -> bool:
        """False when one of the controller's loops died or is stuck."""
        ...


class _EveryReplica:
    """In place of an election for a controller whose replicas all work (each on its
    share): it always leads, unfenced (such a controller fences its own writes)."""

    is_leader = True

    def start(self) -> None:
        pass

    def alive(self) -> bool:
        return True

    def resign(self) -> None:
        pass


def writer_for(election: LeaderElection | _EveryReplica, store: Store) -> Store | None:
    """The store a controller starting now writes with: fenced by the term read now,
    or None when leadership ended since ``is_leader`` was read (there is no term then:
    a controller never starts without one)."""
    if isinstance(election, _EveryReplica):
        return store
    fence = election.fence()
    return store.fenced(fence, election.tenure.holds) if fence is not None else None


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
    make: Callable[[Store], Controller],
    listen: tuple[str, int],
    lease_ttl: int = 10,
    retry_delay: float = 1.0,
    elect: bool = True,
    about: Mapping[str, Any] | None = None,
    election_key: keys.Key | None = None,
    campaign: Callable[[str, float], bytes] | None = None,
) -> int:
    """Serve health, and run the controller ``make`` builds while this replica leads
    (``elect=False``: always — the controller shares the work among replicas itself).

    ``make`` is given the store to write with: fenced by this leader's term, so that
    nothing it writes lands once another replica leads (or nobody does). ``about``
    goes into the leader's lease key (its configuration, for what-if); ``election_key``
    and ``campaign`` replace that key and its value (an agent's heartbeat)."""
    # Controllers hold large caches of small objects: collect the young
    # generation rarely, so that what lives a while (decisions in flight, queued
    # writes, a watch's batch) is mostly gone by then and is never traversed.
    # Against a threshold four times lower, the scheduler is faster through a
    # burst at the same RSS and the same p99 of time to bind.
    gc.set_threshold(200_000, 20, 100)
    if _time_gc not in gc.callbacks:
        gc.callbacks.append(_time_gc)
    changed = threading.Condition()
    stopping = threading.Event()
    running: list[Controller] = []

    def wake() -> None:
        with changed:
            changed.notify_all()

    election: LeaderElection | _EveryReplica = (
        LeaderElection(store, name, ttl=lease_ttl, on_started_leading=wake,
                       on_stopped_leading=wake, about=about, key=election_key, body=campaign)
        if elect else _EveryReplica())
    try:
        health = HealthServer(*listen)
    except OSError as exc:  # e.g. the port is taken: say so, no traceback
        raise ValueError(f"--http {listen[0]}:{listen[1]}: cannot listen there: "
                         f"{exc.strerror or exc} (another port, or port 0 for any)") from None
    health.add_liveness("process", lambda: not stopping.is_set())
    health.add_liveness("election", election.alive)
    health.add_liveness("loops", lambda: not running or not isinstance(
        running[0], Supervised) or running[0].alive())
    health.add_readiness(
        "ready", lambda: (not election.is_leader) or (bool(running) and running[0].ready()))
    health.add_readiness("etcd", store.link.up)  # a replica that cannot reach etcd is no use
    health.start()
    log.info("%s: health and metrics on http://%s:%d/", name, listen[0], health.port)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s: signal %d; stopping", name, signum)
        stopping.set()
        wake()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    election.start()
    started: list[Fence | None] = []  # the term the running controller started under
    try:
        while not stopping.is_set():
            term = None if isinstance(election, _EveryReplica) else election.fence()
            if running and term is not None and started and term != started[0]:
                # Stepped down and led again between two looks (its lease expired while
                # it was paused, and nobody else campaigned): the running controller
                # writes under the old term, which etcd refuses. Start it anew.
                log.error("%s: leading again under a new term; restarting", name)
                LEADER_STATE.detach()
                running.pop().stop()
            started[:] = [term] if running else []
            writer = writer_for(election, store) if election.is_leader and not running else None
            if writer is not None:
                started[:] = [term]
                log.info("%s: leading; starting", name)
                controller: Controller | None = None
                try:
                    controller = make(writer)
                    controller.start()
                    running.append(controller)
                    LEADER_STATE.attach(controller)
                except Exception as exc:
                    # etcd unreachable or slow is expected; anything else is a bug: its trace
                    log.error("%s: could not start (%s); retrying", name, exc,
                              exc_info=not isinstance(exc, StoreError | TimeoutError))
                    if controller is not None:
                        controller.stop()
                    stopping.wait(retry_delay)
                    continue
            elif running and not election.is_leader:
                log.error("%s: lost leadership; stopping until leading again", name)
                LEADER_STATE.detach()
                running.pop().stop()
            with changed:
                changed.wait(retry_delay)
    finally:
        LEADER_STATE.detach()
        if running:
            running.pop().stop()
        election.resign()
        health.stop()
    return 0
