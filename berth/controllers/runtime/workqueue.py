"""A work queue of keys: one in flight per key, latest wins, backoff on failure.

Items are keys, not values: a worker reads the current value from an
informer's cache when it gets to the key, so ten changes to one object while
it waits are handled once, with the latest value. A key added while it is
being processed is queued again when the worker says ``done``, never handed
to a second worker at the same time. Failed keys come back after an
exponential backoff; ``forget`` resets it.

A key added ``urgent`` goes before every key that is not: for work that is
short and that someone waits on (a cluster reported an object available:
judging it takes a moment, and a user is waiting for the application to be
RUNNING), so that it never waits behind a line of long work (applies). An
urgent key already waiting in the ordinary line moves ahead; its place there
is skipped when reached. A worker may take urgent keys only (``urgent_only``):
then an urgent key waits for no long work to finish either.

After :meth:`WorkQueue.shutdown` no key is handed out, however many wait: a
controller stopping (deposed, say) finishes what is in flight and begins
nothing more.

The clock is injectable so tests need not sleep.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)


class TemporaryError(Exception):
    """Processing failed but may succeed later: retry after ``delay`` (or backoff)."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


@dataclass(frozen=True, slots=True)
class Retry:
    """What a process function returns when its key must be processed again: a
    result, not an exception, for work whose failures are expected."""

    reason: str
    after: float | None = None  # None: the queue's exponential backoff


class PermanentError(Exception):
    """Processing failed for a reason retrying will not fix: log and drop the key."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        base_delay: float = 0.05,
        max_delay: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.clock = clock
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # any worker waits on it
        self._hurry = threading.Condition(lock)  # workers that take urgent keys only
        self._queue: deque[K] = deque()
        self._urgent: deque[K] = deque()  # taken first
        # The keys waiting, and of them those with a place in the urgent line. A key
        # taken is no longer in ``_queued``: its other place, if any, is skipped.
        self._queued: set[K] = set()
        self._hurried: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: dict[K, bool] = {}  # re-added while processing → whether urgent
        self._delayed: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._failures: dict[K, int] = {}
        self._shutdown = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._queued) + len(self._delayed)

    def add(self, key: K, *, urgent: bool = False) -> None:
        """Queue ``key`` now (a no-op if it is already waiting, unless it is ``urgent``
        and waits in the ordinary line: then it moves ahead)."""
        with self._cond:
            if self._shutdown:
                return
            if key in self._processing:
                self._dirty[key] = self._dirty.get(key, False) or urgent
            else:
                self._enqueue(key, urgent)

    def _enqueue(self, key: K, urgent: bool) -> None:
        if key not in self._queued:
            self._queued.add(key)
            if urgent:
                self._hurried.add(key)
                self._urgent.append(key)
                self._hurry.notify()
            else:
                self._queue.append(key)
            self._cond.notify()
        elif urgent and key not in self._hurried:
            self._hurried.add(key)
            self._urgent.append(key)
            self._hurry.notify()
            self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` once ``delay`` seconds have passed."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            heapq.heappush(self._delayed, (self.clock() + delay, next(self._seq), key))
            self._cond.notify()

    def backoff(self, key: K) -> float:
        """The delay the next failure of ``key`` would wait."""
        with self._cond:
            return self._backoff(key)

    def _backoff(self, key: K) -> float:
        n = self._failures.get(key, 0)
        return float(min(self.max_delay, self.base_delay * (2 ** min(n, 30))))

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its exponential backoff; returns the delay."""
        with self._cond:
            delay = self._backoff(key)
            self._failures[key] = self._failures.get(key, 0) + 1
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (it succeeded)."""
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None, *, urgent_only: bool = False) -> K | None:
        """The next key to process (``urgent_only``: the next urgent one), or None on
        shutdown or timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._shutdown:  # what waits stays unbegun: a stopping controller
                    return None  # (deposed, say) begins nothing more
                self._promote()
                key = self._take(urgent_only)
                if key is not None:
                    return key
                wait = None
                if urgent_only:
                    if deadline is not None:
                        wait = deadline - time.monotonic()
                        if wait <= 0:
                            return None
                    self._hurry.wait(wait)
                    continue
                if self._delayed:
                    wait = max(0.0, self._delayed[0][0] - self.clock())
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def _take(self, urgent_only: bool = False) -> K | None:
        """The next waiting key, urgent ones first, now in process (None: none waits)."""
        for line in (self._urgent,) if urgent_only else (self._urgent, self._queue):
            while line:
                key = line.popleft()
                if key in self._queued:  # else taken from its other place already
                    self._queued.discard(key)
                    self._hurried.discard(key)
                    self._processing.add(key)
                    return key
        return None

    def done(self, key: K) -> None:
        """The worker finished ``key``; queue it again if it changed meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._enqueue(key, self._dirty.pop(key))

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
            self._hurry.notify_all()

    def _promote(self) -> None:
        now = self.clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            if key in self._processing:
                self._dirty.setdefault(key, False)
            elif key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)


def _retry(queue: WorkQueue[K], key: K, reason: str, after: float | None) -> None:
    if after is None:
        after = queue.add_rate_limited(key)
    else:
        queue.add_after(key, after)
    log.warning("%s: %s; retrying in %.2fs", key, reason, after)


def run_worker(queue: WorkQueue[K], process: Callable[[K], Retry | None], *,
               urgent_only: bool = False) -> None:
    """Process keys (``urgent_only``: urgent ones) until the queue shuts down; failures
    are retried with backoff."""
    while True:
        key = queue.get(urgent_only=urgent_only)
        if key is None:
            return
        try:
            result = process(key)
        except TemporaryError as exc:
            _retry(queue, key, str(exc), exc.delay)
        except PermanentError as exc:
            queue.forget(key)
            log.error("%s: %s; not retrying", key, exc)
        except Exception:
            delay = queue.add_rate_limited(key)
            log.exception("%s: processing failed; retrying in %.2fs", key, delay)
        else:
            if result is None:
                queue.forget(key)
            else:
                _retry(queue, key, result.reason, result.after)
        finally:
            queue.done(key)


def start_workers(
    queue: WorkQueue[K], process: Callable[[K], Retry | None], count: int = 1,
    name: str = "worker", *, urgent_only: bool = False
) -> list[threading.Thread]:
    threads = [
        threading.Thread(target=run_worker, args=(queue, process), name=f"{name}-{i}",
                         kwargs={"urgent_only": urgent_only}, daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    return threads
