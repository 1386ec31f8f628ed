"""backoffQ: subjects that failed, waiting 1 s, 2 s, 4 s ... up to 10 s (the Kubernetes scheduler).

Also holds subjects due for periodic rescheduling: both are "come back at
time T", so one timed heap serves.
"""

from __future__ import annotations

import heapq
import itertools


class BackoffQueue:
    def __init__(self, initial: float = 1.0, maximum: float = 10.0) -> None:
        self.initial = initial
        self.maximum = maximum
        self._heap: list[tuple[float, int, str]] = []
        self._due: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: str) -> bool:
        return key in self._due

    def delay(self, key: str) -> float:
        n = self._attempts.get(key, 0)
        return float(min(self.maximum, self.initial * (2 ** min(n, 30))))

    def backoff(self, key: str, now: float) -> float:
        """Schedule ``key`` after its backoff, counting the attempt; returns the delay."""
        d = self.delay(key)
        self._attempts[key] = self._attempts.get(key, 0) + 1
        self.push_at(key, now + d)
        return d

    def forget(self, key: str) -> None:
        self._attempts.pop(key, None)

    def push_at(self, key: str, when: float) -> None:
        """Come back at ``when`` (the earlier of two requests wins)."""
        current = self._due.get(key)
        if current is not None and current <= when:
            return
        self._due[key] = when
        heapq.heappush(self._heap, (when, next(self._seq), key))

    def discard(self, key: str) -> None:
        self._due.pop(key, None)

    def pop_due(self, now: float) -> list[str]:
        out = []
        while self._heap and self._heap[0][0] <= now:
            when, _, key = heapq.heappop(self._heap)
            if self._due.get(key) == when:
                del self._due[key]
                out.append(key)
        return out

    def next_due(self) -> float | None:
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None
