"""Supervised loops: a long-running loop that cannot die silently.

A :class:`Loop` runs one step of work over and over on its own thread. A
step that raises is logged with the loop's name and the loop goes on after a
backoff (0.1 s doubling to 10 s, reset by a good step); each step beats a
heartbeat. :meth:`Loop.alive` is false when the thread has ended or the last
beat is older than the loop's deadline — that is what ``/healthz`` reports,
so that a deployment restarts a wedged process instead of trusting it.

A step should return within its deadline: wait with a timeout, not forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from prometheus_client import Counter

log = logging.getLogger(__name__)

CRASHES = Counter("berth_loop_crashes_total", "Steps of a supervised loop that raised",
                  ["loop"])


class Loop:
    def __init__(self, name: str, step: Callable[[], None], *, deadline: float = 60.0,
                 initial_backoff: float = 0.1, max_backoff: float = 10.0) -> None:
        self.name = name
        self.step = step
        self.deadline = deadline
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.beat = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Loop:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def halt(self) -> None:
        """Ask the loop to end after its current step (see ``stop`` to wait for it)."""
        self._stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def alive(self) -> bool:
        """Running and beating within the deadline."""
        return (self._thread is not None and self._thread.is_alive()
                and time.monotonic() - self.beat <= self.deadline)

    def _run(self) -> None:
        backoff = self.initial_backoff
        while not self._stop.is_set():
            self.beat = time.monotonic()
            try:
                self.step()
            except Exception:
                CRASHES.labels(self.name).inc()
                log.exception("loop %s: a step failed; going on in %.1fs", self.name, backoff)
                self._stop.wait(backoff)
                backoff = min(self.max_backoff, backoff * 2)
            else:
                backoff = self.initial_backoff


__all__ = ["Loop"]
