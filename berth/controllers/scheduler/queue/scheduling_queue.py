"""The scheduling queue: activeQ, backoffQ and unschedulableQ together (the Kubernetes scheduler).

One subject is in at most one of them, and at most one attempt per subject
runs at a time: a subject changed while being scheduled is queued again when
its attempt is done. The clock is injectable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from berth.controllers.scheduler.queue.active import ActiveQueue
from berth.controllers.scheduler.queue.backoff import BackoffQueue
from berth.controllers.scheduler.queue.unschedulable import UnschedulableQueue

SortKey = Callable[[str, float], tuple[Any, ...]]


class SchedulingQueue:
    def __init__(self, sort_key: SortKey, *, initial_backoff: float = 1.0,
                 max_backoff: float = 10.0, flush_every: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sort_key = sort_key
        self.clock = clock
        self.flush_every = flush_every
        self.active = ActiveQueue()
        self.backoff = BackoffQueue(initial_backoff, max_backoff)
        self.unschedulable = UnschedulableQueue()
        self._in_flight: set[str] = set()
        self._dirty: set[str] = set()
        self._cond = threading.Condition()
        self._closed = False

    def __len__(self) -> int:
        with self._cond:
            return len(self.active) + len(self.backoff) + len(self.unschedulable)

    def depths(self) -> dict[str, int]:
        """How many subjects wait in each part: ``active`` (to be tried now), ``backoff``
        (tried again after a delay) and ``unschedulable`` (until something changes)."""
        with self._cond:
            return {"active": len(self.active), "backoff": len(self.backoff),
                    "unschedulable": len(self.unschedulable)}

    def add(self, key: str) -> None:
        """A new or changed subject: schedule it as soon as possible."""
        # Sorting a new subject may build it (decode, hash): not under the lock.
        # Re-sorting one already added later is a cache hit.
        sort_key = self.sort_key(key, self.clock())
        with self._cond:
            if key in self._in_flight:
                self._dirty.add(key)
                return
            self.backoff.discard(key)
            self.unschedulable.discard(key)
            self.active.push(key, sort_key)
            self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        """Schedule again after ``delay`` (periodic rescheduling)."""
        with self._cond:
            if key not in self.active:
                self.backoff.push_at(key, self.clock() + delay)
                self._cond.notify()

    def failed(self, key: str) -> float:
        """An error: retry after the exponential backoff."""
        with self._cond:
            delay = self.backoff.backoff(key, self.clock())
            self._cond.notify()
            return delay

    def unschedulable_now(self, key: str, metric_blind: bool = False) -> None:
        """Nothing fits ``key`` now; ``metric_blind``: nor can new metric values help."""
        with self._cond:
            if key not in self.active and key not in self.backoff:
                self.unschedulable.add(key, self.clock(), metric_blind)

    def succeeded(self, key: str) -> None:
        with self._cond:
            self.backoff.forget(key)

    def move_all_to_active(self, metrics_only: bool = False) -> None:
        """Something changed that may let waiting subjects fit (a cluster, a metric...);
        ``metrics_only``: metric values alone, which cannot help every subject."""
        with self._cond:
            now = self.clock()
            for key in self.unschedulable.drain(metrics_only):
                self.active.push(key, self.sort_key(key, now))
            self._cond.notify_all()

    def activate(self, keys: set[str]) -> None:
        """Move these waiting subjects (if still unschedulable) to activeQ."""
        with self._cond:
            now = self.clock()
            for key in keys:
                if key in self.unschedulable:
                    self.unschedulable.discard(key)
                    self.active.push(key, self.sort_key(key, now))
            self._cond.notify_all()

    def forget(self, key: str) -> None:
        """The subject is gone."""
        with self._cond:
            self.active.discard(key)
            self.backoff.discard(key)
            self.unschedulable.discard(key)
            self.backoff.forget(key)

    def pop(self, timeout: float | None = None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                now = self.clock()
                for key in self.backoff.pop_due(now):
                    self.active.push(key, self.sort_key(key, now))
                for key in self.unschedulable.drain_older(now - self.flush_every):
                    self.active.push(key, self.sort_key(key, now))
                ready = self.active.pop()
                if ready is not None:
                    if ready in self._in_flight:
                        self._dirty.add(ready)
                        continue
                    self._in_flight.add(ready)
                    return ready
                waits = [1.0]
                oldest = self.unschedulable.oldest()
                if oldest is not None:
                    waits.append(oldest + self.flush_every - now)
                due = self.backoff.next_due()
                if due is not None:
                    waits.append(due - now)
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    waits.append(left)
                self._cond.wait(max(0.0, min(waits)))
            return None

    def done(self, key: str) -> None:
        with self._cond:
            self._in_flight.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self.backoff.discard(key)
                self.unschedulable.discard(key)
                self.active.push(key, self.sort_key(key, self.clock()))
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
